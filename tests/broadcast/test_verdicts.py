"""Verdict classification against the reference table (shared/reference/electrum.md)."""

from __future__ import annotations

import pytest

from broadcast.verdicts import (
    Outcome,
    Reason,
    Verdict,
    classify_error,
    classify_message,
    classify_rpc_error,
    node_message,
)

FULCRUM = "the transaction was rejected by network rules.\n\n{}\n"

# Every row of the reference table, with messages worded as BCHN words them.
TABLE = [
    ("txn-mempool-conflict", Reason.CONFLICT),
    ("bad-txns-inputs-spent", Reason.CONFLICT),
    ("Missing inputs", Reason.MISSING_INPUTS),
    ("missing-inputs", Reason.MISSING_INPUTS),
    ("bad-txns-inputs-missingorspent", Reason.MISSING_INPUTS),
    ("min relay fee not met, 100 < 185", Reason.FEE),
    ("mempool min fee not met, 185 < 370", Reason.FEE),
    ("mempool full", Reason.FEE),
    ("absurdly-high-fee, 100000000 > 10000000", Reason.FEE_TOO_HIGH),
    ("dust, output 0 carries 100 sats; its dust threshold is 546", Reason.NONSTANDARD),
    ("scriptpubkey", Reason.NONSTANDARD),
    ("tx-size", Reason.NONSTANDARD),
    ("version", Reason.NONSTANDARD),
    ("scriptsig-size", Reason.NONSTANDARD),
    ("scriptsig-not-pushonly", Reason.NONSTANDARD),
    ("oversize-op-return", Reason.NONSTANDARD),
    ("non-BIP68-final", Reason.NONSTANDARD),
    ("too-many-sigchecks", Reason.NONSTANDARD),
    (
        "non-mandatory-script-verify-flag (Signature must be zero for failed CHECK(MULTI)SIG)",
        Reason.NONSTANDARD,
    ),
    (
        "mandatory-script-verify-flag-failed (Script evaluated without error but finished "
        "with a false/empty top stack element)",
        Reason.INVALID,
    ),
    ("bad-txns-in-belowout, value in (0.0001) < value out (0.0002)", Reason.INVALID),
    ("bad-txns-token-in-belowout", Reason.INVALID),
    ("bad-txns-token-nft-ex-nihilo", Reason.INVALID),
    ("bad-txns-nonfinal, non-final transaction", Reason.INVALID),
    ("bad-txns-vout-tokenprefix", Reason.INVALID),
    ("TX decode failed", Reason.MALFORMED),
]


@pytest.mark.parametrize(("message", "reason"), TABLE)
def test_table_rows_wrapped_by_fulcrum(message: str, reason: Reason) -> None:
    found = classify_error(1, FULCRUM.format(message))
    assert (found.outcome, found.reason) == (Outcome.REJECTED, reason)


@pytest.mark.parametrize(("message", "reason"), TABLE)
def test_table_rows_bare(message: str, reason: Reason) -> None:
    assert classify_message(message).reason is reason


@pytest.mark.parametrize(
    ("message", "confirmed"),
    [
        ("transaction already in block chain", True),
        ("18: txn-already-known", True),  # BCHN's testmempoolaccept: the outputs are in its UTXOs
        ("18: txn-already-in-mempool", False),
    ],
)
def test_already_known_is_accepted(message: str, confirmed: bool) -> None:
    for found in (classify_error(1, FULCRUM.format(message)), classify_message(message)):
        assert (found.outcome, found.reason, found.confirmed) == (
            Outcome.ACCEPTED,
            None,
            confirmed,
        )


# BCHN 28.0.1's answers, verbatim (docs/real-nodes.md): sendrawtransaction's RPC errors, and
# testmempoolaccept's `reject-reason` (an "allowed: false" result, not an error).
BCHN_SEND = [
    (-26, "txn-mempool-conflict (code 18)", Reason.CONFLICT),
    (-25, "Missing inputs", Reason.MISSING_INPUTS),
    (-26, "dust (code 64)", Reason.NONSTANDARD),
    (-26, "min relay fee not met (code 66)", Reason.FEE),
    (
        -26,
        "bad-txns-in-belowout, value in (50.00) < value out (50.0000001) (code 16)",
        Reason.INVALID,
    ),
    (
        -26,
        "mandatory-script-verify-flag-failed (Signature must be zero for failed "
        "CHECK(MULTI)SIG operation) (code 16)",
        Reason.INVALID,
    ),
    (-26, "absurdly-high-fee, 4950000000 > 10000000 (code 256)", Reason.FEE_TOO_HIGH),
    (
        -26,
        "bad-txns-premature-spend-of-coinbase, tried to spend coinbase at depth 6 (code 16)",
        Reason.INVALID,
    ),
    (-26, "bad-txns-nonfinal, non-final transaction (code 64)", Reason.INVALID),
    (-22, "TX decode failed", Reason.MALFORMED),
]
BCHN_TEST = [
    ("18: txn-mempool-conflict", Reason.CONFLICT),
    ("missing-inputs", Reason.MISSING_INPUTS),
    ("64: dust", Reason.NONSTANDARD),
    ("66: min relay fee not met", Reason.FEE),
    ("16: bad-txns-in-belowout", Reason.INVALID),
    (
        "16: mandatory-script-verify-flag-failed (Signature must be zero for failed "
        "CHECK(MULTI)SIG operation)",
        Reason.INVALID,
    ),
    ("64: non-mandatory-script-verify-flag (Non-canonical DER signature)", Reason.NONSTANDARD),
    ("256: absurdly-high-fee", Reason.FEE_TOO_HIGH),
    ("64: tx-size", Reason.NONSTANDARD),
]


