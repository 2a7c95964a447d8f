"""Running the indexer as a service: `run_indexer` (in-process, what `ladle index` and
`ladle up` call) and `start_indexer` (its `ladle up` component).

The service owns the SQLite store and the Electrum client; the live `PoolSnapshot` can be passed
in so that other in-process components (the router) read the very object the indexer updates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.electrum import ElectrumClient, ServerAddress, ssl_context
from indexer.follow import DEFAULT_MEMPOOL_INTERVAL, Follower, Progress
from indexer.follow.fetch import DEFAULT_WINDOW
from indexer.snapshot import PoolSnapshot
from indexer.store import Store

if TYPE_CHECKING:
    from ladle.up import Started, UpContext

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
    mempool: bool = True
    mempool_interval: float = DEFAULT_MEMPOOL_INTERVAL  # seconds between mempool polls
    exit_at_tip: bool = False  # stop once the initial sync reached the tip
    progress: bool = True  # sync progress: a status line on a terminal, else log records

    def __post_init__(self) -> None:
        if not self.electrum:
            raise ValueError("at least one Electrum server is needed")
        for url in self.electrum:
            ServerAddress.parse(url)  # raises ValueError naming the problem
        if self.start_height is not None and self.start_height < 0:
            raise ValueError("the start height cannot be negative")
        if self.window < 1:
            raise ValueError("the fetch window must be at least 1 block")
        if not self.mempool_interval > 0:
            raise ValueError("the mempool interval must be positive")
        if not self.db:
            raise ValueError("a database path is needed")

    def client(self) -> ElectrumClient:
        ctx = ssl_context(verify=False) if self.insecure_tls else None
        return ElectrumClient(self.electrum, client_name="ladle-indexer", ssl_ctx=ctx)


async def run_indexer(
    config: IndexerConfig,
    *,
    ready: asyncio.Event | None = None,
    snapshot: PoolSnapshot | None = None,
) -> None:
    """Index until cancelled (or, with `exit_at_tip`, until synced). `ready` is set once the
    initial sync and the first mempool refresh are done; `snapshot` is the live pool snapshot
    to keep up to date (default: a private one)."""
    if config.db != ":memory:":
        Path(config.db).parent.mkdir(parents=True, exist_ok=True)
    store = await Store.open(config.db, snapshot=snapshot)
    client = config.client()
    try:
        follower = Follower(
            client,
            store,
            start_height=config.start_height,
            window=config.window,
            mempool=config.mempool,
            mempool_interval=config.mempool_interval,
            progress=Progress() if config.progress else None,
        )
        await follower.run(ready=ready, exit_at_tip=config.exit_at_tip)
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        await store.close()


async def start_indexer(ctx: UpContext) -> Started | None:
    """`ladle up`'s indexer: follows the devnet's nodes (failover in node order) into a fresh
    database and returns once the initial sync is done. Shares `ctx.snapshot` when the context
    has one (for the router); the database is `ctx.args.index_db` if set, else a temporary file
    removed on stop."""
    from ladle.up import Started

    if ctx.devnet is None:
        return None
    urls = tuple(str(e["tcp"]) for e in ctx.devnet.electrum())
    chosen = getattr(ctx.args, "index_db", None)
    scratch = None if chosen else tempfile.mkdtemp(prefix="ladle-index-")
    db = str(chosen) if chosen else str(Path(scratch or ".") / "index.sqlite")
    shared = getattr(ctx, "snapshot", None)
    snapshot = shared if isinstance(shared, PoolSnapshot) else PoolSnapshot()
    config = IndexerConfig(electrum=urls, db=db, start_height=0, progress=False)
    ready = asyncio.Event()
    task = asyncio.create_task(run_indexer(config, ready=ready, snapshot=snapshot))

    async def stop() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    waiter = asyncio.create_task(ready.wait())
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
    info: dict[str, object] = {
        "db": db,
        "height": snapshot.height,
        "pools": len(snapshot),
        "pending": len(snapshot.pending_txids()),
    }
    lines = [
        f"indexer: synced to height {snapshot.height}, {len(snapshot)} live pools "
        f"({len(snapshot.pending_txids())} pending transactions); database {db}"
    ]
    return Started("indexer", {"indexer": info}, lines, stop)
