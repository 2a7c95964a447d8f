"""BCHN (Bitcoin Cash Node) as a chain source: its JSON-RPC over HTTP (`BitcoindClient`, login by
user and password or cookie file) and its ZMQ pushes (`ZmqListener`). The follower reads whole
blocks from it (`getblock … 0`), which an Electrum server without Rostrum's extensions cannot
hand out."""

from indexer.bitcoind.client import BitcoindClient
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
from indexer.bitcoind.notify import ZmqListener
from indexer.bitcoind.rpc import RpcAddress

__all__ = [
    "BitcoindClient",
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
    "ZmqListener",
]
