"""Running the indexer as a service: `run_indexer` (in-process, what `ladle index` and
`ladle up` call) and `start_indexer` (its `ladle up` component).

The service owns the SQLite store, the Electrum client and the registry fetch job (BCMR
downloads, started once the initial sync is done, on its own SQLite connection); the live
`PoolSnapshot` can be passed in so that other in-process components (the router) read the very
object the indexer updates. What is decoded (oracle feeds, lending deployments) is configuration,
with the mainnet constants as defaults; `ladle up` adds the devnet's feed and deployment.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from indexer.decoders import create_decoders
from indexer.electrum import ElectrumClient, ServerAddress, ssl_context
from indexer.follow import DEFAULT_MEMPOOL_INTERVAL, Follower, Progress
from indexer.follow.chain import DEFAULT_BULK_DISTANCE
from indexer.follow.fetch import DEFAULT_WINDOW
from indexer.registry_fetch import FetchConfig, OffchainSource, RegistryFetcher
from indexer.snapshot import PoolSnapshot
from indexer.store import Store, open_writer
from indexer.store.heard import persist_heard
from indexer.tipwatch import TipWatch
from protocols.ledger_deployments import feed_configs, lending_configs
from protocols.lending.contracts import LendingConfig
from protocols.oracle import FeedConfig, mainnet_feeds
from runtime.component import Started, UpContext
from runtime.tasks import cancel_and_wait

log = logging.getLogger("indexer.service")

DEFAULT_ELECTRUM: tuple[str, ...] = ("tcp://127.0.0.1:50001",)  # the devnet's node 0
DEFAULT_DB = "ladle-index.sqlite"


@dataclass(frozen=True, slots=True)
class IndexerConfig:
    electrum: tuple[str, ...] = DEFAULT_ELECTRUM  # failover order: the first is preferred
    db: str = DEFAULT_DB
    start_height: int | None = None  # None: 792772 on mainnet, 0 elsewhere
    insecure_tls: bool = False  # accept any certificate (self-signed servers)
    window: int = DEFAULT_WINDOW  # blocks fetched ahead while one is applied
    # How far below the tip the initial sync defers the secondary indexes (None: never).
    bulk_distance: int | None = DEFAULT_BULK_DISTANCE
    mempool: bool = True
    mempool_interval: float = DEFAULT_MEMPOOL_INTERVAL  # seconds between mempool polls
    exit_at_tip: bool = False  # stop once the initial sync reached the tip
    progress: bool = True  # sync progress: a status line on a terminal, else log records
    feeds: tuple[FeedConfig, ...] | None = None  # oracle feeds (None: the mainnet Delphi feed)
    lending: tuple[LendingConfig, ...] | None = None  # deployments (None: mainnet v1)
    registry_fetch: bool = True  # run the BCMR fetch job (not for an in-memory database)
    fetch: FetchConfig = field(default_factory=FetchConfig)  # gateway, limits, off-chain lists
    fetch_interval: float = 60.0  # seconds between fetch rounds

    def __post_init__(self) -> None:
        if not self.electrum:
            raise ValueError("at least one Electrum server is needed")
        for url in self.electrum:
            ServerAddress.parse(url)  # raises ValueError naming the problem
        if self.start_height is not None and self.start_height < 0:
            raise ValueError("the start height cannot be negative")
        if self.window < 1:
            raise ValueError("the fetch window must be at least 1 block")
        if self.bulk_distance is not None and self.bulk_distance < 0:
            raise ValueError("the bulk distance cannot be negative")
        if not self.mempool_interval > 0:
            raise ValueError("the mempool interval must be positive")
        if not self.db:
            raise ValueError("a database path is needed")
        if not self.fetch_interval > 0:
            raise ValueError("the registry fetch interval must be positive")

    def client(self) -> ElectrumClient:
        ctx = ssl_context(verify=False) if self.insecure_tls else None
        return ElectrumClient(self.electrum, client_name="ladle-indexer", ssl_ctx=ctx)

    def tip_watch(self) -> TipWatch:
        """The best tip heard of, from every configured server."""
        ctx = ssl_context(verify=False) if self.insecure_tls else None
        return TipWatch(self.electrum, ssl_ctx=ctx)


async def run_indexer(
    config: IndexerConfig,
    *,
    ready: asyncio.Event | None = None,
    snapshot: PoolSnapshot | None = None,
    fetched: asyncio.Event | None = None,
    tips: TipWatch | None = None,
) -> None:
    """Index until cancelled (or, with `exit_at_tip`, until synced). `ready` is set once the
    initial sync and the first mempool refresh are done; `snapshot` is the live pool snapshot
    to keep up to date (default: a private one); `fetched` is set once the registry job's first
    round (after the initial sync) is over. `tips` hears the best chain tip from every server
    (default: a private watch); what it hears is written to the index for other processes
    (`indexer.store.heard`)."""
    if config.db != ":memory:":
        Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    snapshot = snapshot if snapshot is not None else PoolSnapshot()
    decoders = create_decoders(snapshot=snapshot, feeds=config.feeds, lending=config.lending)
    store = await Store.open(config.db, snapshot=snapshot, decoders=decoders)
    client = config.client()
    synced = ready if ready is not None else asyncio.Event()
    watch = tips if tips is not None else config.tip_watch()
    await watch.start()
    background: list[asyncio.Task[None]] = []
    if config.db != ":memory:":
        background.append(asyncio.create_task(persist_heard(config.db, watch.heard, watch.changed)))
    job = None
    if config.registry_fetch and config.db != ":memory:" and not config.exit_at_tip:
        job = asyncio.create_task(_fetch_registries(config, synced, fetched))
    elif fetched is not None:
        fetched.set()  # no job: nothing to wait for
    try:
        follower = Follower(
            client,
            store,
            start_height=config.start_height,
            window=config.window,
            bulk_distance=config.bulk_distance,
            mempool=config.mempool,
            mempool_interval=config.mempool_interval,
            progress=Progress() if config.progress else None,
        )
        await follower.run(ready=synced, exit_at_tip=config.exit_at_tip)
    finally:
        if job is not None:
            background.append(job)
        await cancel_and_wait(background)
        if tips is None:
            await watch.close()
        with contextlib.suppress(Exception):
            await client.close()
        await store.close()


async def _fetch_registries(
    config: IndexerConfig, synced: asyncio.Event, fetched: asyncio.Event | None
) -> None:
    """The BCMR fetch job, from the end of the initial sync (so it never slows the sync down)."""
    await synced.wait()
    try:
        conn = await open_writer(config.db)
    except Exception as exc:  # the index is still useful without registries
        log.warning("the registry fetch job cannot open %s: %s", config.db, exc)
        if fetched is not None:
            fetched.set()
        return
    try:
        fetcher = RegistryFetcher(conn, config.fetch)
        await fetcher.run(config.fetch_interval, first_round=fetched)
    finally:
        await conn.close()


@dataclass(frozen=True, slots=True)
class UpConfig:
    """`ladle up`'s indexer options (the rest of its configuration is the devnet's)."""

    db: str | None = None  # None: a temporary file, removed on stop
    ipfs_gateway: str | None = None  # None: the devnet's HTTP server's
    registry_sources: tuple[OffchainSource, ...] = ()
    registry_fetch: bool = True


def up_config_from_args(args: argparse.Namespace) -> UpConfig:
    """`ladle up`'s indexer options (`indexer.cli.add_registry_arguments`)."""
    return UpConfig(
        ipfs_gateway=args.ipfs_gateway,
        registry_sources=tuple(args.registry_source or ()),
        registry_fetch=not args.no_registry_fetch,
    )


