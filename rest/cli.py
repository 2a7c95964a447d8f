"""`ladle rest`: serve the data API over an index database.

    ladle rest [--db PATH] [--port 8000] [--host 127.0.0.1] [--rate-limit N] [--usd-feed HEX]

Once serving, one JSON line goes to stdout: `{"rest": "http://host:port", "db": PATH}`.
Registered on the `ladle` command by `add_commands(subparsers)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rest.command import run_service
from rest.config import DEFAULT_DB, DEFAULT_PORT, DEFAULT_RATE_LIMIT, RestConfig
from rest.index_tokens import MAINNET_USD_FEED


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"index database ({DEFAULT_DB})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--rate-limit",
        type=int,
        default=DEFAULT_RATE_LIMIT,
        metavar="N",
        help=f"requests per client per minute ({DEFAULT_RATE_LIMIT}; 0 disables the limit)",
    )
    parser.add_argument(
        "--trust-forwarded",
        action="store_true",
        help="behind a proxy: rate-limit by the first X-Forwarded-For address",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        metavar="ORIGIN",
        help="allowed browser origin (repeatable; default: any)",
    )
    parser.add_argument(
        "--stale-after",
        type=int,
        default=7200,
        metavar="SEC",
        help="an index tip older than this counts as not synced to now (7200; 0: never)",
    )
    parser.add_argument(
        "--usd-feed",
        metavar="HEX",
        help="the BCH/USD oracle feed behind the *_usd figures: its 64-hex token category "
        "(default: the mainnet Delphi feed; none: no USD figures)",
    )
    parser.add_argument(
        "--prefix",
        default=None,
        choices=("bitcoincash", "bchtest", "bchreg"),
        help="CashAddr prefix of owner addresses (default: the network of the indexed chain, "
        "from its genesis block; bitcoincash for a mainnet index)",
    )


def add_commands(subparsers: Any) -> None:
    """Register `ladle rest` on the `ladle` command's subparsers."""
    parser = subparsers.add_parser(
        "rest",
        help="serve the data API (/tokenpool, /dex) over the index",
        description="Serve the REST data API over the SQLite index (read-only).",
    )
    add_arguments(parser)
    parser.set_defaults(func=cmd_rest)


def config_from_args(args: argparse.Namespace) -> RestConfig:
    """ValueError names what is wrong."""
    if not 0 <= args.port <= 65_535:
        raise ValueError(f"--port must be 0..65535, got {args.port}")
    feed = str(getattr(args, "usd_feed", None) or MAINNET_USD_FEED)
    return RestConfig(
        db_path=args.db,
        usd_feed=None if feed == "none" else feed.lower(),
        rate_limit=args.rate_limit,
        trust_forwarded=args.trust_forwarded,
        cors_origins=tuple(args.cors_origin) if args.cors_origin else ("*",),
        stale_after=args.stale_after,
        address_prefix=args.prefix,
    )


def cmd_rest(args: argparse.Namespace) -> int:
    from rest.service import serve

    return run_service(args, config_from_args, serve)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ladle rest", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return cmd_rest(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
