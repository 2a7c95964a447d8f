"""`ladle rest`: serve the data API over an index database.

    ladle rest [--db PATH] [--port 8000] [--host 127.0.0.1] [--rate-limit N] [--usd-feed HEX]
               [--router-url WS] [--broadcast-url URL] [--electrum-ws WS] [--network-label NAME]

Once serving, one JSON line goes to stdout: `{"rest": "http://host:port", "db": PATH}`.
Registered on the `ladle` command by `add_commands(subparsers)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rest.config import DEFAULT_DB, DEFAULT_PORT, DEFAULT_RATE_LIMIT, RestConfig
from rest.index_tokens import MAINNET_USD_FEED
from rest.service import serve
from runtime.command import run_service


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
    # Where the explorer's pages (/explorer) find the other services; `ladle up` fills these
    # in by itself. Without them the swap page says no router is configured.
    explorer = parser.add_argument_group("explorer (the pages at /explorer)")
    explorer.add_argument("--router-url", metavar="WS_URL", help="the router, ws:// or wss://")
    explorer.add_argument("--broadcast-url", metavar="URL", help="the broadcast API, http(s)://")
    explorer.add_argument(
        "--electrum-ws", metavar="WS_URL", help="an Electrum Cash WebSocket for wallet coins"
    )
    explorer.add_argument("--network-label", metavar="NAME", help="network name shown on the pages")


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
    env: dict[str, object] = {
        "network": getattr(args, "network_label", None),
        "router": getattr(args, "router_url", None),
        "broadcast": getattr(args, "broadcast_url", None),
        "electrum_ws": getattr(args, "electrum_ws", None),
        "oracle_feeds": [] if feed == "none" else [feed.lower()],
        "wallets": [],  # devnet test wallets exist only in `ladle up`
    }
    for key, flag in (("router", "--router-url"), ("electrum_ws", "--electrum-ws")):
        url = env[key]
        if url is not None and not str(url).startswith(("ws://", "wss://")):
            raise ValueError(f"{flag}: a ws:// or wss:// URL, got {url}")
    url = env["broadcast"]
    if url is not None and not str(url).startswith(("http://", "https://")):
        raise ValueError(f"--broadcast-url: an http:// or https:// URL, got {url}")
    return RestConfig(
        explorer_env=lambda: env,
        db_path=args.db,
        usd_feed=None if feed == "none" else feed.lower(),
        rate_limit=args.rate_limit,
        trust_forwarded=args.trust_forwarded,
        cors_origins=tuple(args.cors_origin) if args.cors_origin else ("*",),
        stale_after=args.stale_after,
        address_prefix=args.prefix,
    )


def cmd_rest(args: argparse.Namespace) -> int:
    return run_service(args, config_from_args, serve)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ladle rest", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return cmd_rest(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
