"""`ladle route` and `ladle build`: the router offline, over a pools file; `ladle router`: the
WebSocket daemon, standalone (it runs the indexer in-process for its live pool snapshot).

Same code path as the daemon (`parse_*_params` → `quote` / `build`), so integrators can check
what the router would answer. Output is JSON on stdout. A routing error prints
`{"error": {"code", "message", "data"?}}` on stdout and exits 1; an unreadable file or a bad
argument is one line on stderr and exit 2.

`ladle router` syncs the index first (the router must not answer from a half-built book), then
prints lines for people and one `LADLE_READY {"router": url, "height": h, "pools": n,
"indexer": {…}, "router_fee"?: {…}}` line for scripts, like `ladle up`, and serves until
SIGINT/SIGTERM (exit 0). Logs go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from indexer.cli import add_index_arguments
from indexer.cli import config_from_args as index_config_from_args
from router import wire
from router.build import build
from router.daemon import DaemonConfig
from router.errors import RouterError
from router.params import (
    DEFAULT_FEE_BPS,
    DEFAULT_PORT,
    RouterConfig,
    parse_build_params,
    parse_quote_params,
)
from router.pools import PoolBook, PoolsFileError, load_pools
from router.quotes import quote
from router.service import RouterServiceConfig, serve_router
from runtime.command import run_daemon
from runtime.usage import UsageError, reporting_usage

EXIT_ROUTING = 1


def _print_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _config(args: argparse.Namespace) -> RouterConfig:
    try:
        return RouterConfig(
            fee_bps=args.fee_bps, fee_address=args.fee_address, fee_per_byte=args.fee_per_byte
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _book(path: str) -> PoolBook:
    try:
        return PoolBook(load_pools(path))
    except OSError as exc:
        raise UsageError(f"cannot read pools file {path}: {exc.strerror or exc}") from None
    except PoolsFileError as exc:
        raise UsageError(f"bad pools file {path}: {exc}") from None


def _read_request(path: str) -> object:
    try:
        raw = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot read request file {path}: {exc.strerror or exc}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"request file {path} is not valid JSON: {exc}") from None
    # A whole JSON-RPC request is accepted too: its params are what counts.
    if isinstance(data, dict) and "method" in data and isinstance(data.get("params"), dict):
        return data["params"]
    return data


@reporting_usage
def cmd_route(args: argparse.Namespace) -> int:
    """Print the quote for `--sell/--buy/--amount/--side` over `--pools`."""
    config = _config(args)
    params: dict[str, Any] = {
        "sell": args.sell,
        "buy": args.buy,
        "amount": args.amount,
        "side": args.side,
    }
    try:
        request = parse_quote_params(params)
    except RouterError as exc:
        raise UsageError(exc.message) from None
    book = _book(args.pools)
    try:
        result = quote(book, request, config)
    except RouterError as exc:
        _print_json({"error": exc.to_json()})
        return EXIT_ROUTING
    _print_json(wire.quote_doc(result))
    return 0


@reporting_usage
def cmd_build(args: argparse.Namespace) -> int:
    """Print the `tx.build` result for the params object in `--request` over `--pools`."""
    config = _config(args)
    params = _read_request(args.request)
    book = _book(args.pools)
    try:
        result = build(book, parse_build_params(params, config), config)
    except RouterError as exc:
        _print_json({"error": exc.to_json()})
        return EXIT_ROUTING
    _print_json(wire.build_doc(result))
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pools", required=True, metavar="FILE", help="JSON array of pools")
    parser.add_argument(
        "--fee-bps",
        type=int,
        default=10,
        metavar="N",
        help="router fee in basis points of the trade (default 10; 0 disables)",
    )
    parser.add_argument(
        "--fee-address",
        default=None,
        metavar="ADDR",
        help="token-aware CashAddr receiving the router fee (no fee without one)",
    )


def add_commands(subparsers: Any) -> None:
    """Register `route` and `build` on the `ladle` parser's subcommands."""
    route = subparsers.add_parser("route", help="quote an order over a pools file")
    _common(route)
    route.add_argument("--sell", required=True, metavar="A", help='"bch" or a token id')
    route.add_argument("--buy", required=True, metavar="B", help='"bch" or a token id')
    route.add_argument("--amount", required=True, metavar="N", help="integer, base units")
    route.add_argument(
        "--side",
        choices=("sell", "buy"),
        default="sell",
        help="sell: AMOUNT is exact input (default); buy: AMOUNT is exact output",
    )
    route.add_argument(
        "--fee-per-byte",
        type=float,
        default=1.0,
        metavar="F",
        help="miner fee rate in sat/byte (default 1); also prices each pool's bytes",
    )
    route.set_defaults(func=cmd_route)

    build_cmd = subparsers.add_parser("build", help="build an unsigned trade over a pools file")
    _common(build_cmd)
    build_cmd.add_argument(
        "--request", required=True, metavar="FILE", help="tx.build params as JSON (- for stdin)"
    )
    build_cmd.add_argument(
        "--fee-per-byte",
        type=float,
        default=1.0,
        metavar="F",
        help="miner fee rate when the request names none (default 1)",
    )
    build_cmd.set_defaults(func=cmd_build)
    add_router_command(subparsers)


