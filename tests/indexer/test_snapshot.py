"""The live pool snapshot and its change feed.

The property test drives a snapshot with random blocks, mempool transactions, evictions and
reloads, and checks it against a naive model written here from the documented rules (live =
confirmed pools, then each still-valid pending transaction in arrival order); a subscriber that
replays the feed must hold exactly the live pools after every write.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bch.tx import OutPoint
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot, SnapshotChange

TOKENS = ["aa" * 32, "bb" * 32, "cc" * 32]


def op(n: int) -> OutPoint:
    return OutPoint(n.to_bytes(32, "little"), n % 3)


def pool(n: int, token: str = TOKENS[0], sats: int = 10_000, height: int | None = 1) -> LivePool:
    return LivePool(op(n), op(n), bytes(20), token, sats, 1_000 + n, height)


class Replica:
    """A feed subscriber that rebuilds the live set from changes alone."""

    def __init__(self, snap: PoolSnapshot) -> None:
        self.pools: dict[OutPoint, LivePool] = {p.outpoint: p for p in snap.all_pools()}
        self.changes: list[SnapshotChange] = []
        snap.subscribe(self.on_change)

    def on_change(self, c: SnapshotChange) -> None:
        self.changes.append(c)
        for p in c.removed:
            assert p.token_id == c.token
            assert self.pools.pop(p.outpoint) == p
        for p in c.added:
            assert p.token_id == c.token
            assert p.outpoint not in self.pools
            self.pools[p.outpoint] = p


# --- unit behaviour -------------------------------------------------------------------------------


def test_pending_spend_and_create_then_block_confirms() -> None:
    snap = PoolSnapshot()
    replica = Replica(snap)
    snap.replace_confirmed([pool(1), pool(2, TOKENS[1])], height=5)
    assert snap.version == 1 and len(replica.changes) == 2
    cont = pool(3, height=None)
    assert snap.add_pending(PendingTx(b"t1", (op(1),), (cont,)))
    assert snap.version == 2
    assert replica.changes[-1] == SnapshotChange(TOKENS[0], (cont,), (pool(1),), 2)
    assert {p.outpoint for p in snap.pools(TOKENS[0])} == {op(3)}
    assert snap.spent_by_pending(op(1)) == b"t1"
    # Double spend of pool 1: refused, nothing changes.
    assert not snap.add_pending(PendingTx(b"t2", (op(1),), (pool(4, height=None),)))
    assert snap.version == 2
    # The block confirms t1: same outpoint, now with a height; pending is empty.
    snap.apply_block([op(1)], [pool(3, height=6)], confirmed_txids=[b"t1"], height=6)
    assert snap.pending_txids() == set()
    assert snap.pool(op(3)) == pool(3, height=6)
    assert replica.changes[-1] == SnapshotChange(TOKENS[0], (pool(3, height=6),), (cont,), 3)
    assert replica.pools == {p.outpoint: p for p in snap.all_pools()}
    assert snap.height == 6


def test_block_conflict_evicts_pending_and_descendants() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed([pool(1)], height=1)
    assert snap.add_pending(PendingTx(b"a", (op(1),), (pool(2, height=None),)))
    assert snap.add_pending(PendingTx(b"b", (op(2),), (pool(3, height=None),)))  # child of a
    assert snap.add_pending(PendingTx(b"w", (op(3),), ()))  # a withdraw of b's pool
    assert {p.outpoint for p in snap.all_pools()} == set()
    # Another transaction spent pool 1 on chain: a, b and w all become impossible.
    snap.apply_block([op(1)], [pool(9)], confirmed_txids=[b"other"], height=2)
    assert snap.pending_txids() == set()
    assert {p.outpoint for p in snap.all_pools()} == {op(9)}


def test_evict_restores_spent_pools_and_drops_children() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed([pool(1), pool(5, TOKENS[2])], height=1)
    snap.add_pending(PendingTx(b"a", (op(1),), (pool(2, height=None),)))
    snap.add_pending(PendingTx(b"b", (op(2),), (pool(3, height=None),)))
    snap.add_pending(PendingTx(b"c", (op(5),), ()))  # withdraw, other token
    replica = Replica(snap)
    assert snap.evict([b"a"]) == {b"a", b"b"}
    assert {p.outpoint for p in snap.all_pools()} == {op(1)}
    assert snap.evict([b"c"]) == {b"c"}
    assert {p.outpoint for p in snap.all_pools()} == {op(1), op(5)}
    assert replica.pools == {p.outpoint: p for p in snap.all_pools()}
    assert snap.evict([b"nope"]) == set()


def test_no_change_no_version_bump() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed([pool(1)], height=1)
    v = snap.version
    snap.apply_block([], [], confirmed_txids=[b"x"], height=2)
    snap.replace_confirmed([pool(1)], height=2)
    assert snap.version == v
    assert snap.height == 2


async def test_watcher_coalesces_and_nets_out() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed([pool(1), pool(2, TOKENS[1])], height=1)
    watcher = snap.watch()
    seen = {p.outpoint: p for p in snap.all_pools()}
    snap.add_pending(PendingTx(b"a", (op(1),), (pool(3, height=None),)))
    snap.add_pending(PendingTx(b"b", (op(3),), (pool(4, height=None),)))  # 3 came and went
    snap.evict([b"nothing"])
    snap.add_pending(PendingTx(b"c", (op(2),), ()))
    snap.evict([b"c"])  # pool 2 went and came back unchanged: no net change for TOKENS[1]
    changes = await asyncio.wait_for(watcher.next(), 1)
    assert [c.token for c in changes] == [TOKENS[0]]
    (c,) = changes
    assert c.version == snap.version
    assert [p.outpoint for p in c.removed] == [op(1)]
    assert [p.outpoint for p in c.added] == [op(4)]
    for p in c.removed:
        del seen[p.outpoint]
    seen.update((p.outpoint, p) for p in c.added)
    assert seen == {p.outpoint: p for p in snap.all_pools()}
    assert watcher.drain() == []
    # next() waits for the following write.
    waiter = asyncio.ensure_future(watcher.next())
    await asyncio.sleep(0)
    assert not waiter.done()
    snap.apply_block([op(2)], [], confirmed_txids=[], height=2)
    got = await asyncio.wait_for(waiter, 1)
    assert [(x.token, [p.outpoint for p in x.removed]) for x in got] == [(TOKENS[1], [op(2)])]
    watcher.close()
    snap.apply_block([], [pool(7)], confirmed_txids=[], height=3)
    assert watcher.drain() == []


# --- the property -------------------------------------------------------------------------------


class Model:
    """The documented rules, naively: confirmed pools + valid pending txs in arrival order."""

    def __init__(self) -> None:
        self.confirmed: dict[OutPoint, LivePool] = {}
        self.pending: list[PendingTx] = []

    def settle(self) -> None:
        kept, avail = [], dict(self.confirmed)
        for ptx in self.pending:
            ok = all(o in avail for o in ptx.spent) and len(set(ptx.spent)) == len(ptx.spent)
            ok = ok and not any(
                p.outpoint in avail or p.outpoint in self.confirmed for p in ptx.created
            )
            if ok:
                kept.append(ptx)
                for o in ptx.spent:
                    del avail[o]
                for p in ptx.created:
                    avail[p.outpoint] = p
        self.pending = kept

    def live(self) -> dict[OutPoint, LivePool]:
        avail = dict(self.confirmed)
        for ptx in self.pending:
            for o in ptx.spent:
                del avail[o]
            for p in ptx.created:
                avail[p.outpoint] = p
        return avail


step = st.tuples(
    st.sampled_from(["block", "pending", "evict", "reload"]),
    st.lists(st.integers(0, 30), max_size=4),  # outpoints to spend / evict picks
    st.lists(st.integers(0, 60), max_size=3),  # outpoints to create
    st.integers(0, 2),  # token
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(steps=st.lists(step, min_size=1, max_size=25))
def test_feed_replays_to_the_live_set(steps: list[tuple[str, list[int], list[int], int]]) -> None:
    snap = PoolSnapshot()
    model = Model()
    replica = Replica(snap)
    height = 0
    txn = 0
    for kind, spend, create, tok in steps:
        token = TOKENS[tok]
        version = snap.version
        n_changes = len(replica.changes)
        if kind == "block":
            height += 1
            confirmed = list(model.confirmed)
            removed = [confirmed[i % len(confirmed)] for i in spend] if confirmed else []
            removed = list(dict.fromkeys(removed))
            added = [pool(100 * height + n, token, height=height) for n in set(create)]
            # Some pending txs get confirmed: the block carries their effects.
            picks = {i % len(model.pending) for i in spend} if model.pending else set()
            txids = set()
            for i, ptx in enumerate(model.pending):
                if i in picks and all(o in model.confirmed and o not in removed for o in ptx.spent):
                    txids.add(ptx.txid)
                    removed += list(ptx.spent)
                    added += [replace(p, height=height) for p in ptx.created]
            for o in removed:
                model.confirmed.pop(o, None)
            for p in added:
                model.confirmed[p.outpoint] = p
            model.pending = [p for p in model.pending if p.txid not in txids]
            model.settle()
            snap.apply_block(removed, added, confirmed_txids=txids, height=height)
        elif kind == "pending":
            txn += 1
            live = list(model.live().values())
            spent = tuple(dict.fromkeys(live[i % len(live)].outpoint for i in spend if live))
            created = tuple(pool(10_000 + 100 * txn + n, token, height=None) for n in set(create))
            ptx = PendingTx(txn.to_bytes(4, "little"), spent, created)
            before = list(model.pending)
            model.pending.append(ptx)
            model.settle()
            accepted = snap.add_pending(ptx)
            assert accepted == (model.pending != before)
        elif kind == "evict":
            pending = model.pending
            chosen = {pending[i % len(pending)].txid for i in spend} if pending else set()
            model.pending = [p for p in model.pending if p.txid not in chosen]
            model.settle()
            snap.evict(chosen)
        else:
            model.settle()
            snap.replace_confirmed(list(model.confirmed.values()), height)
        want = model.live()
        assert {p.outpoint: p for p in snap.all_pools()} == want
        assert replica.pools == want
        assert [p.txid for p in snap.pending()] == [p.txid for p in model.pending]
        new = replica.changes[n_changes:]
        if new:
            assert snap.version == version + 1
            assert {c.version for c in new} == {snap.version}
            assert len({c.token for c in new}) == len(new)  # one change per token per write
        else:
            assert snap.version == version
        for t in TOKENS:
            assert sorted(p.outpoint.txid for p in snap.pools(t)) == sorted(
                p.outpoint.txid for p in want.values() if p.token_id == t
            )


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    blocks=st.lists(
        st.tuples(
            st.lists(st.integers(0, 40), max_size=5),  # confirmed pools to spend (picks)
            st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2)), max_size=4),  # created
        ),
        min_size=1,
        max_size=20,
    )
)
def test_blocks_without_subscribers_move_the_same_pools(
    blocks: list[tuple[list[int], list[tuple[int, int]]]],
) -> None:
    """With nobody subscribed, a block's pools move without building the change feed: the same
    live set, per token and per outpoint, the same version and height as with a subscriber."""
    quiet, fed = PoolSnapshot(), PoolSnapshot()
    fed.subscribe(lambda change: None)
    for height, (spend, create) in enumerate(blocks, 1):
        live = sorted(fed.all_pools(), key=lambda p: p.outpoint)
        removed = [live[i % len(live)].outpoint for i in spend] if live else []
        removed.append(op(10_000 + height))  # not a pool: ignored
        # Some outpoints come again in a later block (kept exact: an equal pool is no change,
        # another replaces it).
        created = dict(create)
        added = [pool(n, TOKENS[t], sats=10_000 + t, height=1) for n, t in created.items()]
        for snap in (quiet, fed):
            snap.apply_block(list(removed), list(added), confirmed_txids=(), height=height)
        assert quiet.version == fed.version and quiet.height == fed.height == height
        assert sorted(quiet.tokens()) == sorted(fed.tokens())
        for token in TOKENS:
            assert sorted(quiet.pools(token), key=lambda p: p.outpoint) == sorted(
                fed.pools(token), key=lambda p: p.outpoint
            )
        assert {p.outpoint: p for p in quiet.all_pools()} == {
            p.outpoint: p for p in fed.all_pools()
        }
        for p in quiet.all_pools():
            assert quiet.pool(p.outpoint) == p and quiet.confirmed_pool(p.outpoint) == p
