"""A follower that cannot make progress says why once and backs off (issue 20: the same
failure was logged at every retry, many times a second)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import pytest

from indexer.index import open_store
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.electrum_servers import running_devnet
from tests.indexer.test_follower_support import make_follower, urls, wait_until


async def test_a_failing_round_is_logged_once_while_it_repeats(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_devnet() as net:
        net.nodes[0].set_faults(down=True)
        client = electrum_client(urls(net), give_up_after=0.05)
        store = await open_store(tmp_path / "index.sqlite")
        health = client.health[client.servers[0]]
        follower = make_follower(client, store, retry_delay=0.01, max_retry_delay=10.0)
        task = asyncio.create_task(follower.run())
        try:
            with caplog.at_level(logging.WARNING, "indexer.follow"):
                await wait_until(lambda: health.failures >= 5, what="five failed connections")
                failed = [r for r in caplog.records if r.getMessage() == "round failed; retrying"]
                assert len(failed) == 1, [getattr(r, "error", r.getMessage()) for r in failed]
                net.nodes[0].clear_faults()
                await asyncio.wait_for(follower.synced.wait(), 15)  # then it recovers
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await store.close()
            await client.close()
