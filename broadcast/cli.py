"""`ladle broadcast`: run the broadcast service; `start_server` embeds it in a running loop.

    ladle broadcast --port 8001 --node tcp://127.0.0.1:50001 --node tcp://127.0.0.1:50011,2 \
        --bitcoind-rpc http://user:password@127.0.0.1:8332

Once it serves, one JSON line goes to stdout: `{"broadcast": "http://host:port", "nodes": […]}`.
`ladle up` runs it in front of every devnet node (its options: `config.add_up_options`).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from broadcast.app import create_app
from broadcast.config import (
    DEFAULT_DB,
    DEFAULT_PORT,
    DEFAULT_RECHECK_INTERVAL,
    DEFAULT_RECORD_TTL,
    DEFAULT_TIMEOUT,
    BroadcastConfig,
    load_config,
    make_config,
    parse_node_spec,
)
from broadcast.service import BroadcastService
from runtime.command import run_service
from runtime.logs import add_log_options
from runtime.priority import add_nice_option, check_nice
from runtime.serve import RunningServer, serve_until_signal, start_app


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
        "--bitcoind-rpc",
        action="append",
        default=[],
        metavar="URL[,WEIGHT]",
        help="a BCHN node's JSON-RPC to broadcast to (repeat for each node), e.g. "
        "http://user:password@127.0.0.1:8332, or without a login and --rpc-cookie; dry runs "
        "then ask it (testmempoolaccept)",
    )
    parser.add_argument(
        "--rpc-cookie",
        metavar="FILE",
        default="",
        help="the node's cookie file (e.g. ~/.bitcoin/.cookie), for --bitcoind-rpc URLs "
        "without a login",
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
    add_nice_option(parser)
    add_log_options(parser)
    parser.set_defaults(func=cmd_broadcast)


def config_from_args(args: argparse.Namespace) -> BroadcastConfig:
    """ValueError names what is wrong."""
    options: dict[str, Any] = {}
    check_nice(args.nice)
    if args.db is not None:
        options["db_path"] = args.db
    if args.record_ttl is not None:
        options["record_ttl"] = args.record_ttl
    if args.recheck_interval is not None:
        options["recheck_interval"] = args.recheck_interval
    if args.no_verify:
        options["verify_scripts"] = False
    electrum = [parse_node_spec(spec, args.timeout) for spec in args.node]
    bitcoind = [
        parse_node_spec(spec, args.timeout, cookie=args.rpc_cookie) for spec in args.bitcoind_rpc
    ]
    if any(n.is_bitcoind for n in electrum):
        raise ValueError("--node takes an Electrum server; a BCHN node's RPC is --bitcoind-rpc")
    if not all(n.is_bitcoind for n in bitcoind):
        raise ValueError("--bitcoind-rpc takes a BCHN node's http:// RPC URL")
    nodes = electrum + bitcoind
    if args.rpc_cookie and not args.bitcoind_rpc:
        raise ValueError("--rpc-cookie is the login of a node: give --bitcoind-rpc URL")
    if args.settings:
        config = load_config(args.settings)
        if nodes:
            config = replace(config, nodes=tuple(nodes))
        return replace(config, **options)
    if not nodes:
        raise ValueError(
            "give at least one --node URL[,WEIGHT] or --bitcoind-rpc URL[,WEIGHT] "
            "(or --settings FILE)"
        )
    return make_config(nodes, **options)


async def _serve_forever(config: BroadcastConfig, host: str, port: int) -> None:
    await serve_until_signal(
        create_app(BroadcastService(config)),
        host=host,
        port=port,
        name="broadcast",
        announce=lambda url: {"broadcast": url, "nodes": [n.public_url for n in config.nodes]},
    )


def cmd_broadcast(args: argparse.Namespace) -> int:
    return run_service(args, config_from_args, _serve_forever)
