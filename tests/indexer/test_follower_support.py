"""Shared pieces for the follower tests (this module holds no tests).

Everything talks to a devnet started in-process on free loopback ports, through its Electrum
sockets only; the devnet's Python API is used to *make* things happen (mine, reorg, faults),
never to read what the indexer should have seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from devnet.scenario import PRESETS, ScenarioExtension, ScenarioGenerator, ScenarioResult
from devnet.service import Devnet, DevnetConfig
from indexer.electrum import ElectrumClient
from indexer.follow import Follower
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.test_store_scenario import Rows, dump

SMALL = PRESETS["small"]


def devnet_config(**overrides: Any) -> DevnetConfig:
    settings: dict[str, Any] = {"tcp_base": 0, "ws_base": None, "verify": False}
    settings.update(overrides)
    return DevnetConfig(**settings)


async def generate(
    params: Any = SMALL, *, extensions: Sequence[ScenarioExtension] = (), **config: Any
) -> tuple[Devnet, ScenarioResult]:
    """A started devnet holding a generated scenario (the caller stops it)."""
    net = Devnet(devnet_config(**config))
    await net.start()
    try:
        result = await ScenarioGenerator(net, params, extensions=extensions).run()
    except BaseException:
        await net.stop()
        raise
    return net, result


def urls(net: Devnet) -> list[str]:
    return [f"tcp://127.0.0.1:{s.tcp_port}" for s in net.servers]


def make_follower(client: ElectrumClient, store: Store, **overrides: Any) -> Follower:
    """A follower with test-sized intervals."""
    settings: dict[str, Any] = {
        "start_height": 0,
        "mempool_interval": 0.05,
        "retry_delay": 0.02,
        "max_retry_delay": 0.2,
    }
    settings.update(overrides)
    return Follower(client, store, **settings)


async def wait_until(
    condition: Callable[[], Awaitable[bool] | bool], timeout: float = 15.0, what: str = ""
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        outcome = condition()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(0.01)


async def at_tip(store: Store, net: Devnet, node: int = 0) -> bool:
    tip = await store.tip()
    return tip is not None and tip.hash == net.nodes[node].chain.tip.hash


class Running:
    """A follower's `run()` in a task, with its store and client."""

    def __init__(self, follower: Follower, task: asyncio.Task[None]) -> None:
        self.follower = follower
        self.task = task

    @property
    def store(self) -> Store:
        return self.follower.store

    @property
    def snapshot(self) -> PoolSnapshot:
        return self.follower.store.snapshot

    def check(self) -> None:
        """Fail at once if the follower's task died."""
        if self.task.done():
            self.task.result()
            raise AssertionError("the follower stopped")

    async def caught_up(self, net: Devnet, node: int = 0, timeout: float = 15.0) -> None:
        async def done() -> bool:
            self.check()
            return await at_tip(self.store, net, node)

        self.follower.wake()
        await wait_until(done, timeout, "the follower to reach the devnet's tip")


@asynccontextmanager
async def following(
    servers: Sequence[str],
    path: str = ":memory:",
    *,
    ready: bool = True,
    client: ElectrumClient | None = None,
    **options: Any,
) -> AsyncIterator[Running]:
    """A store at `path` and a follower running against `servers` (or with `client`) until
    the block ends; the client is closed then."""
    store = await open_store(path, snapshot=PoolSnapshot())
    client = client or electrum_client(list(servers))
    follower = make_follower(client, store, **options)
    started = asyncio.Event()
    task = asyncio.create_task(follower.run(ready=started))
    running = Running(follower, task)
    try:
        if ready:
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait({task, waiter}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            running.check()
            assert started.is_set(), "the follower did not finish its initial sync"
        yield running
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await store.close()


async def reindex(servers: Sequence[str], **client_options: Any) -> Rows:
    """Every table of a fresh index of the servers' current chain."""
    store = await open_store(":memory:", snapshot=PoolSnapshot())
    client = electrum_client(list(servers), **client_options)
    try:
        await make_follower(client, store, mempool=False).sync()
        return await dump(store.conn)
    finally:
        await client.close()
        await store.close()
