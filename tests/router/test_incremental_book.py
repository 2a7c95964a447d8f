"""The live book's incremental update equals a rebuild: after random snapshot changes (trades
re-creating pools, pools spent away, new pools, drained or dust pools, equal rates), the book
`LiveBook` derives from its previous one holds the same pools in the same order as a `PoolBook`
built afresh, and its route models (updated by bisect, not rebuilt) equal fresh `_Model`s."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bch.hashes import sha256
from bch.tx import OutPoint
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot
from router.book import LiveBook, to_pool
from router.pools import PoolBook
from router.route import Direction
from router.solve.model import _Model, _model_key
from tests.router.helpers import TOKEN_A, TOKEN_B

_FIELDS = ("vmax", "a", "b", "c", "vmin", "cap_in", "cap_out", "size", "by_vmin", "by_depth")

# Reserves: ordinary pools, a dust one (untradable), a one-token one (no buys), and repeats
# of one ratio so rates tie and the outpoint order must break the tie.
states = st.one_of(
    st.tuples(st.integers(1_000, 50_000_000), st.integers(1, 10_000_000)),
    st.sampled_from([(500, 1_000), (100_000, 1), (2_000_000, 40_000), (4_000_000, 80_000)]),
)
steps = st.lists(
    st.tuples(st.sampled_from(["trade", "spend", "new", "evict"]), st.integers(0, 10**6), states),
    min_size=1,
    max_size=12,
)


def _live(token: str, label: str, state: tuple[int, int]) -> LivePool:
    op = OutPoint(sha256(f"incremental:{token}:{label}".encode()), 0)
    return LivePool(op, op, sha256(label.encode())[:20], token, state[0], state[1], 100)


def _assert_same_as_rebuilt(live: LiveBook, snap: PoolSnapshot) -> None:
    book = live.current()
    fresh = PoolBook(to_pool(p) for p in snap.all_pools())
    assert book.tokens() == fresh.tokens()
    for token in fresh.tokens():
        assert list(book.pools(token)) == list(fresh.pools(token))
        for direction in Direction:
            model = book.peek(_model_key(token, direction))
            assert isinstance(model, _Model)  # updated or inherited, never left to build
            expected = _Model(fresh.pools(token), direction)
            assert model.pools == expected.pools
            for name in _FIELDS:
                assert getattr(model, name) == getattr(expected, name), name


@settings(max_examples=60, deadline=None)
@given(
    st.lists(states, min_size=1, max_size=40),
    st.lists(states, min_size=0, max_size=6),
    steps,
)
def test_incremental_book_equals_a_rebuilt_one(
    a_states: list[tuple[int, int]],
    b_states: list[tuple[int, int]],
    changes: list[tuple[str, int, tuple[int, int]]],
) -> None:
    snap = PoolSnapshot()
    initial = [_live(TOKEN_A, f"a{i}", s) for i, s in enumerate(a_states)]
    initial += [_live(TOKEN_B, f"b{i}", s) for i, s in enumerate(b_states)]
    snap.replace_confirmed(initial, 100)
    live = LiveBook(snap)
    live.current()
    pending: list[bytes] = []
    for n, (kind, pick, state) in enumerate(changes):
        pools = snap.all_pools()
        txid = sha256(f"incremental step {n}".encode())
        if kind == "evict":
            if pending:
                snap.evict([pending.pop(pick % len(pending))])
        elif kind == "new" or not pools:
            token = TOKEN_A if pick % 2 else TOKEN_B
            new = _live(token, f"new{n}", state)
            new = LivePool(OutPoint(txid, 0), new.lineage, new.owner_pkh, token, *state, None)
            assert snap.add_pending(PendingTx(txid, (), (new,)))
            pending.append(txid)
        else:
            old = sorted(pools, key=lambda p: (p.txid, p.vout))[pick % len(pools)]
            made: tuple[LivePool, ...] = ()
            if kind == "trade":
                made = (LivePool(OutPoint(txid, 0), old.lineage, old.owner_pkh, old.token_id,
                                 state[0], state[1], None),)  # fmt: skip
            assert snap.add_pending(PendingTx(txid, (old.outpoint,), made))
            pending.append(txid)
        _assert_same_as_rebuilt(live, snap)
    live.close()


def test_one_traded_pool_moves_only_its_own_rows() -> None:
    """A trade on one pool of many keeps every other `Pool` object and the other token's
    model object itself (shared, not copied)."""
    snap = PoolSnapshot()
    pools = [_live(TOKEN_A, f"a{i}", (1_000_000 + 7_919 * i, 20_000 + 31 * i)) for i in range(50)]
    pools.append(_live(TOKEN_B, "b", (3_000_000, 60_000)))
    snap.replace_confirmed(pools, 100)
    live = LiveBook(snap)
    before = live.current()
    old = pools[17]
    txid = sha256(b"one trade")
    new = LivePool(OutPoint(txid, 0), old.lineage, old.owner_pkh, TOKEN_A, 1_200_000, 18_000, None)
    assert snap.add_pending(PendingTx(txid, (old.outpoint,), (new,)))
    after = live.current()
    kept = [p for p in before.pools(TOKEN_A) if p.txid != old.txid]
    assert all(any(p is q for q in after.pools(TOKEN_A)) for p in kept)
    assert len(after.pools(TOKEN_A)) == 50
    assert (new.txid, 0) in {p.key for p in after.pools(TOKEN_A)}
    key = _model_key(TOKEN_B, Direction.BUY)
    assert after.peek(key) is before.peek(key)
    _assert_same_as_rebuilt(live, snap)
    live.close()
