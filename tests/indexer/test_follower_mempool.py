"""The mempool through the follower: a trade shows in the live snapshot before it is mined and is
confirmed by its block; a conflicting transaction that wins (mined, or confirmed by a reorg)
evicts the loser. On Rostrum the follower polls `mempool.get`; on the Fulcrum fallback it is
told by the scripthash subscriptions of the known pool addresses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from devnet.scenario import ScenarioGenerator
from devnet.service import Devnet
from tests.indexer.test_follower_support import (
    SMALL,
    Running,
    devnet_config,
    following,
    urls,
    wait_until,
)
from tests.indexer.test_store_scenario import dump


@pytest.fixture(params=[True, False], ids=["rostrum", "fulcrum"])
async def scenario(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[Devnet, ScenarioGenerator]]:
    net = Devnet(devnet_config(rostrum=request.param))
    await net.start()
    generator = ScenarioGenerator(net, SMALL.replace(seed=21, days=1, mempool_txs=0))
    await generator.run()
    yield net, generator
    await net.stop()


async def new_trade(generator: ScenarioGenerator) -> Transaction:
    """One more trade from the scenario's traders, submitted to the node's mempool."""
    for _ in range(10):
        seen = len(generator.records)
        await generator.trade()
        trades = [r for r in generator.records[seen:] if r.kind == "trade"]
        if trades:
            entry = generator.node.mempool.entries[trades[-1].txid]
            return entry.tx
    raise AssertionError("the generator made no trade")


def pool_inputs(run: Running, tx: Transaction) -> list[OutPoint]:
    return [i.outpoint for i in tx.inputs if run.snapshot.pool(i.outpoint) is not None]


async def test_a_trade_is_live_before_it_is_mined_and_confirmed_after(
    scenario: tuple[Devnet, ScenarioGenerator],
) -> None:
    net, generator = scenario
    async with following(urls(net)) as run:
        assert not run.snapshot.pending_txids()
        tx = await new_trade(generator)
        spent = pool_inputs(run, tx)
        assert spent, "the trade spends live pools"
        await wait_until(lambda: run.snapshot.is_pending(tx.txid), what="the pending trade")
        # Live state: the pools it spent are gone, its continuations are live, unconfirmed.
        assert all(run.snapshot.pool(op) is None for op in spent)
        created = [p for p in run.snapshot.all_pools() if p.outpoint.txid == tx.txid]
        assert len(created) == len(spent) and all(p.height is None for p in created)
        assert {p.outpoint.index for p in created} == set(range(len(spent)))
        # Nothing in the tables yet.
        rows = await dump(run.store.conn, ["cauldron_trades"])
        assert tx.txid[::-1] not in {bytes(r[0]) for r in rows["cauldron_trades"]}

        net.nodes[0].mine(1)
        await run.caught_up(net)
        height = net.nodes[0].height
        assert not run.snapshot.is_pending(tx.txid)
        confirmed = [p for p in run.snapshot.all_pools() if p.outpoint.txid == tx.txid]
        assert {p.outpoint for p in confirmed} == {p.outpoint for p in created}
        assert all(p.height == height for p in confirmed)
        rows = await dump(run.store.conn, ["cauldron_trades"])
        assert tx.txid[::-1] in {bytes(r[0]) for r in rows["cauldron_trades"]}


def rival_of(net: Devnet, tx: Transaction, pools: int) -> Transaction:
    """A transaction spending the trade's first funding coin elsewhere. Blocks are not
    script-checked by the devnet, so the unlocking is copied."""
    funding = tx.inputs[pools]
    found = net.nodes[0].find_tx(funding.outpoint.txid)
    assert found is not None
    value = found[0].outputs[funding.outpoint.index].value
    return Transaction.build(
        [TxInput(funding.outpoint, funding.unlocking)], [TxOutput(value, bytes.fromhex("6a"))]
    )


@pytest.mark.parametrize("how", ["mined", "reorg"])
async def test_a_conflicting_transaction_that_wins_evicts_the_loser(
    scenario: tuple[Devnet, ScenarioGenerator], how: str
) -> None:
    net, generator = scenario
    async with following(urls(net)) as run:
        tx = await new_trade(generator)
        spent = pool_inputs(run, tx)
        before = {op: run.snapshot.pool(op) for op in spent}
        await wait_until(lambda: run.snapshot.is_pending(tx.txid), what="the pending trade")
        rival = rival_of(net, tx, len(spent))
        if how == "mined":
            net.nodes[0].mine(1, txs=[rival])
        else:
            net.nodes[0].reorg(1, [rival])
        await run.caught_up(net)
        await wait_until(lambda: not run.snapshot.is_pending(tx.txid), what="the eviction")
        # The loser's effects are gone: its pools are back as they were, nothing of it is live.
        assert {op: run.snapshot.pool(op) for op in spent} == before
        assert not [p for p in run.snapshot.all_pools() if p.outpoint.txid == tx.txid]
        assert tx.txid not in run.store.mempool_txids()
        rows = await dump(run.store.conn, ["cauldron_trades"])
        assert tx.txid[::-1] not in {bytes(r[0]) for r in rows["cauldron_trades"]}


async def test_a_pool_trade_wakes_the_rostrum_follower_between_polls() -> None:
    """With a listing to poll, the pool addresses are still watched: a trade is live long
    before the next poll (an hour away here), so a client's next build routes around it."""
    net = Devnet(devnet_config(rostrum=True))
    await net.start()
    try:
        generator = ScenarioGenerator(net, SMALL.replace(seed=22, days=1, mempool_txs=0))
        await generator.run()
        async with following(urls(net), mempool_interval=3600.0) as run:
            # The headers subscription's first notice asks for a second round: let it pass,
            # so that only a push can start the next one.
            await wait_until(lambda: run.follower.rounds >= 2, what="the second round")
            await asyncio.sleep(0.2)
            rounds = run.follower.rounds
            tx = await new_trade(generator)
            # The round that applies it ends after its overlay write: wait for both.
            await wait_until(
                lambda: run.snapshot.is_pending(tx.txid) and run.follower.rounds > rounds,
                timeout=10.0,
                what="the pushed trade",
            )
            assert all(run.snapshot.pool(op) is None for op in pool_inputs(run, tx))
    finally:
        await net.stop()
