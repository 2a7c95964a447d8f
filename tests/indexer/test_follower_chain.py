"""The chain walk against a devnet: exact fork points, servers behind us or on another branch,
a start height above the genesis, and blocks that arrive while the follower waits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from devnet.service import Devnet
from indexer.follow import Follower
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.electrum_servers import running_devnet
from tests.indexer.test_follower_support import following, make_follower, reindex, urls
from tests.indexer.test_store_scenario import dump


@asynccontextmanager
async def follower_on(net: Devnet, node: int = 0, **options: object) -> AsyncIterator[Follower]:
    """A follower (not running) on one node's server, with its own in-memory store."""
    store = await open_store(":memory:", snapshot=PoolSnapshot())
    client = electrum_client([urls(net)[node]])
    try:
        yield make_follower(client, store, **options)
    finally:
        await client.close()
        await store.close()


async def stored_hashes(store: Store) -> list[bytes | None]:
    tip = await store.tip()
    assert tip is not None
    return [await store.block_hash(h) for h in range(tip.height + 1)]


async def test_a_deep_reorg_rolls_back_to_exactly_the_fork() -> None:
    async with running_devnet() as net, follower_on(net) as follower:
        node = net.nodes[0]
        node.mine(60)
        first = await follower.sync()
        assert (first.applied, first.undone, first.height) == (node.height + 1, 0, node.height)
        kept = (await stored_hashes(follower.store))[: node.height - 36]
        node.reorg(37)  # 38 new blocks replace the last 37: probing has to bisect
        again = await follower.sync()
        assert (again.undone, again.applied, again.height) == (37, 38, node.height)
        hashes = await stored_hashes(follower.store)
        assert hashes[: len(kept)] == kept
        assert hashes == [b.hash for b in node.chain.blocks]
        assert await dump(follower.store.conn) == await reindex(urls(net))


async def test_a_server_behind_us_on_our_chain_changes_nothing() -> None:
    async with running_devnet(nodes=2) as net, follower_on(net, 0) as ahead:
        net.nodes[1].set_faults(partitioned=True)
        net.nodes[0].mine(5)
        await ahead.sync()
        # The same store, now read from the lagging node.
        lagging = make_follower(electrum_client([urls(net)[1]]), ahead.store)
        try:
            result = await lagging.sync()
            assert (result.applied, result.undone, result.height) == (0, 0, net.nodes[0].height)
        finally:
            await lagging.client.close()


async def test_a_server_on_a_shorter_branch_is_followed() -> None:
    async with running_devnet(nodes=2) as net, follower_on(net, 0) as ahead:
        net.nodes[1].set_faults(partitioned=True)
        fork = net.nodes[0].height
        net.nodes[0].mine(5)
        net.nodes[1].mine(2)  # another branch, shorter
        await ahead.sync()
        other = make_follower(electrum_client([urls(net)[1]]), ahead.store)
        try:
            result = await other.sync()
            assert (result.undone, result.applied, result.height) == (5, 2, fork + 2)
            assert await stored_hashes(ahead.store) == [b.hash for b in net.nodes[1].chain.blocks]
        finally:
            await other.client.close()


async def test_a_fresh_index_starts_at_the_start_height() -> None:
    async with running_devnet() as net, follower_on(net, start_height=100) as follower:
        node = net.nodes[0]
        assert node.height == 110  # the premine
        result = await follower.sync()
        assert (result.applied, result.undone, result.height) == (11, 0, 110)
        assert await follower.store.block_hash(99) is None
        assert await follower.store.block_hash(100) == node.chain.blocks[100].hash
        # A reorg from below the index's first block replaces all of it, and only it.
        node.reorg(15)  # fork at 95; the chain is then 111 blocks high
        again = await follower.sync()
        assert (again.undone, again.applied, again.height) == (11, 12, 111)
        assert await follower.store.block_hash(99) is None
        hashes = [await follower.store.block_hash(h) for h in range(100, 112)]
        assert hashes == [b.hash for b in node.chain.blocks[100:]]


async def test_blocks_mined_while_following_are_applied_in_order() -> None:
    async with running_devnet() as net, following(urls(net), mempool=False) as run:
        node = net.nodes[0]
        for count in (1, 3, 1, 7):
            node.mine(count)
            await run.caught_up(net)
        assert await stored_hashes(run.store) == [b.hash for b in node.chain.blocks]
