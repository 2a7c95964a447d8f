"""From per-node verdicts to one status: the majority rule and the estimated network reach.

- `accepted`: more than half of the nodes accepted (or already had) the transaction;
- `rejected`: more than half rejected it;
- `broadcasting`: neither, while some verdicts are outstanding;
- `pending`: neither, and every node has answered or failed (timeouts, unknowns): re-checked
  later with `transaction.get_height`.

Nodes count one each for the majority; their weights only estimate how much of the network the
accepting nodes reach. `settled` says when a POST may answer without waiting for slow nodes: as
soon as a majority is reached, or when no majority can be reached any more and at least one node
accepted (so the answer, "sent but pending", cannot change), or when nobody is outstanding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from broadcast.verdicts import Outcome, Reason, Verdict


class Status(StrEnum):
    BROADCASTING = "broadcasting"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PENDING = "pending"


_REASON_ORDER = list(Reason)


@dataclass(frozen=True, slots=True)
class Tally:
    status: Status
    nodes_total: int
    accepted: int
    rejected: int
    unknown: int
    outstanding: int
    estimated_network_reach: float  # accepted weight / total weight, 0…1
    settled: bool
    majority_reason: Reason | None  # the most frequent rejection reason, if any rejection

    @property
    def majority(self) -> int:
        return majority_of(self.nodes_total)


def majority_of(n: int) -> int:
    """Strictly more than half."""
    return n // 2 + 1


def tally(entries: Sequence[tuple[float, Verdict | None]]) -> Tally:
    """Aggregate `(weight, verdict or None while outstanding)` for every configured node."""
    n = len(entries)
    need = majority_of(n)
    counts: Counter[Outcome] = Counter()
    reasons: Counter[Reason] = Counter()
    total_weight = 0.0
    accepted_weight = 0.0
    outstanding = 0
    for weight, verdict in entries:
        total_weight += weight
        if verdict is None:
            outstanding += 1
            continue
        counts[verdict.outcome] += 1
        if verdict.outcome is Outcome.ACCEPTED:
            accepted_weight += weight
        elif verdict.outcome is Outcome.REJECTED and verdict.reason is not None:
            reasons[verdict.reason] += 1
    accepted = counts[Outcome.ACCEPTED]
    rejected = counts[Outcome.REJECTED]
    if n and accepted >= need:
        status = Status.ACCEPTED
    elif n and rejected >= need:
        status = Status.REJECTED
    elif outstanding:
        status = Status.BROADCASTING
    else:
        status = Status.PENDING
    unreachable = accepted + outstanding < need and rejected + outstanding < need
    settled = (
        status in (Status.ACCEPTED, Status.REJECTED)
        or outstanding == 0
        or (unreachable and accepted > 0)
    )
    majority_reason = None
    if reasons:
        top = max(reasons.values())
        majority_reason = next(r for r in _REASON_ORDER if reasons[r] == top)
    reach = accepted_weight / total_weight if total_weight > 0 else 0.0
    return Tally(
        status,
        n,
        accepted,
        rejected,
        counts[Outcome.UNKNOWN],
        outstanding,
        reach,
        settled,
        majority_reason,
    )
