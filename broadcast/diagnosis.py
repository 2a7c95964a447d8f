"""Diagnosis of a failed broadcast: what each input looks like, which transactions conflict
with it and on which nodes, what every node said and how far they agree, in one sentence a
person can act on.

The common failures are one of a handful: an input spent by a competing trade that reached the
mempools first (a double spend: first seen wins, nothing replaces it), an input spent long ago
or never created, a fee too low, a non-standard or invalid transaction. The summary names the
one that applies, with the txids needed to look further.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bch.tx import Transaction
from broadcast.nodes import NodeLink
from broadcast.records import BroadcastRecord
from broadcast.spent import NodeSpentOutputs, SourceUnavailable, SpentOutput, SpentOutputSource
from broadcast.status import Status
from broadcast.verdicts import Outcome, Reason, node_message

# Nodes whose own view of the inputs is worth asking for (they said the inputs are the problem).
_INPUT_REASONS = frozenset({Reason.CONFLICT, Reason.MISSING_INPUTS})
MAX_NODE_VIEWS = 8

_PHRASES = {
    Reason.CONFLICT: "a conflict (an input is already spent by another mempool transaction)",
    Reason.MISSING_INPUTS: "missing inputs (an input is unknown or already spent in the chain)",
    Reason.FEE: "a fee below the node's minimum",
    Reason.FEE_TOO_HIGH: "a fee above the node's safety limit",
    Reason.NONSTANDARD: "a non-standard transaction (relay policy)",
    Reason.INVALID: "an invalid transaction (consensus rules)",
    Reason.MALFORMED: "a malformed transaction",
    Reason.OTHER: "a reason the service does not recognise (see the nodes' messages)",
    Reason.UNKNOWN: "an unknown reason",
}


def reason_phrase(reason: Reason) -> str:
    return _PHRASES[reason]


@dataclass(frozen=True, slots=True)
class Conflict:
    input: int
    outpoint: str
    txid: str
    height: int | None  # > 0 confirmed, 0 or -1 mempool
    nodes: tuple[str, ...]

    @property
    def where(self) -> str:
        return "chain" if self.height is not None and self.height > 0 else "mempool"

    def to_json(self) -> dict[str, object]:
        return {
            "input": self.input,
            "outpoint": self.outpoint,
            "txid": self.txid,
            "in": self.where,
            "height": self.height if self.height is not None and self.height > 0 else None,
            "nodes": list(self.nodes),
        }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    inputs: tuple[SpentOutput, ...] | None  # None: no source could be asked
    conflicts: tuple[Conflict, ...]
    record: BroadcastRecord | None  # None for a dry run (nothing was sent)
    fee: int | None
    size: int
    summary: str
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "inputs": None
            if self.inputs is None
            else [_input_json(i, s) for i, s in enumerate(self.inputs)],
            "conflicts": [c.to_json() for c in self.conflicts],
        }
        if self.record is not None:
            t = self.record.tally
            out["verdicts"] = [
                {
                    "node": s.node,
                    "outcome": "outstanding" if s.verdict is None else s.verdict.outcome.value,
                    "reason": None
                    if s.verdict is None or s.verdict.reason is None
                    else s.verdict.reason.value,
                    "message": None if s.verdict is None else s.verdict.message,
                }
                for s in self.record.slots
            ]
            out["consensus"] = {
                "status": self.record.status.value,
                "nodes_total": t.nodes_total,
                "accepted": t.accepted,
                "rejected": t.rejected,
                "unknown": t.unknown,
                "outstanding": t.outstanding,
                "majority": t.majority,
                "majority_reason": None if t.majority_reason is None else t.majority_reason.value,
                "agreeing": _agreeing(self.record),
            }
        if self.fee is not None:
            out["fee"] = {
                "fee": self.fee,
                "size": self.size,
                "fee_per_byte": round(self.fee / self.size, 6),
            }
        out["summary"] = self.summary
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _input_json(index: int, info: SpentOutput) -> dict[str, object]:
    out = info.output
    return {
        "index": index,
        "outpoint": str(info.outpoint),
        "exists": info.exists,
        "value": None if out is None else out.value,
        "token": None if out is None or out.token is None else out.token.to_json(),
        "parent_height": info.parent_height,
        "unspent": info.unspent,
        "spent_by": info.spender,
        "spent_in": info.spent_in,
        "spent_at_height": info.spender_height
        if info.spender_height is not None and info.spender_height > 0
        else None,
    }


def _agreeing(record: BroadcastRecord) -> int:
    """How many nodes gave the majority's answer (acceptances, or the top rejection reason)."""
    t = record.tally
    if record.status is Status.ACCEPTED or t.majority_reason is None:
        return t.accepted
    return sum(
        1
        for s in record.slots
        if s.verdict is not None
        and s.verdict.outcome is Outcome.REJECTED
        and s.verdict.reason is t.majority_reason
    )


def find_conflicts(
    tx: Transaction,
    inputs: Sequence[SpentOutput] | None,
    node_views: Mapping[str, Sequence[SpentOutput]],
) -> list[Conflict]:
    """Every other transaction spending one of `tx`'s inputs, with the nodes that know it
    (`node_views`: each rejecting node's own answer; `inputs`: the general view)."""
    own = tx.txid_hex
    seen: dict[tuple[int, str], tuple[int | None, list[str]]] = {}
    views: list[tuple[str | None, Sequence[SpentOutput]]] = [(n, v) for n, v in node_views.items()]
    if inputs is not None:
        views.append((None, inputs))
    for node, view in views:
        for index, info in enumerate(view):
            if info.spender is None or info.spender == own:
                continue
            key = (index, info.spender)
            _, nodes = seen.setdefault(key, (info.spender_height, []))
            name = node or info.source
            if name and name not in nodes:
                nodes.append(name)
    return [
        Conflict(index, str(tx.inputs[index].outpoint), txid, height, tuple(nodes))
        for (index, txid), (height, nodes) in sorted(seen.items())
    ]


