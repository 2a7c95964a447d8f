"""`ladle route` and `ladle build`: the router offline, over a pools file.

Same code path as the daemon (`parse_*_params` → `quote` / `build`), so integrators can check
what the router would answer. Output is JSON on stdout. A routing error prints
`{"error": {"code", "message", "data"?}}` on stdout and exits 1; an unreadable file or a bad
argument is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from router.build import build
from router.errors import RouterError
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.pools import PoolBook, PoolsFileError, load_pools
from router.route import quote

EXIT_ROUTING = 1
EXIT_USAGE = 2


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
    _print_json(result.to_json())
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
    _print_json(result.to_json())
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
