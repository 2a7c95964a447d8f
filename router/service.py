"""Running the router daemon: `start_router` (in-process, over a shared `PoolSnapshot`) and
`serve_router` (the `ladle router` process: an in-process indexer keeps the snapshot, so the
pools live where the router reads them; configuration `RouterServiceConfig`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import sys
from dataclasses import dataclass, field

from websockets.asyncio.server import Server

from bch import kernels as bch_kernels
from indexer.follow.source import ChainSource
from indexer.network import network_prefix
from indexer.service import IndexerConfig, ready_info, ready_lines, run_indexer
from indexer.snapshot import PoolSnapshot
from router import kernels, native
from router.book import LiveBook
from router.daemon import DaemonConfig, HeardSource, RouterDaemon
from router.params import DEFAULT_PORT, RouterConfig
from runtime.heap import keep_freed_pages
from runtime.supervise import ready_line
from runtime.tasks import cancel_and_wait

log = logging.getLogger("router.service")


@dataclass(slots=True)
class RouterServer:
    """A listening router: its URL, the daemon (for in-process tests) and how to stop it."""

    daemon: RouterDaemon
    server: Server
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    async def close(self) -> None:
        await self.daemon.stop_watching()
        self.server.close()
        await self.server.wait_closed()
        self.daemon.live.close()


def settle_memory() -> None:
    """Set the process's memory up for serving, once the book is built.

    The book and models of a large snapshot are hundreds of thousands of long-lived objects:
    left to the cyclic GC, every full collection traverses them all (~80 ms of stalled event
    loop at 20,000 pools, the p99 of tx.build). Frozen, they are skipped; they are acyclic and
    freed by reference counting when a later book replaces them. And the C allocator keeps the
    pages of freed replies for the next one (`runtime.heap.keep_freed_pages`)."""
    gc.collect()  # garbage is not frozen with the rest
    gc.freeze()
    keep_freed_pages()


def kernels_compiled() -> bool:
    """Whether both kernel packages a build runs (`bch`'s, the router's) are compiled."""
    return kernels.COMPILED and bch_kernels.COMPILED


def compiled_parts() -> str:
    """What of a build runs compiled, for the start line and the benches."""
    if kernels_compiled() and native.active():
        return "kernels and core compiled"
    if kernels_compiled():
        return "kernels compiled, core interpreted"
    return "interpreted"


async def start_router(
    snapshot: PoolSnapshot,
    config: RouterConfig | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    limits: DaemonConfig | None = None,
    heard: HeardSource | None = None,
) -> RouterServer:
    """Serve the router over `snapshot` on ws://host:port (port 0: a free one). `heard`: the
    best tips heard of (the indexer's `TipWatch.heard`), to refuse a stale snapshot."""
    daemon = RouterDaemon(LiveBook(snapshot), config or RouterConfig(), limits, heard)
    daemon.live.current()  # build the book (and every token's models) before the first client
    settle_memory()
    server = await daemon.serve(host, port)
    bound = next(iter(server.sockets)).getsockname()[1]
    log.info(
        "router listening on ws://%s:%d (%s)",
        host,
        bound,
        compiled_parts(),
    )
    return RouterServer(daemon, server, host, int(bound))


@dataclass(frozen=True, slots=True)
class RouterServiceConfig:
    """`ladle router`: the index it keeps, what it charges, its limits, where it listens."""

    index: IndexerConfig
    router: RouterConfig = field(default_factory=RouterConfig)
    limits: DaemonConfig = field(default_factory=DaemonConfig)
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port
    # Announce ready only after the registry job's first round (`ladle up`: the data API then
    # answers registry requests from the first request on).
    wait_registries: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"--port must be from 0 to 65535, got {self.port}")
        if self.index.exit_at_tip:
            raise ValueError("--exit-at-tip: the router follows the chain; use `ladle index`")


async def _on_network_of(source: ChainSource, config: RouterConfig) -> RouterConfig:
    """`config` restricted to the network the indexed chain is (from its genesis hash, asked
    of the indexer's own source), so an address of another network is a bad request rather
    than a payment nobody can see. Unchanged when the network is already set or the genesis
    is unknown (the devnet's own)."""
    if config.network is not None:
        return config
    prefix = network_prefix(await source.genesis_hash())
    return config if prefix is None else dataclasses.replace(config, network=prefix)


async def serve_router(config: RouterServiceConfig) -> int:
    """Sync the index (the router must not answer from a half-built book), serve, print the
    lines for people and one ready line, then serve until SIGINT/SIGTERM (0) or until the
    indexer fails (1)."""
    snapshot = PoolSnapshot()
    synced, fetched = asyncio.Event(), asyncio.Event()
    tips = config.index.tip_watch()
    source = config.index.source()
    indexer = asyncio.create_task(
        run_indexer(
            config.index,
            ready=synced,
            snapshot=snapshot,
            fetched=fetched,
            tips=tips,
            source=source,
        )
    )
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    server = None
    try:
        ready = [synced, fetched] if config.wait_registries else [synced]
        waiters = {
            indexer,
            asyncio.create_task(_all_set(ready)),
            asyncio.create_task(stopping.wait()),
        }
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        await cancel_and_wait(pending - {indexer})
        if indexer in done:
            indexer.result()
            return 1
        if stopping.is_set():
            return 0
        router_config = await _on_network_of(source, config.router)
        server = await start_router(
            snapshot, router_config, config.host, config.port, config.limits, heard=tips.heard
        )
        _announce(server, router_config, config.index, snapshot)
        stop = asyncio.create_task(stopping.wait())
        await asyncio.wait({indexer, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if indexer.done():
            indexer.result()
            return 1
        return 0
    finally:
        if server is not None:
            await server.close()
        await cancel_and_wait([indexer])
        await tips.close()
        with contextlib.suppress(Exception):  # closing a dead connection may fail; nothing lost
            await source.close()
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _all_set(events: list[asyncio.Event]) -> None:
    for event in events:
        await event.wait()


def _announce(
    server: RouterServer, config: RouterConfig, index: IndexerConfig, snapshot: PoolSnapshot
) -> None:
    """The lines for people, then `LADLE_READY {"router", "height", "pools", "indexer",
    "router_fee"?}` (the fee when one is charged)."""
    ready: dict[str, object] = {
        "router": server.url,
        "height": snapshot.height,
        "pools": len(snapshot),
        "indexer": ready_info(index, snapshot),
    }
    lines = [*ready_lines(index, snapshot), f"router: {server.url} ({len(snapshot)} live pools)"]
    if config.fee_address is not None:
        ready["router_fee"] = {"address": config.fee_address, "bps": config.fee_bps}
        lines.append(f"  router fee: {config.fee_bps} bps to {config.fee_address}")
    out = sys.stdout
    for line in lines:
        print(line, file=out)
    print(ready_line(ready), file=out, flush=True)
