"""`ladle route` and `ladle build`: the router offline, over a pools file; `ladle router`: the
WebSocket daemon, standalone (it runs the indexer in-process for its live pool snapshot).

Same code path as the daemon (`parse_*_params` → `quote` / `build`), so integrators can check
what the router would answer. Output is JSON on stdout. A routing error prints
`{"error": {"code", "message", "data"?}}` on stdout and exits 1; an unreadable file or a bad
argument is one line on stderr and exit 2.

`ladle router` syncs the index first (the router must not answer from a half-built book), then
prints a line for people and one `LADLE_READY {"router": url, "height": h, "pools": n}` line for
scripts, like `ladle up`, and serves until SIGINT/SIGTERM (exit 0). Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from typing import TYPE_CHECKING, Any

import orjson

from indexer.cli import add_index_arguments, config_from_args
from indexer.network import network_prefix
from indexer.service import run_indexer
from indexer.snapshot import PoolSnapshot
from router import wire
from router.build import build
from router.daemon import DaemonConfig
from router.errors import RouterError
from router.params import DEFAULT_FEE_BPS, RouterConfig, parse_build_params, parse_quote_params
from router.pools import PoolBook, PoolsFileError, load_pools
from router.quotes import quote
from router.service import DEFAULT_PORT, start_router
from runtime.logs import configure_logging
from runtime.tasks import cancel_and_wait
from runtime.usage import EXIT_USAGE

if TYPE_CHECKING:
    from indexer.service import IndexerConfig

EXIT_ROUTING = 1
READY = "LADLE_READY"  # the machine-readable line, as `ladle up` prints it


class _UsageError(Exception):
    pass


def _print_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _usage(message: str) -> int:
    print(f"ladle: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _config(args: argparse.Namespace) -> RouterConfig:
    try:
        return RouterConfig(
            fee_bps=args.fee_bps, fee_address=args.fee_address, fee_per_byte=args.fee_per_byte
        )
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


def _book(path: str) -> PoolBook:
    try:
        return PoolBook(load_pools(path))
    except OSError as exc:
        raise _UsageError(f"cannot read pools file {path}: {exc.strerror or exc}") from None
    except PoolsFileError as exc:
        raise _UsageError(f"bad pools file {path}: {exc}") from None


def _read_request(path: str) -> object:
    try:
        raw = sys.stdin.buffer.read() if path == "-" else open(path, "rb").read()  # noqa: SIM115
    except OSError as exc:
        raise _UsageError(f"cannot read request file {path}: {exc.strerror or exc}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _UsageError(f"request file {path} is not valid JSON: {exc}") from None
    # A whole JSON-RPC request is accepted too: its params are what counts.
    if isinstance(data, dict) and "method" in data and isinstance(data.get("params"), dict):
        return data["params"]
    return data


def cmd_route(args: argparse.Namespace) -> int:
    """Print the quote for `--sell/--buy/--amount/--side` over `--pools`."""
    try:
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
            raise _UsageError(exc.message) from None
        book = _book(args.pools)
    except _UsageError as exc:
        return _usage(str(exc))
    try:
        result = quote(book, request, config)
    except RouterError as exc:
        _print_json({"error": exc.to_json()})
        return EXIT_ROUTING
    _print_json(wire.quote_doc(result))
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    """Print the `tx.build` result for the params object in `--request` over `--pools`."""
    try:
        config = _config(args)
        params = _read_request(args.request)
        book = _book(args.pools)
    except _UsageError as exc:
        return _usage(str(exc))
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


async def _on_network_of(index_config: IndexerConfig, config: RouterConfig) -> RouterConfig:
    """`config` restricted to the network the indexed server follows (from its genesis hash),
    so an address of another network is a bad request rather than a payment nobody can see.
    Unchanged when the network is already set or the genesis is unknown (the devnet's own)."""
    if config.network is not None:
        return config
    client = index_config.client()
    try:
        prefix = network_prefix((await client.capabilities()).genesis_hash)
    finally:
        await client.close()
    return config if prefix is None else dataclasses.replace(config, network=prefix)


async def _run_router(args: argparse.Namespace, config: RouterConfig) -> int:
    limits = DaemonConfig(
        max_connections=args.max_connections,
        rate=args.rate,
        max_lag_blocks=args.max_lag_blocks,
        max_lag_seconds=args.max_lag_seconds,
    )
    index_config = config_from_args(args)
    snapshot = PoolSnapshot()
    ready = asyncio.Event()
    tips = index_config.tip_watch()
    indexer = asyncio.create_task(
        run_indexer(index_config, ready=ready, snapshot=snapshot, tips=tips)
    )
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    server = None
    try:
        waiters = {indexer, asyncio.create_task(ready.wait()), asyncio.create_task(stopping.wait())}
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending - {indexer}:
            task.cancel()
        if indexer in done:
            indexer.result()
            return 1
        if stopping.is_set():
            return 0
        config = await _on_network_of(index_config, config)
        server = await start_router(
            snapshot, config, args.host, args.port, limits, heard=tips.heard
        )
        ready_doc = {"router": server.url, "height": snapshot.height, "pools": len(snapshot)}
        print(f"router: {server.url} ({len(snapshot)} live pools)")
        print(f"{READY} {orjson.dumps(ready_doc).decode()}", flush=True)
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
        for sig in signals:
            loop.remove_signal_handler(sig)


def cmd_router(args: argparse.Namespace) -> int:
    """Serve the router over a live index of `--electrum` (database `--db`)."""
    try:
        # The spec charges a router fee on every build; a daemon without a fee address would
        # silently charge none, so running fee-less must be asked for (`--fee-bps 0`).
        if args.fee_address is None and args.fee_bps != 0:
            raise ValueError(
                "the router fee needs --fee-address ADDR (token-aware CashAddr); "
                "--fee-bps 0 runs without a fee"
            )
        config = RouterConfig(
            fee_bps=DEFAULT_FEE_BPS if args.fee_bps is None else args.fee_bps,
            fee_address=args.fee_address,
            fee_per_byte=args.fee_per_byte,
        )
        config_from_args(args)
        if args.max_connections < 1 or not args.rate > 0:
            raise ValueError("--max-connections must be ≥ 1 and --rate > 0")
        if args.max_lag_blocks < 0 or not args.max_lag_seconds >= 0:
            raise ValueError("--max-lag-blocks and --max-lag-seconds must be ≥ 0")
        if not 0 <= args.port <= 65535:
            raise ValueError(f"--port must be from 0 to 65535, got {args.port}")
        if args.exit_at_tip:
            raise ValueError("--exit-at-tip: the router follows the chain; use `ladle index`")
    except ValueError as exc:
        return _usage(str(exc))
    configure_logging(args.log_format, args.log_level.upper())
    try:
        return asyncio.run(_run_router(args, config))
    except Exception as exc:
        print(f"ladle: router failed: {exc}", file=sys.stderr)
        return EXIT_ROUTING


def add_router_command(subparsers: Any) -> None:
    defaults = DaemonConfig()
    parser = subparsers.add_parser(
        "router",
        help="run the WebSocket swap router (with an in-process indexer)",
        description="Serve the router's JSON-RPC over WebSocket on a live pool snapshot kept "
        "by an in-process indexer of --electrum into --db, until SIGINT/SIGTERM.",
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