def up_config(ctx: UpContext, options: UpConfig, db: str) -> IndexerConfig:
    """`ladle up`'s indexer configuration: the devnet's nodes (failover in node order); the
    mainnet feeds and deployments plus the devnet's own (its oracle feed, its lending
    deployment); registries fetched from the devnet's HTTP server (its IPFS gateway) and from
    the `--registry-source` lists."""
    assert ctx.devnet is not None
    urls = tuple(str(e["tcp"]) for e in ctx.devnet.electrum())
    feeds = list(mainnet_feeds().feeds)
    lending = [LendingConfig()]
    ledger = ctx.devnet.ledger
    if ledger is not None:
        feeds += feed_configs(ledger)
        lending += lending_configs(ledger)
    gateway = options.ipfs_gateway or f"{ctx.devnet.http_url}/ipfs/"
    sources = options.registry_sources
    return IndexerConfig(
        electrum=urls,
        db=db,
        start_height=0,
        progress=False,
        feeds=tuple(feeds),
        lending=tuple(lending),
        registry_fetch=options.registry_fetch,
        fetch=FetchConfig(ipfs_gateway=gateway, offchain=sources),
    )


async def start_indexer(ctx: UpContext, options: UpConfig) -> Started | None:
    """`ladle up`'s indexer (`up_config`) into a fresh database; returns once the initial sync
    and the first registry fetch round are done. Shares `ctx.snapshot` when the context has one
    (for the router); the database is `options.db` if set, else a temporary file removed on
    stop."""
    if ctx.devnet is None:
        return None
    chosen = options.db
    scratch = None if chosen else tempfile.mkdtemp(prefix="ladle-index-")
    db = str(chosen) if chosen else str(Path(scratch or ".") / "index.sqlite")
    snapshot = ctx.snapshot if isinstance(ctx.snapshot, PoolSnapshot) else PoolSnapshot()
    config = up_config(ctx, options, db)
    ready, fetched = asyncio.Event(), asyncio.Event()
    tips = ctx.tips = config.tip_watch()
    task = asyncio.create_task(
        run_indexer(config, ready=ready, snapshot=snapshot, fetched=fetched, tips=tips)
    )

    async def stop() -> None:
        await cancel_and_wait([task])
        await tips.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    async def both() -> None:
        await ready.wait()
        await fetched.wait()

    waiter = asyncio.create_task(both())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        waiter.cancel()
        await stop()
        raise
    waiter.cancel()
    if task.done():
        await stop()
        task.result()  # raises what ended it
        raise RuntimeError("the indexer stopped before its initial sync finished")
    feeds = config.feeds or ()
    info: dict[str, object] = {
        "db": db,
        "height": snapshot.height,
        "pools": len(snapshot),
        "pending": len(snapshot.pending_txids()),
        "feeds": [f.category for f in feeds],
        "lending": len(config.lending or ()),
    }
    lines = [
        f"indexer: synced to height {snapshot.height}, {len(snapshot)} live pools "
        f"({len(snapshot.pending_txids())} pending transactions); database {db}",
        f"  decoding {len(feeds)} oracle feed(s), {len(config.lending or ())} lending "
        f"deployment(s); registries fetched via {config.fetch.ipfs_gateway}",
    ]
    return Started("indexer", {"indexer": info}, lines, stop)
