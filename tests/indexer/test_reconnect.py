"""A server that comes back after an outage is used again within seconds (issue 21: after a
15 s outage the reconnect backoff had grown to 13 s): the indexer's follower and the tip watch,
with their production settings, over a real devnet Electrum server stopped and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from indexer.electrum import Backoff, ElectrumClient
from indexer.electrum.health import MAX_RECONNECT_DELAY
from indexer.follow import Follower
from indexer.index import open_store
from indexer.tipwatch import TipWatch
from tests.indexer.electrum_servers import running_devnet, set_down
from tests.indexer.test_follower_support import at_tip, urls, wait_until

OUTAGE = 15.0  # seconds, as in the issue
BACK_WITHIN = 2.0  # the promise; the assertion allows catching up on top (a generous bound)


@given(failures=st.integers(1, 10_000), seed=st.integers(0, 2**32))
def test_the_default_backoff_never_waits_past_the_cap(failures: int, seed: int) -> None:
    delay = Backoff().delay(failures, random.Random(seed))
    assert 0 < delay <= MAX_RECONNECT_DELAY < BACK_WITHIN


async def test_a_returning_server_is_used_within_two_seconds(tmp_path: Path) -> None:
    async with running_devnet() as net:
        client = ElectrumClient(urls(net), client_name="reconnect-test")
        store = await open_store(tmp_path / "index.sqlite")
        follower = Follower(client, store, start_height=0)  # production delays and backoff
        watch = TipWatch(urls(net))
        await watch.start()
        task = asyncio.create_task(follower.run())
        loop = asyncio.get_running_loop()
        try:
            await wait_until(lambda: follower.synced.is_set() and watch.connected == 1)
            await set_down(net, 0, True)
            await wait_until(lambda: watch.connected == 0 and client.current_server is None)
            await asyncio.sleep(OUTAGE)
            await set_down(net, 0, False)
            back = loop.time()
            net.nodes[0].mine(1)  # heard only through a new connection
            height = net.nodes[0].height
            await wait_until(lambda: at_tip(store, net), timeout=BACK_WITHIN + 3)
            indexed = loop.time() - back
            await wait_until(lambda: watch.heard().best_height == height, timeout=BACK_WITHIN + 3)
            heard = loop.time() - back
            assert watch.connected == 1 and client.current_server is not None
            # Reconnecting takes at most MAX_RECONNECT_DELAY; the rest is one block's catch-up.
            assert indexed < BACK_WITHIN + 1.0, indexed
            assert heard < BACK_WITHIN + 1.0, heard
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await watch.close()
            await client.close()
            await store.close()
