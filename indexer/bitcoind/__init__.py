"""BCHN (Bitcoin Cash Node) over its JSON-RPC: `rpc.BitcoindRpc` (HTTP/1.1, login by user and
password or cookie file, `RpcAddress`) and the errors it raises."""

from indexer.bitcoind.errors import (
    BitcoindClientError,
    HeightOutOfRange,
    RpcBusy,
    RpcConnectionError,
    RpcError,
    RpcProtocolError,
    RpcTimeout,
    UnknownBlock,
    UnknownTransaction,
)
from indexer.bitcoind.rpc import RpcAddress

__all__ = [
    "BitcoindClientError",
    "HeightOutOfRange",
    "RpcAddress",
    "RpcBusy",
    "RpcConnectionError",
    "RpcError",
    "RpcProtocolError",
    "RpcTimeout",
    "UnknownBlock",
    "UnknownTransaction",
]