# --- ladle router: the daemon, standalone ---------------------------------------------------


def config_from_args(args: argparse.Namespace) -> RouterServiceConfig:
    """`ladle router`'s configuration; ValueError names a bad option."""
    # The spec charges a router fee on every build; a daemon without a fee address would
    # silently charge none, so running fee-less must be asked for (`--fee-bps 0`).
    if args.fee_address is None and args.fee_bps != 0:
        raise ValueError(
            "the router fee needs --fee-address ADDR (token-aware CashAddr); "
            "--fee-bps 0 runs without a fee"
        )
    if args.max_connections < 1 or not args.rate > 0:
        raise ValueError("--max-connections must be ≥ 1 and --rate > 0")
    if args.max_lag_blocks < 0 or not args.max_lag_seconds >= 0:
        raise ValueError("--max-lag-blocks and --max-lag-seconds must be ≥ 0")
    return RouterServiceConfig(
        index=index_config_from_args(args),
        router=RouterConfig(
            fee_bps=DEFAULT_FEE_BPS if args.fee_bps is None else args.fee_bps,
            fee_address=args.fee_address,
            fee_per_byte=args.fee_per_byte,
        ),
        limits=DaemonConfig(
            max_connections=args.max_connections,
            rate=args.rate,
            max_lag_blocks=args.max_lag_blocks,
            max_lag_seconds=args.max_lag_seconds,
        ),
        host=args.host,
        port=args.port,
        wait_registries=args.wait_registries,
    )


def cmd_router(args: argparse.Namespace) -> int:
    """Serve the router over a live index of `--electrum` (database `--db`)."""
    return run_daemon(args, config_from_args, serve_router, _router_failed)


def _router_failed(exc: Exception) -> int:
    print(f"ladle: router failed: {exc}", file=sys.stderr)
    return EXIT_ROUTING


def add_router_command(subparsers: Any) -> None:
    defaults = DaemonConfig()
    parser = subparsers.add_parser(
        "router",
        help="run the WebSocket swap router (with an in-process indexer)",
        description="Serve the router's JSON-RPC over WebSocket on a live pool snapshot kept "
        "by an in-process indexer of --electrum (or --bitcoind-rpc) into --db, until "
        "SIGINT/SIGTERM.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--fee-bps",
        type=int,
        default=None,
        metavar="N",
        help=f"router fee (default {DEFAULT_FEE_BPS} bps); 0 runs without a fee",
    )
    parser.add_argument(
        "--fee-address",
        default=None,
        metavar="ADDR",
        help="token-aware CashAddr receiving the router fee (required unless --fee-bps 0)",
    )
    parser.add_argument(
        "--fee-per-byte",
        type=float,
        default=1.0,
        metavar="F",
        help="miner fee rate when a request names none (default 1 sat/byte)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        metavar="N",
        help=f"connections beyond N get HTTP 503 (default {defaults.max_connections})",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=defaults.rate,
        metavar="N",
        help=f"requests per second per connection (default {defaults.rate:g})",
    )
    parser.add_argument(
        "--wait-registries",
        action="store_true",
        help="print the ready line only after the first round of registry downloads",
    )
    parser.add_argument(
        "--max-lag-blocks",
        type=int,
        default=defaults.max_lag_blocks,
        metavar="N",
        help="refuse quotes and builds (stale_snapshot) while the snapshot lags the best tip "
        f"heard by more than N blocks (default {defaults.max_lag_blocks})",
    )
    parser.add_argument(
        "--max-lag-seconds",
        type=float,
        default=defaults.max_lag_seconds,
        metavar="S",
        help="… or has possibly been out of date for more than S seconds (default "
        f"{defaults.max_lag_seconds:g})",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=cmd_router)
