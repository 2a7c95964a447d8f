"""The majority rule and the estimated network reach, from their definitions."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from broadcast.status import Status, tally
from broadcast.verdicts import Outcome, Reason, Verdict

ACC = Verdict("n", Outcome.ACCEPTED)
REJ = Verdict("n", Outcome.REJECTED, Reason.CONFLICT, "txn-mempool-conflict")
UNK = Verdict("n", Outcome.UNKNOWN, Reason.UNKNOWN, "timed out")

verdicts = st.sampled_from([ACC, REJ, UNK, None])
entries = st.lists(
    st.tuples(st.floats(min_value=0, max_value=100, allow_nan=False), verdicts),
    min_size=1,
    max_size=20,
)


@given(entries)
def test_status_follows_strict_majorities(items: list[tuple[float, Verdict | None]]) -> None:
    n = len(items)
    accepted = sum(1 for _, v in items if v is ACC)
    rejected = sum(1 for _, v in items if v is REJ)
    outstanding = sum(1 for _, v in items if v is None)
    t = tally(items)
    if 2 * accepted > n:
        assert t.status is Status.ACCEPTED
    elif 2 * rejected > n:
        assert t.status is Status.REJECTED
    elif outstanding:
        assert t.status is Status.BROADCASTING
    else:
        assert t.status is Status.PENDING
    assert (t.accepted, t.rejected, t.outstanding, t.nodes_total) == (
        accepted,
        rejected,
        outstanding,
        n,
    )


@given(entries)
def test_reach_is_the_accepted_share_of_weight(items: list[tuple[float, Verdict | None]]) -> None:
    total = sum(w for w, _ in items)
    accepted = sum(w for w, v in items if v is ACC)
    t = tally(items)
    assert 0.0 <= t.estimated_network_reach <= 1.0
    if total > 0:
        assert abs(t.estimated_network_reach - accepted / total) < 1e-9
    else:
        assert t.estimated_network_reach == 0.0


@given(entries)
def test_settled_answers_never_change_when_the_rest_arrive(
    items: list[tuple[float, Verdict | None]],
) -> None:
    """Once settled, whatever the outstanding nodes answer, the POST's answer (accepted /
    rejected / sent-but-pending / failed) stays the same."""

    def answer(entries: Sequence[tuple[float, Verdict | None]]) -> str:
        t = tally(entries)
        if t.status in (Status.ACCEPTED, Status.REJECTED):
            return t.status.value
        return "sent" if t.accepted else "failed"

    t = tally(items)
    if not t.settled:
        assert t.outstanding > 0
        return
    first = answer(items)
    for fill in (ACC, REJ, UNK):
        completed = [(w, v if v is not None else fill) for w, v in items]
        assert answer(completed) == first


def test_split_five_nodes() -> None:
    assert tally([(1, ACC)] * 3 + [(1, REJ)] * 2).status is Status.ACCEPTED
    assert tally([(1, ACC)] * 2 + [(1, REJ)] * 3).status is Status.REJECTED
    two_two = tally([(1, ACC)] * 2 + [(1, REJ)] * 2 + [(1, UNK)])
    assert two_two.status is Status.PENDING and two_two.settled


def test_weights_shape_reach_not_the_majority() -> None:
    t = tally([(10.0, ACC), (1.0, REJ), (1.0, REJ)])
    assert t.status is Status.REJECTED
    assert abs(t.estimated_network_reach - 10 / 12) < 1e-12


def test_majority_reason_is_the_most_frequent_rejection() -> None:
    fee = Verdict("n", Outcome.REJECTED, Reason.FEE, "min relay fee not met")
    t = tally([(1, REJ), (1, fee), (1, fee), (1, ACC)])
    assert t.majority_reason is Reason.FEE


def test_broadcasting_until_a_majority_or_the_end() -> None:
    t = tally([(1, ACC), (1, ACC), (1, None), (1, None), (1, None)])
    assert t.status is Status.BROADCASTING and not t.settled
    t = tally([(1, ACC), (1, ACC), (1, ACC), (1, None), (1, None)])
    assert t.status is Status.ACCEPTED and t.settled
