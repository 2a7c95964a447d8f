"""Which servers the follower can sync from: the Fulcrum fallback (no Rostrum extensions)
reaches the same index as Rostrum, and a sync survives its first server going down."""

from __future__ import annotations

from indexer.follow import FetchedBlock
from indexer.follow.source_electrum import ElectrumSource
from indexer.store import AppliedBlock
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.test_follower_ledger import check_against_ledger
from tests.indexer.test_follower_support import SMALL, following, generate, reindex, urls
from tests.indexer.test_store_scenario import dump


async def test_the_fulcrum_fallback_reaches_the_same_index() -> None:
    params = SMALL.replace(seed=4)
    rostrum, with_rostrum = await generate(params)
    fulcrum, without = await generate(params, rostrum=False)
    try:
        # The same parameters give the same chain, so the two indexes must be equal.
        assert without.ledger.chain.tip_hash == with_rostrum.ledger.chain.tip_hash
        want = await reindex(urls(rostrum))
        async with following(urls(fulcrum)) as run:
            assert isinstance(run.follower.source, ElectrumSource)
            caps = await run.follower.source.client.capabilities()
            assert not caps.block_get and not caps.mempool_get
            assert await dump(run.store.conn) == want
            exp = await check_against_ledger(run.store.conn, without.ledger)
            # The mempool tail, found through the known pool addresses' subscriptions.
            tail = {e.txid for e in without.ledger.mempool.events if exp.known[e.pool_id]}
            assert tail
            assert tail <= {t[::-1].hex() for t in run.snapshot.pending_txids()}
    finally:
        await rostrum.stop()
        await fulcrum.stop()


async def test_the_first_of_three_servers_goes_down_mid_sync() -> None:
    net, _ = await generate(SMALL.replace(seed=5), nodes=3)
    servers = urls(net)
    client = electrum_client(servers)
    seen: list[tuple[int, str]] = []

    def on_block(applied: AppliedBlock, fetched: FetchedBlock) -> None:
        if applied.height == 150:
            seen.append((applied.height, str(client.current_server)))
            net.nodes[0].set_faults(down=True)  # its server closes every connection

    try:
        async with following(servers, client=client, on_block=on_block) as run:
            assert seen == [(150, servers[0])], "the sync ran on the first server until then"
            assert not net.servers[0].listening
            assert str(client.current_server) in servers[1:]
            tip = await run.store.tip()
            assert tip is not None and tip.hash == net.nodes[1].chain.tip.hash
            got = await dump(run.store.conn)
        assert got == await reindex(servers[1:])
    finally:
        await net.stop()
