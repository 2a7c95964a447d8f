"""`ladle broadcast`: run the broadcast service; `start_server` and `start_in_up` embed it.

    ladle broadcast --port 8001 --node tcp://127.0.0.1:50001 --node tcp://127.0.0.1:50011,2

Once it serves, one JSON line goes to stdout: `{"broadcast": "http://host:port", "nodes": […]}`.
Inside `ladle up` it fans out to every devnet node (`start_in_up`, options `add_up_options`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from broadcast.app import create_app
from broadcast.config import (
    DEFAULT_DB,
    DEFAULT_RECHECK_INTERVAL,
    DEFAULT_RECORD_TTL,
    DEFAULT_TIMEOUT,
    BroadcastConfig,
    load_config,
    make_config,
)
from broadcast.service import BroadcastService
from runtime.command import run_service
from runtime.component import Started, UpContext
from runtime.serve import RunningServer, serve_until_signal, start_app

DEFAULT_PORT = 8001


async def start_server(
    config: BroadcastConfig,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    service: BroadcastService | None = None,
    log_level: str = "warning",
) -> RunningServer:
    """Serve on host:port (0: a free port) in the running loop; returns once it accepts
    connections. The caller stops it with `await running.stop()`."""
    app = create_app(service or BroadcastService(config))
    return await start_app(app, host=host, port=port, name="broadcast", log_level=log_level)


def add_commands(subparsers: Any) -> None:
    """Register `ladle broadcast` on the `ladle` command's subparsers."""
    parser = subparsers.add_parser(
        "broadcast", help="run the broadcast service (fan-out to many nodes)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="URL[,WEIGHT]",
        help="an Electrum server to broadcast to (repeat for each node), e.g. "
        "tcp://127.0.0.1:50001 or wss://host:50004,2",
    )
    parser.add_argument(
        "--settings",
        metavar="FILE",
        help="JSON settings file (nodes with weights and timeouts, db, record_ttl, protection, …)",
    )
    parser.add_argument("--db", help=f"SQLite file for status records (default {DEFAULT_DB})")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds each node may take (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--record-ttl",
        type=float,
        help=f"seconds status records are kept (default {DEFAULT_RECORD_TTL:g})",
    )
    parser.add_argument(
        "--recheck-interval",
        type=float,
        help=f"seconds between re-checks of open records (default {DEFAULT_RECHECK_INTERVAL:g})",
    )
    parser.add_argument(
        "--no-verify", action="store_true", help="do not check scripts with libauth in dry runs"
    )
    parser.set_defaults(func=cmd_broadcast)


def config_from_args(args: argparse.Namespace) -> BroadcastConfig:
    """ValueError names what is wrong."""
    options: dict[str, Any] = {}
    if args.db is not None:
        options["db_path"] = args.db
    if args.record_ttl is not None:
        options["record_ttl"] = args.record_ttl
    if args.recheck_interval is not None:
        options["recheck_interval"] = args.recheck_interval
    if args.no_verify:
        options["verify_scripts"] = False
    if args.settings:
        config = load_config(args.settings)
        if args.node:
            config = replace(config, nodes=make_config(args.node, timeout=args.timeout).nodes)
        return replace(config, **options)
    if not args.node:
        raise ValueError("give at least one --node URL[,WEIGHT] (or --settings FILE)")
    return make_config(args.node, timeout=args.timeout, **options)


async def _serve_forever(config: BroadcastConfig, host: str, port: int) -> None:
    await serve_until_signal(
        create_app(BroadcastService(config)),
        host=host,
        port=port,
        name="broadcast",
        announce=lambda url: {"broadcast": url, "nodes": [n.url for n in config.nodes]},
    )


def cmd_broadcast(args: argparse.Namespace) -> int:
    return run_service(args, config_from_args, _serve_forever)


# --- ladle up ----------------------------------------------------------------------------------


def add_up_options(parser: argparse.ArgumentParser) -> None:
    """`ladle up`'s options for this component."""
    group = parser.add_argument_group("broadcast")
    group.add_argument(
        "--broadcast-port",
        type=int,
        metavar="PORT",
        help=f"broadcast service port (default {DEFAULT_PORT}; 0 when --ports is 0)",
    )
    group.add_argument(
        "--broadcast-db",
        metavar="PATH",
        help="SQLite file for broadcast records (default: in memory, like the devnet)",
    )


@dataclass(frozen=True, slots=True)
class UpConfig:
    """`ladle up`'s broadcast options (the nodes are the devnet's)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port
    db_path: str = ":memory:"
    verify_scripts: bool = True


def up_config_from_args(args: argparse.Namespace) -> UpConfig:
    """`--broadcast-port` if given, else 0 when `--ports 0`, else 8001; `--broadcast-db` (default
    in memory); the devnet's `--host` and `--no-verify`."""
    port = args.broadcast_port
    if port is None:
        port = 0 if args.ports == 0 else DEFAULT_PORT
    return UpConfig(
        host=args.host,
        port=port,
        db_path=args.broadcast_db or ":memory:",
        verify_scripts=not args.no_verify,
    )


async def start_in_up(ctx: UpContext, options: UpConfig) -> Started | None:
    """`ladle up`'s start function: the service in front of every devnet node."""
    if ctx.devnet is None:
        return None
    urls = [str(e["tcp"]) for e in ctx.devnet.electrum()]
    config = make_config(urls, db_path=options.db_path, verify_scripts=options.verify_scripts)
    running = await start_server(config, host=options.host, port=options.port)
    return Started(
        "broadcast",
        {"broadcast": running.url},
        [
            f"broadcast: {running.url}  (POST /broadcast, GET /broadcast/status/<txid>; "
            f"fans out to {len(urls)} node(s))"
        ],
        running.stop,
    )
