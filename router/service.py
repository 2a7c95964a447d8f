"""Running the router daemon: `start_router` (in-process, over a shared `PoolSnapshot`) and
`start_router_component`, its `ladle up` component (sharing the indexer's snapshot)."""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

from websockets.asyncio.server import Server

from indexer.snapshot import PoolSnapshot
from indexer.tipwatch import TipWatch
from router.book import LiveBook
from router.daemon import DaemonConfig, HeardSource, RouterDaemon
from router.params import DEFAULT_FEE_BPS, RouterConfig
from runtime.component import Started, UpContext

log = logging.getLogger("router.service")

DEFAULT_PORT = 8765


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
    # The book and models of a large snapshot are hundreds of thousands of long-lived objects:
    # left to the cyclic GC, every full collection traverses them all (~80 ms of stalled event
    # loop at 20,000 pools, the p99 of tx.build). Frozen, they are skipped; they are acyclic
    # and freed by reference counting when a later book replaces them.
    gc.collect()  # garbage is not frozen with the rest
    gc.freeze()
    server = await daemon.serve(host, port)
    bound = next(iter(server.sockets)).getsockname()[1]
    log.info("router listening on ws://%s:%d", host, bound)
    return RouterServer(daemon, server, host, int(bound))


async def start_router_component(ctx: UpContext) -> Started | None:
    """`ladle up`'s router: on the indexer's snapshot (`ctx.snapshot`), port `--router-port`
    (default 0: any free port, announced in LADLE_READY as "router"). The router fee is on, as
    the spec has it, paid to the devnet's fee wallet (token-aware: token→token fees are tokens)
    and announced as "router_fee": {"address", "bps"}."""
    snapshot = getattr(ctx, "snapshot", None)
    if not isinstance(snapshot, PoolSnapshot):
        return None
    args = ctx.args
    fee_address = getattr(args, "router_fee_address", None)
    fee_wif = None
    if fee_address is None and ctx.devnet is not None:
        wallet = ctx.devnet.router_fee_wallet()
        fee_address, fee_wif = wallet.token_address, wallet.key.to_wif()
    config = RouterConfig(
        fee_bps=getattr(args, "router_fee_bps", DEFAULT_FEE_BPS), fee_address=fee_address
    )
    port = getattr(args, "router_port", None)
    if port is None:
        port = 0 if getattr(args, "ports", DEFAULT_PORT) == 0 else DEFAULT_PORT
    tips = getattr(ctx, "tips", None)
    heard = tips.heard if isinstance(tips, TipWatch) else None
    running = await start_router(snapshot, config, "127.0.0.1", port, heard=heard)
    lines = [f"router: {running.url} ({len(snapshot)} live pools)"]
    ready: dict[str, object] = {"router": running.url}
    if config.fee_address is not None:
        ready["router_fee"] = {"address": config.fee_address, "bps": config.fee_bps}
        wif = f", WIF {fee_wif}" if fee_wif is not None else ""
        lines.append(f"  router fee: {config.fee_bps} bps to {config.fee_address}{wif}")
    return Started("router", ready, lines, running.close)
