"""`ladle rest`: serve the data API over an index database.

    ladle rest [--db PATH] [--port 8000] [--host 127.0.0.1] [--workers N] [--nice N]
               [--rate-limit N]
               [--usd-feed HEX] [--electrum URL …] [--router-url WS] [--broadcast-url URL]
               [--electrum-ws WS] [--network-label NAME] [--explorer-env FILE]
               [--log-format auto|json|text] [--log-level LEVEL]

`--workers N` processes share the listening socket (each an SQLite reader of the one index; a
dead worker is restarted) and the rate limit's buckets (one limit per client for the whole
server); `--nice N` runs them at a lower scheduling priority (`runtime.priority`). Once every
worker accepts connections, one JSON line goes to stdout: `{"rest": "http://host:port", "db":
PATH, "workers": N}`. Registered on the `ladle` command by `add_commands(subparsers)`.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette

from indexer.electrum import ServerAddress
from rest.app import create_app
from rest.chain_tip import electrum_tip
from rest.config import DEFAULT_DB, DEFAULT_PORT, DEFAULT_RATE_LIMIT, RestConfig
from rest.index_tokens import MAINNET_USD_FEED
from rest.ratelimit import shared_table
from runtime.logs import add_log_options, configure_logging
from runtime.priority import add_nice_option, check_nice, set_nice
from runtime.usage import EXIT_FAILURE, EXIT_USAGE
from runtime.workers import serve_workers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"index database ({DEFAULT_DB})"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes sharing the port (default 1; a dead one is restarted)",
    )
    add_nice_option(parser)
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
        "--electrum",
        action="extend",
        nargs="+",
        metavar="URL",
        help="Electrum server(s) whose chain tip /health and the synced check compare the "
        "index with (failover in the order given; default: the index tip's age, --stale-after)",
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
    explorer.add_argument(
        "--explorer-env",
        metavar="FILE",
        type=Path,
        help="a JSON object read on each /explorer/config.json, over the options above "
        '(keys "network", "router", "broadcast", "electrum_ws", "router_fee", "wallets", '
        '"oracle_feeds"; what `ladle up` writes); a missing file: the options alone',
    )
    add_log_options(parser)


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
    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    check_nice(args.nice)
    for server in args.electrum or ():
        ServerAddress.parse(server)  # ValueError naming the problem
    return RestConfig(
        explorer_env=_explorer_env(env, args.explorer_env),
        db_path=args.db,
        usd_feed=None if feed == "none" else feed.lower(),
        rate_limit=args.rate_limit,
        trust_forwarded=args.trust_forwarded,
        cors_origins=tuple(args.cors_origin) if args.cors_origin else ("*",),
        stale_after=args.stale_after,
        address_prefix=args.prefix,
        chain_tip=electrum_tip(tuple(args.electrum)) if args.electrum else None,
    )


def _explorer_env(
    options: dict[str, object], path: Path | None
) -> Callable[[], Mapping[str, object]]:
    """The explorer's view of the other services: the options, under the JSON object in `path`
    (read again when it changes, so `ladle up` can write it once the services it names run)."""
    if path is None:
        return lambda: options
    seen: list[Any] = [None, options]  # (mtime_ns, merged)

    def env() -> Mapping[str, object]:
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return options
        if stamp != seen[0]:
            try:
                obj = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                return options
            seen[:] = [stamp, {**options, **obj} if isinstance(obj, dict) else options]
        merged: Mapping[str, object] = seen[1]
        return merged

    return env


def app_from_args(arg: tuple[argparse.Namespace, Path | None]) -> Starlette:
    """The app of one worker process (built there: the configuration holds callables), with
    the rate limit's bucket table every worker shares (None: no limit)."""
    args, rate_table = arg
    return create_app(replace(config_from_args(args), rate_table=rate_table))


def cmd_rest(args: argparse.Namespace) -> int:
    try:
        config_from_args(args)
    except (ValueError, OSError) as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_format, args.log_level.upper())
    set_nice(args.nice)  # before the workers start: they inherit it
    try:
        with shared_table() if args.rate_limit else contextlib.nullcontext() as rate_table:
            return serve_workers(
                app_from_args,
                (args, rate_table),
                host=args.host,
                port=args.port,
                workers=args.workers,
                name="REST",
                announce=lambda url: {"rest": url, "db": str(args.db), "workers": args.workers},
                log_format=args.log_format,
                log_level=args.log_level,
            )
    except OSError as exc:
        print(f"ladle: error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ladle rest", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return cmd_rest(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