def summarize(
    tx: Transaction,
    record: BroadcastRecord | None,
    inputs: Sequence[SpentOutput] | None,
    conflicts: Sequence[Conflict],
    fee: int | None,
    validation_message: str | None = None,
) -> str:
    """The plain-language account: the nodes' consensus, then the cause found."""
    parts: list[str] = []
    if record is not None:
        t = record.tally
        if record.status is Status.REJECTED and t.majority_reason is not None:
            parts.append(
                f"Rejected by {t.rejected} of {t.nodes_total} nodes, "
                f"most often for {reason_phrase(t.majority_reason)}."
            )
        elif t.accepted == 0 and t.rejected == 0:
            parts.append(
                f"None of the {t.nodes_total} nodes gave a verdict (timeouts or unreachable "
                "nodes); the transaction may still have arrived, and its status is re-checked."
            )
        else:
            parts.append(
                f"No majority: {t.accepted} accepted, {t.rejected} rejected, "
                f"{t.unknown + t.outstanding} gave no verdict, of {t.nodes_total} nodes."
            )
    elif validation_message:
        parts.append(f"The dry run rejected it: {validation_message}.")
    everyone = {s.node for s in record.slots} if record is not None else set()
    for c in conflicts:
        if c.where == "mempool":
            if everyone and set(c.nodes) >= everyone and len(everyone) > 1:
                nodes = f" of all {len(everyone)} nodes"
            else:
                nodes = f" of {', '.join(c.nodes)}" if c.nodes else ""
            parts.append(
                f"Input {c.input} ({c.outpoint}) is already spent by transaction {c.txid} in "
                f"the mempool{nodes}: a double spend. Mempools keep the first transaction they "
                "see and never replace it, so this one cannot be accepted where the other "
                "arrived first."
            )
        else:
            parts.append(
                f"Input {c.input} ({c.outpoint}) was already spent by transaction {c.txid}, "
                f"confirmed at height {c.height}; this transaction can never be accepted."
            )
    if inputs is not None:
        for index, info in enumerate(inputs):
            if not info.exists:
                parts.append(
                    f"Input {index} ({info.outpoint}) spends an output the nodes do not know: "
                    f"transaction {info.outpoint.txid_hex} is unknown to them or has no output "
                    f"{info.outpoint.index}."
                )
            elif info.unspent is False and info.spender is None:
                parts.append(
                    f"Input {index} ({info.outpoint}) is already spent (the spending "
                    "transaction was not found)."
                )
    if record is not None and record.status is Status.REJECTED:
        t = record.tally
        if t.majority_reason is Reason.CONFLICT and t.accepted:
            parts.append(
                f"{t.accepted} node(s) accepted it: the two transactions reached different "
                "nodes first, and the majority saw the other one."
            )
        if t.majority_reason in (Reason.FEE, Reason.FEE_TOO_HIGH) and fee is not None:
            parts.append(
                f"The fee is {fee} sats for {tx.size()} bytes ({fee / tx.size():.2f} sat/B)."
            )
        if t.majority_reason not in _INPUT_REASONS:
            message = _majority_message(record)
            if message:
                parts.append(f"The nodes said: {message}.")
    if (
        inputs is not None
        and not conflicts
        and all(i.exists and i.unspent is not False for i in inputs)
    ):
        parts.append("Every input exists and is unspent.")
    return " ".join(parts)


def _majority_message(record: BroadcastRecord) -> str:
    reason = record.tally.majority_reason
    for slot in record.slots:
        v = slot.verdict
        if v is not None and v.outcome is Outcome.REJECTED and v.reason is reason:
            return node_message(v.message)
    return ""


async def diagnose(
    tx: Transaction,
    record: BroadcastRecord | None,
    source: SpentOutputSource,
    links: Sequence[NodeLink] = (),
    *,
    inputs: Sequence[SpentOutput] | None = None,
    validation_message: str | None = None,
) -> Diagnosis:
    """Look the inputs up (in `source`, and in each node that blamed the inputs) and explain.
    `inputs`: already looked up (a dry run has them)."""
    notes: list[str] = []
    outpoints = [txin.outpoint for txin in tx.inputs]
    if inputs is None:
        try:
            inputs = await source.spent_outputs(outpoints, find_spenders=True)
        except SourceUnavailable as exc:
            notes.append(f"inputs could not be looked up: {exc}")
    node_views: dict[str, Sequence[SpentOutput]] = {}
    if record is not None:
        blaming = [
            s.node
            for s in record.slots
            if s.verdict is not None and s.verdict.reason in _INPUT_REASONS
        ][:MAX_NODE_VIEWS]
        by_name = {link.name: link for link in links}
        for name in blaming:
            link = by_name.get(name)
            if link is None:
                continue
            try:
                node_views[name] = await NodeSpentOutputs([link]).spent_outputs(
                    outpoints, find_spenders=True
                )
            except SourceUnavailable as exc:
                notes.append(f"{name} could not be asked about the inputs: {exc}")
    conflicts = find_conflicts(tx, inputs, node_views)
    fee = None
    if inputs is not None and all(i.output is not None for i in inputs):
        fee = sum(i.output.value for i in inputs if i.output is not None) - sum(
            o.value for o in tx.outputs
        )
    summary = summarize(tx, record, inputs, conflicts, fee, validation_message)
    return Diagnosis(
        None if inputs is None else tuple(inputs),
        tuple(conflicts),
        record,
        fee,
        tx.size(),
        summary,
        tuple(notes),
    )
