"""What can go wrong talking to an Electrum server, split by what the caller should do about it.

- `ElectrumError`: the server answered with a JSON-RPC error. The outcome is known; the message is
  kept byte for byte (the broadcaster classifies node reject reasons by substring). The errors
  whose meaning callers act on arrive as subclasses (`error_of` picks them from what Fulcrum
  and BCHN actually send, see docs/real-nodes.md): `UnknownTransaction`, `GenesisCoinbase`,
  `UnsupportedMethod` (also a `NotSupported`) and `ServerBusy`.
- `ElectrumTimeout`: no answer in time. The outcome is unknown.
- `ElectrumConnectionError`: the connection failed or was closed (or could not be made usable).
  The outcome of anything in flight is unknown.
- `NotSupported`: the server lacks an optional method (Rostrum's extensions on Fulcrum).
- `ElectrumProtocolError`: the server answered, but with something that breaks the protocol or
  does not check out (a transaction whose hash is not the txid asked for, a bad header size).
"""

from __future__ import annotations

# JSON-RPC and Electrum Cash error codes (see shared/reference/electrum.md).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
BAD_REQUEST = 1
DAEMON_ERROR = 2
EXCESSIVE_FLOOD = 3
LIMIT_EXCEEDED = 4


class ElectrumClientError(Exception):
    """Base of every error this client raises."""


class ElectrumError(ElectrumClientError):
    """A JSON-RPC error answered by the server: `code` and `message` exactly as sent."""

    def __init__(self, code: int, message: str, method: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.method = method

    def __str__(self) -> str:
        where = f" ({self.method})" if self.method else ""
        return f"server error {self.code}{where}: {self.message}"

    def __repr__(self) -> str:
        return f"ElectrumError({self.code!r}, {self.message!r}, {self.method!r})"


class UnknownTransaction(ElectrumError):  # noqa: N818 (an answer: no such transaction)
    """The server (or its node) has no such transaction: Fulcrum's code 1 "No transaction
    matching the requested hash…" (`transaction.get_height`, `get_merkle`) or the node's
    "No such mempool or blockchain transaction" relayed as code 2 (`transaction.get`)."""


class GenesisCoinbase(ElectrumError):  # noqa: N818 (names what was asked for)
    """`transaction.get` of the genesis coinbase: nodes refuse it (code 2) because it never
    entered the UTXO set; it exists, but cannot be fetched."""


class ServerBusy(ElectrumError):  # noqa: N818 (a state of the server)
    """The server refuses for load, not for the request: Fulcrum's "Excessive flood" (3, and
    it disconnects) or "Batch limit exceeded" (4). Worth retrying later, or elsewhere."""


class ElectrumTimeout(ElectrumClientError, TimeoutError):  # noqa: N818 (reads as an event)
    """No response within the request's timeout (the request may still have taken effect)."""


class ElectrumConnectionError(ElectrumClientError, ConnectionError):
    """The connection could not be made, was lost, or the server is unusable for us."""


class NotSupported(ElectrumClientError):  # noqa: N818 (a capability answer, not a failure)
    """The server does not offer this optional method (e.g. Rostrum's `blockchain.block.get`)."""


class UnsupportedMethod(ElectrumError, NotSupported):  # noqa: N818 (a capability answer)
    """Code -32601: the server does not have the method (Fulcrum: "Unsupported request: …")."""


class ElectrumProtocolError(ElectrumClientError):
    """The server's answer is malformed or fails verification."""


class BlockChanged(ElectrumClientError):  # noqa: N818 (a state of the chain, not a fault)
    """The block at a height is not the one expected: a reorg happened (or the server follows
    another chain) while it was being fetched."""


_UNKNOWN_TX_TEXT = (
    "no transaction matching",  # Fulcrum: get_height, get_merkle, get_confirmed_blockhash
    "no confirmed transaction matching",
    "no such mempool or blockchain transaction",  # BCHN's getrawtransaction, relayed
)
_GENESIS_COINBASE_TEXT = "genesis block coinbase is not considered an ordinary transaction"


def error_of(code: int, message: str, method: str = "") -> ElectrumError:
    """The ElectrumError for a server's answer: a subclass when its meaning is one callers act
    on. Matched on code and text together, as the servers word them (Fulcrum 2.1.1's
    Servers.cpp and RPC.cpp; BCHN's RPC messages as Fulcrum relays them)."""
    text = message.lower()
    if code == METHOD_NOT_FOUND:
        return UnsupportedMethod(code, message, method)
    if code in (EXCESSIVE_FLOOD, LIMIT_EXCEEDED):
        return ServerBusy(code, message, method)
    if code in (BAD_REQUEST, DAEMON_ERROR):
        if _GENESIS_COINBASE_TEXT in text:
            return GenesisCoinbase(code, message, method)
        if any(t in text for t in _UNKNOWN_TX_TEXT):
            return UnknownTransaction(code, message, method)
    return ElectrumError(code, message, method)
