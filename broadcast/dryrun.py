"""Dry run: would the nodes accept this transaction? Checked here, nothing is sent.

The checks follow a node's own order (BCHN's `AcceptToMemoryPool`), so the first failure is the
reason a node would give: decoding, standardness, whether the transaction is already known,
mempool conflicts, inputs existing and unspent, finality, values, token rules, spent-output
standardness, fee, and finally scripts (libauth, when available). Reasons are the broadcast
verdict reasons, so a dry run and a real broadcast speak the same language.

When a BCHN node is a target, its `testmempoolaccept` has the last word (`with_node_verdict`):
the real node's policy and consensus rules, of its version, against its own mempool. Our checks
still say which step fails and what the fee is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bch import policy
from bch.tx import SEQUENCE_FINAL, Transaction, TxOutput
from broadcast.bitcoind import MempoolVerdict
from broadcast.spent import ChainTip, ChainView, SpentOutput
from broadcast.verdicts import Outcome, Reason, classify_message
from verify.libauth import AsyncLibauthVerifier, VerifierUnavailable

CHECKS = (
    "decoding",
    "standardness",
    "conflicts",
    "inputs",
    "finality",
    "values",
    "tokens",
    "fee",
    "scripts",
)
COINBASE_MATURITY = 100
LOCKTIME_THRESHOLD = 500_000_000  # below: a block height; from it: a Unix time


class _Rejected(Exception):  # noqa: N818 (control flow inside this module)
    def __init__(self, check: str, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.check = check
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class Validation:
    valid: bool
    message: str
    reason: Reason | None = None
    checks: dict[str, str] = field(default_factory=dict)  # check -> passed/failed/skipped/…
    fee: int | None = None
    size: int | None = None
    inputs: tuple[SpentOutput, ...] = ()  # what the inputs looked like (for a diagnosis)
    node: MempoolVerdict | None = None  # a BCHN node's testmempoolaccept, when one was asked

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "status": "valid" if self.valid else "rejected",
            "message": self.message,
        }
        if self.reason is not None:
            out["reason"] = self.reason.value
        out["checks"] = dict(self.checks)
        if self.fee is not None and self.size:
            out["fee"] = self.fee
            out["size"] = self.size
            out["fee_per_byte"] = round(self.fee / self.size, 6)
        if self.node is not None:
            out["node"] = {
                "node": self.node.node,
                "allowed": self.node.allowed,
                "reject_reason": self.node.message or None,
            }
        return out


def with_node_verdict(ours: Validation, node: MempoolVerdict) -> Validation:
    """`ours` with a node's `testmempoolaccept` deciding valid/rejected and the reason (the
    node's reject reason kept verbatim); already in its mempool or chain is valid."""
    checks = {**ours.checks, "node": "passed" if node.allowed else "failed"}
    found = node.classification
    if node.allowed:
        if ours.valid:
            message = f"{ours.message}; {node.node} would accept it (testmempoolaccept)"
        else:
            message = (
                f"{node.node} would accept it (testmempoolaccept), though our own checks "
                f"said: {ours.message}"
            )
        return replace(ours, valid=True, message=message, reason=None, checks=checks, node=node)
    if found.outcome is Outcome.ACCEPTED:
        where = "block chain" if found.confirmed else "mempool"
        checks["node"] = "passed"
        message = (
            f"the transaction is already in {node.node}'s {where} ({node.message}): "
            "broadcasting it again is harmless"
        )
        return replace(ours, valid=True, message=message, reason=None, checks=checks, node=node)
    message = f"{node.node} would reject it: {node.message} (testmempoolaccept)"
    return replace(
        ours, valid=False, message=message, reason=found.reason, checks=checks, node=node
    )


def malformed(message: str) -> Validation:
    """The bytes are not a transaction."""
    checks = dict.fromkeys(CHECKS, "not run")
    checks["decoding"] = "failed"
    return Validation(False, message, Reason.MALFORMED, checks)


def _violation_reason(violation: policy.PolicyViolation) -> Reason:
    classified = classify_message(violation.reason).reason
    return classified if classified not in (None, Reason.OTHER) else Reason.NONSTANDARD


def _first(check: str, violations: Sequence[policy.PolicyViolation]) -> None:
    if violations:
        v = violations[0]
        raise _Rejected(check, _violation_reason(v), f"{v.reason}: {v.message}")


def check_standardness(tx: Transaction, vm_year: int) -> None:
    _first("standardness", policy.standardness_errors(tx, vm_year=vm_year))


def check_inputs(tx: Transaction, inputs: Sequence[SpentOutput]) -> None:
    """Conflicts first (a node checks its mempool's spends before its UTXO set), then inputs
    that do not exist or are spent in the chain."""
    for i, info in enumerate(inputs):
        if info.unspent is False and info.spent_in == "mempool":
            raise _Rejected(
                "conflicts",
                Reason.CONFLICT,
                f"input {i} spends {info.outpoint}, which mempool transaction {info.spender} "
                "already spends (txn-mempool-conflict)",
            )
    for i, info in enumerate(inputs):
        if not info.exists:
            raise _Rejected(
                "inputs",
                Reason.MISSING_INPUTS,
                f"input {i} spends {info.outpoint}, which does not exist: no node asked knows "
                "that output (missing-inputs)",
            )
        if info.unspent is False:
            where = (
                f" by transaction {info.spender} at height {info.spender_height}"
                if info.spender is not None
                else ""
            )
            raise _Rejected(
                "inputs",
                Reason.MISSING_INPUTS,
                f"input {i} spends {info.outpoint}, which was already spent{where} "
                "(missing-inputs)",
            )