@pytest.mark.parametrize(("code", "message", "reason"), BCHN_SEND)
def test_bchn_sendrawtransaction_errors(code: int, message: str, reason: Reason) -> None:
    found = classify_rpc_error(code, message)
    assert (found.outcome, found.reason) == (Outcome.REJECTED, reason)
    # the same words relayed by Fulcrum (code 1, its wrapper) land in the same reason
    if code != -22:
        assert classify_error(1, FULCRUM.format(message)).reason is reason


@pytest.mark.parametrize(("message", "reason"), BCHN_TEST)
def test_bchn_testmempoolaccept_reasons(message: str, reason: Reason) -> None:
    assert classify_message(message) == classify_message(message.partition(": ")[2] or message)
    assert (classify_message(message).outcome, classify_message(message).reason) == (
        Outcome.REJECTED,
        reason,
    )


def test_bchn_already_in_chain_is_accepted_and_confirmed() -> None:
    found = classify_rpc_error(-27, "transaction already in block chain")
    assert (found.outcome, found.confirmed) == (Outcome.ACCEPTED, True)


@pytest.mark.parametrize("code", [-28, -1, -32601, -5, -8])
def test_bchn_codes_without_a_reject_reason_leave_the_outcome_unknown(code: int) -> None:
    found = classify_rpc_error(code, "txn-mempool-conflict (code 18)")
    assert (found.outcome, found.reason) == (Outcome.UNKNOWN, Reason.UNKNOWN)


def test_bchn_rejection_in_words_no_row_knows_is_other() -> None:
    found = classify_rpc_error(-26, "some-new-policy (code 64)")
    assert (found.outcome, found.reason) == (Outcome.REJECTED, Reason.OTHER)


@pytest.mark.parametrize("code", [2, 3, 4, -32603, -32602])
def test_codes_other_than_rejection_leave_the_outcome_unknown(code: int) -> None:
    # even with a message that would classify under code 1
    found = classify_error(code, FULCRUM.format("txn-mempool-conflict"))
    assert (found.outcome, found.reason) == (Outcome.UNKNOWN, Reason.UNKNOWN)


@pytest.mark.parametrize(
    "message", ["something no table knows", "", "bad-request: policy 7 says no"]
)
def test_unrecognised_refusal_is_still_a_rejection(message: str) -> None:
    # code 1 is the node refusing: the words are unknown, the refusal is not
    found = classify_error(1, FULCRUM.format(message))
    assert (found.outcome, found.reason) == (Outcome.REJECTED, Reason.OTHER)
    assert classify_error(1, message).outcome is Outcome.REJECTED  # without Fulcrum's wrapper


def test_leading_code_decides_over_words_in_the_detail() -> None:
    # the detail mentions "dust" and "version"; the code says consensus failure
    message = (
        "mandatory-script-verify-flag-failed (dust-like amount failed a covenant check; "
        "transaction version 2)"
    )
    assert classify_message(message).reason is Reason.INVALID


def test_version_only_counts_as_the_reject_code() -> None:
    assert classify_message("unsupported version of something").reason is Reason.OTHER
    assert classify_message("version").reason is Reason.NONSTANDARD


def test_old_numeric_prefix() -> None:
    assert classify_message("64: dust").reason is Reason.NONSTANDARD
    assert classify_message("18: txn-mempool-conflict").reason is Reason.CONFLICT


def test_consensus_codes_beyond_the_table_are_invalid() -> None:
    assert classify_message("bad-txns-vin-empty").reason is Reason.INVALID
    assert (
        classify_message(
            "bad-txns-premature-spend-of-coinbase, tried to spend coinbase at depth 5"
        ).reason
        is Reason.INVALID
    )
    # a policy code that starts like a consensus one
    assert classify_message("bad-txns-nonstandard-inputs").reason is Reason.NONSTANDARD


def test_node_message_strips_the_wrapper() -> None:
    assert node_message(FULCRUM.format("txn-mempool-conflict")) == "txn-mempool-conflict"
    assert node_message("plain") == "plain"


def test_verdict_json_round_trip_keeps_the_raw_message() -> None:
    raw = FULCRUM.format("dust, output 1")
    verdict = Verdict.of("tcp://n:1", classify_error(1, raw), raw, 0.25)
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict
    assert again.message == raw
