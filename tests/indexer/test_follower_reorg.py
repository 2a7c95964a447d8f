"""Reorgs while the follower runs: the index must equal a fresh full re-index of the final chain,
row for row, and the live snapshot the one a fresh follower builds.

The scenario generator lays down a random history; a scenario extension (`Chaos`) runs before
each of its blocks, lets the follower work for a while and, at random slots, replaces the last
1–10 blocks (sometimes after waiting for the follower to index them, sometimes while it is
still fetching). The replaced blocks' transactions go back to the mempool and are mined again,
so trades move to other heights and times — exactly what must not be double counted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bch.tx import Transaction, TxInput, TxOutput
from devnet.scenario import ScenarioGenerator
from devnet.service import Devnet
from tests.indexer.test_follower_support import (
    SMALL,
    Running,
    devnet_config,
    following,
    generate,
    reindex,
    urls,
)
from tests.indexer.test_store_scenario import dump


@dataclass(frozen=True)
class Strike:
    slot: int
    depth: int
    indexed: bool  # wait until the follower has indexed the blocks it replaces


@dataclass
class Chaos:
    """A scenario extension: reorgs at chosen slots while a follower runs."""

    net: Devnet
    strikes: dict[int, Strike]
    pace: int  # event-loop turns the follower gets before each block
    name: str = "chaos"
    running: Running | None = None
    done: list[tuple[int, int]] = field(default_factory=list)  # (height before, depth)

    async def setup(self, generator: ScenarioGenerator) -> None:
        return None

    async def on_slot(self, generator: ScenarioGenerator, slot: int) -> None:
        for _ in range(self.pace):
            await asyncio.sleep(0)
        strike = self.strikes.get(slot)
        node = self.net.nodes[0]
        if strike is None or self.running is None:
            return
        if strike.indexed:
            await self.running.caught_up(self.net)
        depth = min(strike.depth, node.height - 1)
        self.done.append((node.height, depth))
        node.reorg(depth)
        await self.net.network.settle()

    def ledger_json(self, generator: ScenarioGenerator) -> object:
        return [list(d) for d in self.done]


async def reorgs_while_following(
    seed: int, days: int, strikes: list[Strike], pace: int, final_depth: int
) -> None:
    params = SMALL.replace(seed=seed, days=days, reorgs=1, max_reorg_depth=10, mempool_txs=2)
    net = Devnet(devnet_config())
    await net.start()
    try:
        slots = days * params.blocks_per_day
        chaos = Chaos(net, {s.slot % slots: s for s in strikes}, pace)
        async with following(urls(net)) as run:
            chaos.running = run
            await ScenarioGenerator(net, params, extensions=[chaos]).run()
            await run.caught_up(net)
            # One more, on a fully indexed chain, carrying nothing: the tail's trades and the
            # replaced blocks' transactions go back to the mempool.
            net.nodes[0].reorg(min(final_depth, net.nodes[0].height - 1))
            await run.caught_up(net)
            net.nodes[0].mine(1)
            await run.caught_up(net)
            got = await dump(run.store.conn)
            assert chaos.done, "no reorg happened"
            live = {(p.outpoint, p.sats, p.tokens, p.height) for p in run.snapshot.all_pools()}
            pending = run.snapshot.pending_txids()
        assert got == await reindex(urls(net))
        async with following(urls(net)) as fresh:
            assert {
                (p.outpoint, p.sats, p.tokens, p.height) for p in fresh.snapshot.all_pools()
            } == live
            assert fresh.snapshot.pending_txids() == pending
    finally:
        await net.stop()


strike = st.builds(Strike, slot=st.integers(0, 60), depth=st.integers(1, 10), indexed=st.booleans())


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(1, 10**6),
    days=st.integers(1, 2),
    strikes=st.lists(strike, min_size=1, max_size=4, unique_by=lambda s: s.slot),
    pace=st.sampled_from([0, 1, 3, 10]),
    final_depth=st.integers(1, 10),
)
def test_reorgs_while_following_equal_a_fresh_reindex(
    seed: int, days: int, strikes: list[Strike], pace: int, final_depth: int
) -> None:
    asyncio.run(reorgs_while_following(seed, days, strikes, pace, final_depth))


async def test_deep_reorg_confirming_a_double_spend_removes_the_trade() -> None:
    """A reorg of up to 10 blocks whose new branch confirms a transaction conflicting with a
    trade the old branch had confirmed: the trade is gone from the index, not just moved."""
    net, result = await generate(SMALL.replace(seed=11))
    try:
        async with following(urls(net)) as run:
            node = net.nodes[0]
            tip = node.height
            chosen = None
            for trade in reversed(result.ledger.trades):
                assert trade.height is not None
                if trade.height <= tip - 10:
                    break
                found = node.find_tx(bytes.fromhex(trade.txid)[::-1])
                assert found is not None
                tx = found[0]
                pools = sum(1 for e in result.ledger.events if e.txid == trade.txid)
                funding = tx.inputs[pools]  # the trader's first coin follows the pool inputs
                parent_height = node.chain.tx_index[funding.outpoint.txid][0]
                fork = max(parent_height, tip - 10)
                if fork < trade.height:
                    chosen = (trade, funding, fork)
                    break
            assert chosen is not None
            victim, funding, fork = chosen
            parent = node.find_tx(funding.outpoint.txid)
            assert parent is not None
            value = parent[0].outputs[funding.outpoint.index].value
            # The devnet checks no scripts of transactions a block carries: the unlocking is
            # copied, the rival only has to spend the same coin.
            rival = Transaction.build(
                [TxInput(funding.outpoint, funding.unlocking)],
                [TxOutput(value, bytes.fromhex("6a"))],
            )
            node.reorg(tip - fork, [rival])
            await run.caught_up(net)
            got = await dump(run.store.conn)
            traded = {bytes(r[0]).hex() for r in got["cauldron_trades"]}
            assert victim.txid not in traded
            assert victim.txid not in {t[::-1].hex() for t in run.snapshot.pending_txids()}
        assert got == await reindex(urls(net))
    finally:
        await net.stop()
