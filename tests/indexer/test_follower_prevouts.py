"""A pool created before the start height: its first spend in the index still carries the pool's
state before and the trade's deltas, because the follower fetches the spent output from the
server. Expected values come from the scenario ledger; without the server's answer the same
spend is a bare discovery (no state before, no trade row)."""

from __future__ import annotations

from typing import Any

from devnet.scenario import Ledger
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from protocols.ledger import PoolEvent
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.test_follower_support import SMALL, generate, make_follower, urls


def first_spend_after_creation(ledger: Ledger) -> tuple[PoolEvent, PoolEvent]:
    """(creation, first spend) of a pool whose first spend is a one-pool buy or sell in a later
    block, and in a transaction that changes no pool created at or after the creation's block
    (so starting the index just above the creation hides only older pools)."""
    created: dict[str, PoolEvent] = {}
    first: dict[str, PoolEvent] = {}
    for e in ledger.events:
        if e.kind == "create":
            created[e.pool_id] = e
        elif e.pool_id in created and e.pool_id not in first:
            first[e.pool_id] = e
    for pool_id, spend in first.items():
        made = created[pool_id]
        assert made.height is not None and spend.height is not None
        one_pool_trade = spend.kind in ("buy", "sell") and spend.pools_touched == 1
        if one_pool_trade and spend.height > made.height + 1:
            return made, spend
    raise AssertionError("the scenario has no one-pool trade of an older pool")


async def event_and_trade(store: Store, txid: str) -> tuple[Any, list[Any]]:
    events = list(
        await store.conn.execute_fetchall(
            "SELECT kind, sats_before, tokens_before, sats_after, tokens_after, d_sats, "
            "d_tokens, lp_fee FROM cauldron_events WHERE txid = ?",
            (bytes.fromhex(txid),),
        )
    )
    trades = list(
        await store.conn.execute_fetchall(
            "SELECT direction, sats, tokens, volume_sats, volume_tokens, lp_fee, pools "
            "FROM cauldron_trades WHERE txid = ?",
            (bytes.fromhex(txid),),
        )
    )
    assert len(events) == 1
    return tuple(events[0]), [tuple(t) for t in trades]


async def test_a_pool_first_seen_at_its_first_spend_keeps_the_spends_deltas() -> None:
    net, result = await generate(SMALL.replace(seed=11))
    ledger = result.ledger
    made, spend = first_spend_after_creation(ledger)
    assert made.height is not None and spend.before is not None and spend.after is not None
    start = made.height + 1  # the index never sees the creation
    client = electrum_client(urls(net))
    store = await open_store(":memory:", snapshot=PoolSnapshot())
    bare = await open_store(":memory:", snapshot=PoolSnapshot())
    try:
        await make_follower(client, store, start_height=start, mempool=False).sync()
        event, trades = await event_and_trade(store, spend.txid)
        before, after = spend.before, spend.after
        d_sats, d_tokens = after.sats - before.sats, after.tokens - before.tokens
        fee = abs(d_sats) * 3 // 1000
        assert event == (
            *("discover", before.sats, before.tokens, after.sats, after.tokens),
            *(d_sats, d_tokens, fee),
        )
        [want] = [t for t in ledger.trades if t.txid == spend.txid]
        assert trades == [
            (
                *(want.direction, want.sats, want.tokens, want.volume_sats, want.volume_tokens),
                *(want.lp_fee, want.pools),
            )
        ]
        assert want.direction == spend.kind and want.sats == d_sats

        # The same blocks applied without a source of spent outputs: a bare discovery.
        heights = range(start, net.nodes[0].height + 1)
        for h in heights:
            block = net.nodes[0].chain.block_at(h)
            assert block is not None
            await bare.apply_block(h, block.raw)
        event, trades = await event_and_trade(bare, spend.txid)
        assert event == ("discover", None, None, after.sats, after.tokens, None, None, None)
        assert trades == []
    finally:
        await client.close()
        await store.close()
        await bare.close()
        await net.stop()
