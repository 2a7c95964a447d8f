"""Server errors are typed by meaning, from the codes and texts Fulcrum 2.1.1 and BCHN send
(measured against them, see docs/real-nodes.md and tests/realnode)."""

from __future__ import annotations

import pytest

from indexer.electrum import (
    ElectrumError,
    GenesisCoinbase,
    NotSupported,
    ServerBusy,
    UnknownTransaction,
    UnsupportedMethod,
)
from indexer.electrum.errors import error_of
from indexer.follow.chain import chain_moved

DAEMON = "daemon error: DaemonError({{'code': -5, 'message': {!r}}})"
NO_SUCH = "No such mempool or blockchain transaction. Use gettransaction for wallet transactions."
GENESIS = (
    "The genesis block coinbase is not considered an ordinary transaction and cannot be retrieved"
)


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (1, "No transaction matching the requested hash was found", UnknownTransaction),
        (1, "No transaction matching the requested hash found at height 1", UnknownTransaction),
        (1, "No confirmed transaction matching the requested hash was found", UnknownTransaction),
        (2, DAEMON.format(NO_SUCH), UnknownTransaction),
        (2, DAEMON.format(GENESIS), GenesisCoinbase),
        (-32601, "Unsupported request: blockchain.block.get", UnsupportedMethod),
        (
            3,
            "Excessive flood, please throttle your client implementation to not do this",
            ServerBusy,
        ),
        (4, "Batch limit exceeded", ServerBusy),
        (-32603, "internal error: boom", ElectrumError),
        (1, "the transaction was rejected by network rules.\n\nTX decode failed\n", ElectrumError),
        (1, "Height 99999 is out of range", ElectrumError),
        (2, "daemon error: DaemonError({'code': -28, 'message': 'Loading'})", ElectrumError),
    ],
)
def test_each_documented_answer_has_its_type(code: int, message: str, kind: type) -> None:
    error = error_of(code, message, "m")
    assert type(error) is kind
    assert (error.code, error.message, error.method) == (code, message, "m")  # kept verbatim


def test_an_unsupported_method_is_also_not_supported() -> None:
    assert isinstance(error_of(-32601, "Unsupported request: mempool.get"), NotSupported)


@pytest.mark.parametrize(
    ("code", "message", "moved"),
    [
        (1, "Height 120 is out of range", True),  # a height that vanished in a reorg
        (1, "No transaction matching the requested hash was found", True),
        (2, DAEMON.format(NO_SUCH), True),  # a walked block's transaction, reorganised away
        (2, DAEMON.format(GENESIS), False),  # would fail again at once: no walk can fix it
        (2, "daemon error: DaemonError({'code': -28, 'message': 'Loading'})", False),
        (4, "Batch limit exceeded", False),
        (-32603, "internal error: boom", False),
    ],
)
def test_only_a_moved_chain_restarts_a_walk(code: int, message: str, moved: bool) -> None:
    assert chain_moved(error_of(code, message)) is moved
