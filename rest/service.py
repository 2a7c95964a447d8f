"""Running the API under uvicorn: `start_server` (in the running loop, for tests and embedding),
`serve` (the `ladle rest` process: prints one JSON line once it accepts connections) and
`start_in_up` (`ladle up`'s component)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rest.app import create_app
from rest.config import DEFAULT_PORT, RestConfig
from rest.index_tokens import MAINNET_USD_FEED
from runtime.component import Started, UpContext, merged_ready
from runtime.serve import RunningServer, serve_until_signal, start_app


async def start_server(
    config: RestConfig,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log_level: str = "warning",
) -> RunningServer:
    """Serve on host:port (0 picks a free port); returns once connections are accepted."""
    return await start_app(
        create_app(config), host=host, port=port, name="REST", log_level=log_level
    )


async def serve(config: RestConfig, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM (then a graceful stop), announcing the URL on stdout."""
    await serve_until_signal(
        create_app(config),
        host=host,
        port=port,
        name="REST",
        announce=lambda url: {"rest": url, "db": str(config.db_path)},
    )


@dataclass(frozen=True, slots=True)
class UpConfig:
    """`ladle up`'s data API options."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port


def up_config_from_args(args: argparse.Namespace) -> UpConfig:
    """`--rest-port` if given, else 0 when `--ports 0`, else 8000; the devnet's `--host`."""
    port = args.rest_port
    if port is None:
        port = 0 if args.ports == 0 else DEFAULT_PORT
    return UpConfig(host=args.host, port=port)


async def start_in_up(ctx: UpContext, options: UpConfig) -> Started | None:
    """`ladle up`'s start function: the API over the indexer's database (after the indexer,
    which it needs: without one it adds nothing). The devnet's node 0 is the chain tip source,
    so "synced" is exact."""
    indexer = ctx.started.get("indexer")
    if indexer is None:
        return None
    info = indexer.ready.get("indexer")
    db = info.get("db") if isinstance(info, dict) else None
    if not isinstance(db, str):
        return None
    chain_tip = None
    if ctx.devnet is not None:
        devnet = ctx.devnet

        async def devnet_tip() -> int | None:
            return devnet.tip_height()

        chain_tip = devnet_tip
    # The devnet's own BCH/USD feed (which the indexer decodes) behind the USD figures.
    usd_feed = ctx.usd_feed or MAINNET_USD_FEED
    config = RestConfig(
        db_path=db, chain_tip=chain_tip, usd_feed=usd_feed, explorer_env=lambda: up_env(ctx)
    )
    running = await start_server(config, host=options.host, port=options.port)
    return Started(
        "rest",
        {"rest": running.url},
        [f"rest: {running.url}  (GET /tokenpool/…, /dex/…; docs at {running.url}/docs)"],
        running.stop,
    )


def up_env(ctx: UpContext) -> dict[str, object]:
    """What the explorer pages need from `ladle up`'s ready line, as it stands now (the router
    and the broadcast API start after the data API)."""
    ready = merged_ready(ctx.started.values())
    electrum = ready.get("electrum")
    ws = None
    if isinstance(electrum, list) and electrum and isinstance(electrum[0], dict):
        ws = electrum[0].get("ws")
    indexer = ready.get("indexer")
    feeds = indexer.get("feeds") if isinstance(indexer, dict) else None
    # The devnet's own BCH/USD feed first: it is the one with a month of updates.
    usd = ctx.usd_feed
    ordered = [usd] if usd else []
    ordered += [f for f in feeds or [] if f != usd]
    return {
        "network": "devnet" if ctx.devnet is not None else None,
        "oracle_feeds": ordered,
        "router": ready.get("router"),
        "broadcast": ready.get("broadcast"),
        "router_fee": ready.get("router_fee"),
        "electrum_ws": ws,
        "wallets": ready.get("wallets") or [],
    }
