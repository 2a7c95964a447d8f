"""A dry run's last word from a BCHN node (`with_node_verdict`): its `testmempoolaccept`
answer decides, in BCHN 28.0.1's own words (docs/real-nodes.md)."""

from __future__ import annotations

from broadcast.bitcoind import MempoolVerdict
from broadcast.dryrun import CHECKS, Validation, with_node_verdict
from broadcast.verdicts import ACCEPTED, Reason, classify_message

NODE = "http://127.0.0.1:8332"
PASSED = dict.fromkeys(CHECKS, "passed")
OURS_VALID = Validation(True, "the transaction would be accepted", None, PASSED, 500, 250)
OURS_CONFLICT = Validation(False, "input 0 is spent in the mempool", Reason.CONFLICT, PASSED)


def node_said(reason: str) -> MempoolVerdict:
    return MempoolVerdict(NODE, ACCEPTED if not reason else classify_message(reason), reason)


def test_allowed_keeps_our_figures() -> None:
    out = with_node_verdict(OURS_VALID, node_said(""))
    assert (out.valid, out.reason, out.fee, out.checks["node"]) == (True, None, 500, "passed")
    assert out.to_json()["node"] == {"node": NODE, "allowed": True, "reject_reason": None}


def test_the_node_overrules_our_checks_either_way() -> None:
    allowed = with_node_verdict(OURS_CONFLICT, node_said(""))
    assert (allowed.valid, allowed.reason) == (True, None)
    assert "our own checks said" in allowed.message
    refused = with_node_verdict(OURS_VALID, node_said("18: txn-mempool-conflict"))
    assert (refused.valid, refused.reason, refused.checks["node"]) == (
        False,
        Reason.CONFLICT,
        "failed",
    )
    assert refused.node is not None and refused.node.message == "18: txn-mempool-conflict"
    assert "18: txn-mempool-conflict" in refused.message


def test_already_known_to_the_node_is_valid() -> None:
    for reason, where in (
        ("18: txn-already-in-mempool", "mempool"),
        ("18: txn-already-known", "block chain"),
    ):
        out = with_node_verdict(OURS_VALID, node_said(reason))
        assert (out.valid, out.checks["node"]) == (True, "passed")
        assert f"{NODE}'s {where}" in out.message
        assert out.node is not None and out.node.allowed is False  # the node's own flag
