"""Reorgs: undo_to rolls back exactly, and any apply/undo history equals a clean apply.

"Exactly" is checked against a fresh database that applied only the final chain's blocks:
every table, every row (physical order aside).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bch.tx import OutPoint
from indexer.store import ChainError, Store
from tests.indexer.test_store_scenario import (
    BuiltBlock,
    Scenario,
    apply_all,
    build_chain,
    dump,
    open_store,
    rev,
)


async def clean_dump(blocks: list[BuiltBlock]) -> dict[str, list[tuple[object, ...]]]:
    store = await open_store()
    try:
        await apply_all(store, blocks)
        return await dump(store.conn)
    finally:
        await store.close()


async def live_pools_in_db(store: Store) -> set[tuple[OutPoint, int, int]]:
    rows = await store.conn.execute_fetchall(
        "SELECT txid, vout, sats, tokens FROM cauldron_pools WHERE spent_height IS NULL"
    )
    return {(OutPoint(rev(r[0]), r[1]), r[2], r[3]) for r in rows}


def snapshot_pools(store: Store) -> set[tuple[OutPoint, int, int]]:
    return {(p.outpoint, p.sats, p.tokens) for p in store.snapshot.all_pools()}


async def test_undo_then_other_branch_equals_clean_apply() -> None:
    main = build_chain(seed=21, n_blocks=30)
    fork_at = 20
    # Rebuild the chain up to the fork point to branch from the exact same state.
    base = build_chain(seed=21, n_blocks=fork_at)
    assert [b.raw for b in base.blocks] == [b.raw for b in main.blocks[:fork_at]]
    branch = base.fork(seed=99)
    for _ in range(8):
        branch.next_block()
    store = await open_store()
    try:
        await apply_all(store, main.blocks)
        tip = 30
        for target in (29, 26, 23, fork_at):  # single blocks and deeper rollbacks
            assert await store.undo_to(target) == tip - target
            tip = target
            assert await dump(store.conn) == await clean_dump(main.blocks[:target])
            assert snapshot_pools(store) == await live_pools_in_db(store)
        await apply_all(store, branch.blocks[fork_at:])
        assert await dump(store.conn) == await clean_dump(branch.blocks)
        assert snapshot_pools(store) == await live_pools_in_db(store)
        # The oracle agrees with the reorged index too.
        got = await dump(store.conn)
        for table, rows in branch.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()


async def test_undo_everything_leaves_an_empty_index() -> None:
    sc = build_chain(seed=5, n_blocks=6)
    store = await open_store()
    try:
        await apply_all(store, sc.blocks)
        assert await store.undo_to(0) == 6
        assert await store.tip() is None
        got = await dump(store.conn)
        assert all(not rows for table, rows in got.items() if table != "schema_migrations")
        assert len(store.snapshot) == 0
        # A fresh start at any height is allowed on an empty index.
        await apply_all(store, sc.blocks)
        assert await dump(store.conn) == await clean_dump(sc.blocks)
    finally:
        await store.close()


async def test_blocks_must_extend_the_tip() -> None:
    sc = build_chain(seed=8, n_blocks=4)
    other = build_chain(seed=9, n_blocks=4)
    store = await open_store()
    try:
        await apply_all(store, sc.blocks[:2])
        before = await dump(store.conn)
        with pytest.raises(ChainError, match="does not extend"):
            await store.apply_block(4, sc.blocks[3].raw)  # gap
        with pytest.raises(ChainError, match="does not extend"):
            await store.apply_block(3, other.blocks[2].raw)  # wrong parent
        with pytest.raises(ChainError, match="undo_to first"):
            await store.apply_block(2, other.blocks[1].raw)  # height taken by another block
        again = await store.apply_block(2, sc.blocks[1].raw)  # idempotent re-apply
        assert again.already_applied
        assert await dump(store.conn) == before
        assert await store.undo_to(5) == 0
        assert await store.block_hash(2) == sc.blocks[1].block.hash
        assert await store.block_hash(3) is None
    finally:
        await store.close()


async def test_transactions_form_equals_block_form() -> None:
    """The Fulcrum fallback hands over header + transactions instead of a block."""
    sc = build_chain(seed=12, n_blocks=10)
    store = await open_store()
    try:
        for b in sc.blocks:
            blk = b.block
            raws = [blk.tx_raw(i) for i in range(len(blk))]
            await store.apply_transactions(b.height, blk.header, raws)
        assert await dump(store.conn) == await clean_dump(sc.blocks)
    finally:
        await store.close()


# --- the property -------------------------------------------------------------------------------

Op = tuple[str, int, int]
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.integers(1, 4), st.just(0)),
        st.tuples(st.just("reorg"), st.integers(1, 5), st.integers(0, 10**6)),
    ),
    min_size=1,
    max_size=10,
)


async def run_history(seed: int, ops: list[Op]) -> None:
    states = [Scenario(seed)]  # states[k]: the scenario after k blocks of the current chain
    forks = 0  # every branch gets its own seed, so no transaction is ever mined twice

    def next_state(sc: Scenario, salt: int) -> Scenario:
        nonlocal forks
        forks += 1
        return sc.fork(seed * 1_000_003 + salt * 1_009 + forks)

    store = await open_store()
    try:
        for kind, n, fork_seed in ops:
            if kind == "extend":
                for _ in range(n):
                    nxt = next_state(states[-1], 0)
                    built = nxt.next_block()
                    await store.apply_block(built.height, built.raw)
                    states.append(nxt)
            else:
                depth = min(n, len(states) - 1)
                target = len(states) - 1 - depth
                await store.undo_to(target)
                del states[target + 1 :]
                for _ in range(depth + 1):  # the new branch ends up longer
                    nxt = next_state(states[-1], fork_seed)
                    built = nxt.next_block()
                    await store.apply_block(built.height, built.raw)
                    states.append(nxt)
        final = states[-1].blocks
        assert await dump(store.conn) == await clean_dump(final)
        assert snapshot_pools(store) == await live_pools_in_db(store)
    finally:
        await store.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(seed=st.integers(0, 10**6), ops=ops_strategy)
def test_random_apply_undo_equals_clean_apply(seed: int, ops: list[Op]) -> None:
    asyncio.run(run_history(seed, ops))
