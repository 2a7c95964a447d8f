"""What can go wrong talking to a BCHN node over JSON-RPC, split by what the caller does about it.

- `RpcError`: the node answered with a JSON-RPC error; `code` and `message` exactly as sent.
  `UnknownBlock` / `UnknownTransaction` / `HeightOutOfRange` are the answers callers act on
  (BCHN's codes −5 and −8, see docs/real-nodes.md).
- `RpcBusy`: HTTP 503, the node's RPC work queue is full: worth retrying shortly.
- `RpcConnectionError`: the node could not be reached, or the connection broke; also a refused
  login (HTTP 401/403), which retrying cannot fix.
- `RpcTimeout`: no answer in time.
- `RpcProtocolError`: an answer that is not what the call returns (not JSON, a block that is
  not the one asked for).
"""

from __future__ import annotations

# BCHN's RPC error codes (src/rpc/protocol.h) that ladle acts on.
RPC_METHOD_NOT_FOUND = -32601
RPC_MISC_ERROR = -1
RPC_INVALID_ADDRESS_OR_KEY = -5  # unknown block or transaction
RPC_INVALID_PARAMETER = -8  # e.g. "Block height out of range"
RPC_IN_WARMUP = -28


class BitcoindClientError(Exception):
    """Base of every error the node client raises."""


class RpcError(BitcoindClientError):
    """A JSON-RPC error answered by the node."""

    def __init__(self, code: int, message: str, method: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.method = method

    def __str__(self) -> str:
        where = f" ({self.method})" if self.method else ""
        return f"node error {self.code}{where}: {self.message}"


class UnknownBlock(RpcError):  # noqa: N818 (an answer: no such block)
    """−5 "Block not found": the node has no block with that hash."""


class UnknownTransaction(RpcError):  # noqa: N818 (an answer: no such transaction)
    """−5 "No such mempool or blockchain transaction" (without -txindex: "No such mempool
    transaction")."""


class HeightOutOfRange(RpcError):  # noqa: N818 (an answer: beyond the node's tip)
    """−8 "Block height out of range": above the node's tip (or the chain shrank)."""


class RpcBusy(BitcoindClientError):  # noqa: N818 (a state of the node)
    """HTTP 503: the node's RPC work queue is full (`-rpcworkqueue`)."""


class RpcConnectionError(BitcoindClientError, ConnectionError):
    """The node is unreachable, the connection broke, or the login was refused."""


class RpcTimeout(BitcoindClientError, TimeoutError):  # noqa: N818 (reads as an event)
    """No answer within the request's timeout."""


class RpcProtocolError(BitcoindClientError):
    """An answer that breaks the protocol or does not check out."""


def error_of(code: int, message: str, method: str = "") -> RpcError:
    """The RpcError for a node's answer: a subclass when callers act on its meaning."""
    text = message.lower()
    if code == RPC_INVALID_ADDRESS_OR_KEY:
        if "block not found" in text:
            return UnknownBlock(code, message, method)
        if "no such mempool" in text or ("no such" in text and "transaction" in text):
            return UnknownTransaction(code, message, method)
    if code == RPC_INVALID_PARAMETER and "out of range" in text:
        return HeightOutOfRange(code, message, method)
    return RpcError(code, message, method)