def check_finality(tx: Transaction, inputs: Sequence[SpentOutput], tip: ChainTip) -> None:
    """Locktime against the next block (time locks against median time past, BIP113), and
    coinbase maturity."""
    next_height = tip.height + 1
    if tx.locktime and any(i.sequence != SEQUENCE_FINAL for i in tx.inputs):
        by_height = tx.locktime < LOCKTIME_THRESHOLD
        cutoff = next_height if by_height else tip.median_time_past
        if tx.locktime >= cutoff:
            unit = "block height" if by_height else "median time past"
            raise _Rejected(
                "finality",
                Reason.INVALID,
                f"locktime {tx.locktime} is not yet reached ({unit} is {cutoff}) "
                "(bad-txns-nonfinal)",
            )
    for i, info in enumerate(inputs):
        if info.parent_coinbase and info.parent_height is not None and info.parent_height > 0:
            depth = next_height - info.parent_height
            if depth < COINBASE_MATURITY:
                raise _Rejected(
                    "finality",
                    Reason.INVALID,
                    f"input {i} spends a coinbase output at depth {depth}; it matures at "
                    f"{COINBASE_MATURITY} (bad-txns-premature-spend-of-coinbase)",
                )


def check_values(tx: Transaction, spent: Sequence[TxOutput]) -> int:
    """The fee, or the rejection when the outputs spend more than the inputs bring."""
    value_in = sum(o.value for o in spent)
    value_out = sum(o.value for o in tx.outputs)
    if value_in < value_out:
        raise _Rejected(
            "values",
            Reason.INVALID,
            f"value in ({value_in} sats) < value out ({value_out} sats) (bad-txns-in-belowout)",
        )
    return value_in - value_out


def check_tokens(tx: Transaction, spent: Sequence[TxOutput]) -> None:
    _first("tokens", policy.token_balance_errors(tx, spent))


def check_fee(tx: Transaction, spent: Sequence[TxOutput], vm_year: int) -> None:
    """Spent-output standardness (a node checks it just before the fee), then the relay fee."""
    _first("inputs", policy.input_standardness_errors(tx, spent, vm_year=vm_year))
    low = policy.check_fee(tx, spent)
    if low is not None:
        raise _Rejected("fee", Reason.FEE, f"{low.message} sats for {tx.size()} bytes")


async def check_scripts(
    tx: Transaction,
    spent: Sequence[TxOutput],
    verifier: AsyncLibauthVerifier | None,
    vm_year: int,
) -> bool:
    """True if every script was verified valid, False if no verifier could check them."""
    if verifier is None:
        return False
    try:
        strict = await verifier.verify(tx, spent, vm=vm_year, standard=True)
        if strict.valid:
            return True
        relaxed = await verifier.verify(tx, spent, vm=vm_year, standard=False)
    except VerifierUnavailable:
        return False
    if relaxed.valid:
        raise _Rejected(
            "scripts",
            Reason.NONSTANDARD,
            f"non-mandatory-script-verify-flag ({strict.error})",
        )
    raise _Rejected(
        "scripts", Reason.INVALID, f"mandatory-script-verify-flag-failed ({relaxed.error})"
    )


async def dry_run(
    tx: Transaction,
    view: ChainView,
    *,
    verifier: AsyncLibauthVerifier | None = None,
    vm_year: int = 2026,
) -> Validation:
    """Validate `tx` as a node would, without sending it. SourceUnavailable propagates: when no
    node can be asked, the answer is unknown, not "valid"."""
    checks = dict.fromkeys(CHECKS, "not run")
    checks["decoding"] = "passed"
    inputs: tuple[SpentOutput, ...] = ()
    fee: int | None = None
    try:
        check_standardness(tx, vm_year)
        checks["standardness"] = "passed"
        height = await view.transaction_height(tx.txid_hex)
        if height is not None:
            where = "the mempool" if height <= 0 else f"the block chain (height {height})"
            checks.update(dict.fromkeys(CHECKS[2:], "skipped"))
            message = f"the transaction is already in {where}: broadcasting it again is harmless"
            return Validation(True, message, checks=checks)
        outpoints = [txin.outpoint for txin in tx.inputs]
        inputs = tuple(await view.spent_outputs(outpoints, find_spenders=True))
        check_inputs(tx, inputs)
        checks["conflicts"] = checks["inputs"] = "passed"
        check_finality(tx, inputs, await view.chain_tip())
        checks["finality"] = "passed"
        spent = [info.output for info in inputs if info.output is not None]
        fee = check_values(tx, spent)
        checks["values"] = "passed"
        check_tokens(tx, spent)
        checks["tokens"] = "passed"
        check_fee(tx, spent, vm_year)
        checks["fee"] = "passed"
        scripts = await check_scripts(tx, spent, verifier, vm_year)
        checks["scripts"] = "passed" if scripts else "skipped"
    except _Rejected as rejected:
        checks[rejected.check] = "failed"
        return Validation(False, rejected.message, rejected.reason, checks, fee, tx.size(), inputs)
    note = "" if scripts else "; scripts not checked (no verifier available)"
    return Validation(
        True,
        f"the transaction would be accepted: standard, inputs unspent, fee {fee} sats for "
        f"{tx.size()} bytes{note}",
        None,
        checks,
        fee,
        tx.size(),
        inputs,
    )
