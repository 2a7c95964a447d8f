"""Running the indexer as a service: `run_indexer` (in-process, what `ladle index` and
`ladle router` call) and what it announces once synced (`ready_info`, `ready_lines`).

The service owns the SQLite store, the chain source (Electrum servers, or a BCHN node over
JSON-RPC with optional ZMQ pushes) and the registry fetch job (BCMR
downloads, started once the initial sync is done, on its own SQLite connection); the live
`PoolSnapshot` can be passed in so that other in-process components (the router) read the very
object the indexer updates. What is decoded (oracle feeds, lending deployments) is configuration,
with the mainnet constants as defaults; `ladle up` adds the devnet's feed and deployment
(`--devnet-ledger`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from indexer.bitcoind import BitcoindClient, RpcAddress
from indexer.decoders import create_decoders
from indexer.electrum import ElectrumClient, ServerAddress, ssl_context
from indexer.follow import DEFAULT_MEMPOOL_INTERVAL, Follower, Progress
from indexer.follow.chain import DEFAULT_BULK_DISTANCE
from indexer.follow.fetch import DEFAULT_WINDOW
from indexer.follow.source import ChainSource
from indexer.follow.source_bitcoind import BitcoindSource
from indexer.follow.source_electrum import ElectrumSource
from indexer.registry_fetch import FetchConfig, RegistryFetcher
from indexer.snapshot import PoolSnapshot
from indexer.store import Store, open_writer
from indexer.store.heard import persist_heard
from indexer.tipwatch import TipWatch
from indexer.tipwatch_node import NodeTipWatch
from protocols.lending.contracts import LendingConfig
from protocols.oracle import FeedConfig, mainnet_feeds
from runtime.tasks import cancel_and_wait

log = logging.getLogger("indexer.service")

DEFAULT_ELECTRUM: tuple[str, ...] = ("tcp://127.0.0.1:50001",)  # the devnet's node 0
DEFAULT_DB = "ladle-index.sqlite"


@dataclass(frozen=True, slots=True)
class IndexerConfig:
    electrum: tuple[str, ...] = DEFAULT_ELECTRUM  # failover order: the first is preferred
    # A BCHN node's JSON-RPC URL: the chain source instead of the Electrum servers.
    bitcoind: str | None = None
    rpc_cookie: str | None = None  # the node's cookie file (else the login is in the URL)
    zmq: tuple[str, ...] = ()  # the node's ZMQ endpoints (hashblock, rawtx pushes)
    rpc_connections: int = 4  # node requests in flight at once (its -rpcthreads)
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
        if self.bitcoind is not None:
            RpcAddress.parse(self.bitcoind, cookie=self.rpc_cookie)  # ValueError naming it
        elif self.rpc_cookie is not None or self.zmq:
            raise ValueError("--rpc-cookie and --zmq are options of a node: give --bitcoind-rpc")
        for url in self.zmq:
            tcp_port = url.rpartition(":")[2] if url.startswith("tcp://") else None
            if not (url.startswith("ipc://") or (tcp_port and tcp_port.isdigit())):
                raise ValueError(f"a ZMQ endpoint is tcp://host:port or ipc://path, got {url!r}")
        if self.rpc_connections < 1:
            raise ValueError("at least one RPC connection is needed")
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

    def source(self) -> ChainSource:
        """The chain source configured: the BCHN node if one is given, else the Electrum
        servers."""
        if self.bitcoind is None:
            return ElectrumSource(self.client())
        return BitcoindSource(self._node_client(self.rpc_connections), zmq=self.zmq)

    def tip_watch(self) -> TipWatch:
        """The best tip heard of, from every configured server (the node, when it is the
        source)."""
        if self.bitcoind is not None:
            return NodeTipWatch(self._node_client(1))
        ctx = ssl_context(verify=False) if self.insecure_tls else None
        return TipWatch(self.electrum, ssl_ctx=ctx)

    def _node_client(self, connections: int) -> BitcoindClient:
        assert self.bitcoind is not None
        address = RpcAddress.parse(self.bitcoind, cookie=self.rpc_cookie)
        return BitcoindClient(address, connections=connections)


async def run_indexer(
    config: IndexerConfig,
    *,
    ready: asyncio.Event | None = None,
    snapshot: PoolSnapshot | None = None,
    fetched: asyncio.Event | None = None,
    tips: TipWatch | None = None,
    source: ChainSource | None = None,
) -> None:
    """Index until cancelled (or, with `exit_at_tip`, until synced). `ready` is set once the
    initial sync and the first mempool refresh are done; `snapshot` is the live pool snapshot
    to keep up to date (default: a private one); `fetched` is set once the registry job's first
    round (after the initial sync) is over. `tips` hears the best chain tip from every server
    (default: a private watch); what it hears is written to the index for other processes
    (`indexer.store.heard`). `source`: the chain source to read (default: `config.source()`,
    closed on return; one given stays the caller's to close)."""
    if config.db != ":memory:":
        Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    snapshot = snapshot if snapshot is not None else PoolSnapshot()
    decoders = create_decoders(snapshot=snapshot, feeds=config.feeds, lending=config.lending)
    store = await Store.open(config.db, snapshot=snapshot, decoders=decoders)
    owned = source is None
    chain = config.source() if source is None else source
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
            chain,
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
        if owned:
            with contextlib.suppress(Exception):
                await chain.close()
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


def ready_info(config: IndexerConfig, snapshot: PoolSnapshot) -> dict[str, object]:
    """The indexer's part of a ready line (`"indexer"` in `LADLE_READY`)."""
    return {
        "db": config.db,
        "height": snapshot.height,
        "pools": len(snapshot),
        "pending": len(snapshot.pending_txids()),
        "feeds": [f.category for f in config.feeds or mainnet_feeds().feeds],
        "lending": len(config.lending or (LendingConfig(),)),
    }


def ready_lines(config: IndexerConfig, snapshot: PoolSnapshot) -> list[str]:
    """What a person reads once the initial sync is done."""
    feeds = config.feeds or mainnet_feeds().feeds
    lending = config.lending or (LendingConfig(),)
    fetching = (
        f"registries fetched via {config.fetch.ipfs_gateway}"
        if config.registry_fetch
        else "no registry fetch"
    )
    return [
        f"indexer: synced to height {snapshot.height}, {len(snapshot)} live pools "
        f"({len(snapshot.pending_txids())} pending transactions); database {config.db}",
        f"  decoding {len(feeds)} oracle feed(s), {len(lending)} lending deployment(s); {fetching}",
    ]
