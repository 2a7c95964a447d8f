"""`ladle index`: run the indexer alone.

    ladle index [--electrum URL … | --bitcoind-rpc URL [--rpc-cookie FILE] [--zmq URL …]]
                [--db PATH] [--start-height H] [--insecure-tls]
                [--feeds FILE] [--lending FILE] [--devnet-ledger FILE]
                [--registry-source NAME=URL|PATH …] [--ipfs-gateway URL] [--no-registry-fetch]

Syncs from the Electrum servers (failover in the order given), or from a BCHN node's JSON-RPC
(whole blocks; ZMQ pushes when given), into the SQLite database, then follows new blocks and
the mempool until SIGINT/SIGTERM (exit status 0); once synced, a
background job fetches the token registries (BCMR) the authchains publish. Progress goes to
stderr: a status line on a terminal, JSON-lines logs otherwise. A bad option is one line on
stderr and exit status 2; a failure, 1. Also runnable as `python -m indexer.cli`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from indexer.config_files import (
    add_registry_arguments,
    load_devnet_ledger,
    load_feeds,
    load_lending,
)
from indexer.follow.chain import DEFAULT_BULK_DISTANCE
from indexer.follow.fetch import DEFAULT_WINDOW
from indexer.follow.follower import DEFAULT_MEMPOOL_INTERVAL
from indexer.registry_fetch import FetchConfig
from indexer.service import DEFAULT_DB, DEFAULT_ELECTRUM, IndexerConfig, run_indexer
from protocols.bcmr import DEFAULT_IPFS_GATEWAY
from protocols.lending.contracts import LendingConfig
from protocols.oracle import mainnet_feeds
from runtime.command import run_daemon
from runtime.logs import add_log_options, fields
from runtime.usage import EXIT_FAILURE

log = logging.getLogger("indexer")


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--electrum",
        action="extend",
        nargs="+",
        metavar="URL",
        help="Electrum server(s): tcp://, ssl:// or tls://, ws://, wss://host:port; several "
        "for failover, preferred first (default: the devnet, "
        f"{' '.join(DEFAULT_ELECTRUM)})",
    )
    node = parser.add_argument_group(
        "a BCHN node as the chain source (instead of --electrum)",
        "Blocks are read whole (getblock), the mempool listed (getrawmempool); -txindex on the "
        "node lets a late start height read outputs the index never saw.",
    )
    node.add_argument(
        "--bitcoind-rpc",
        metavar="URL",
        help="the node's JSON-RPC: http://user:password@host:port (or http://host:port with "
        "--rpc-cookie)",
    )
    node.add_argument(
        "--rpc-cookie", metavar="FILE", help="the node's cookie file (e.g. ~/.bitcoin/.cookie)"
    )
    node.add_argument(
        "--zmq",
        action="extend",
        nargs="+",
        metavar="URL",
        help="the node's ZMQ endpoint(s) publishing hashblock and rawtx (tcp://host:port): "
        "new blocks and transactions are seen at once instead of at the next poll",
    )
    parser.add_argument(
        "--db", default=DEFAULT_DB, metavar="PATH", help=f"SQLite database (default {DEFAULT_DB})"
    )
    parser.add_argument(
        "--start-height",
        type=int,
        metavar="H",
        help="first block of a fresh index (default: 792772, CashTokens activation, on "
        "mainnet; 0 on other chains). An index with blocks continues from its tip.",
    )
    parser.add_argument(
        "--insecure-tls",
        action="store_true",
        help="accept any TLS certificate (self-signed servers; data is still verified)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"blocks fetched ahead while one is applied (default {DEFAULT_WINDOW})",
    )
    parser.add_argument(
        "--bulk-distance",
        type=int,
        default=DEFAULT_BULK_DISTANCE,
        metavar="N",
        help="more than N blocks below the tip, the initial sync drops the secondary indexes "
        f"and builds them at the tip (default {DEFAULT_BULK_DISTANCE}; -1: never)",
    )
    parser.add_argument("--no-mempool", action="store_true", help="index confirmed blocks only")
    parser.add_argument(
        "--mempool-interval",
        type=float,
        default=DEFAULT_MEMPOOL_INTERVAL,
        metavar="SEC",
        help=f"seconds between mempool polls (default {DEFAULT_MEMPOOL_INTERVAL:g})",
    )
    parser.add_argument(
        "--exit-at-tip", action="store_true", help="exit once synced instead of following"
    )
    parser.add_argument("--no-progress", action="store_true", help="no sync progress reports")
    add_log_options(parser)
    g = parser.add_argument_group("protocols (default: the mainnet constants)")
    g.add_argument(
        "--feeds",
        metavar="FILE",
        help='oracle feeds to decode, JSON: [{"category": hex, "layout": "delphi"|"price9"|'
        '"legacy36", "name": "BCH/USD", "pubkeys": [hex]}] (replaces the mainnet Delphi feed)',
    )
    g.add_argument(
        "--lending",
        metavar="FILE",
        help='lending deployments to decode, JSON: [{"version": "v1"|"v11", "stablecoin": hex, '
        '"price_oracle": hex, "rate_oracle": hex, "agent_minter": hex, "loan_lockings": [hex], '
        '"bar_locking": hex, "pool_locking": hex, "patterns": [hex]}] (missing fields: mainnet; '
        "replaces the mainnet v1 deployment)",
    )
    g.add_argument(
        "--devnet-ledger",
        metavar="FILE",
        help="also decode the devnet's oracle feed and lending deployment, read from its "
        "ledger (ladle devnet --ledger FILE)",
    )
    add_registry_arguments(parser)


def add_commands(subparsers: Any) -> None:
    """Register `ladle index` on the `ladle` command's subparsers."""
    parser = subparsers.add_parser(
        "index",
        help="run the indexer: Electrum servers or a BCHN node → SQLite index",
        description="Sync the Cauldron index from Electrum servers (or a BCHN node) into "
        "SQLite, then follow new blocks and the mempool until SIGINT/SIGTERM.",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=cmd_index)


def config_from_args(args: argparse.Namespace) -> IndexerConfig:
    """The configuration the options describe; ValueError naming a bad one (or a bad file)."""
    feeds = load_feeds(args.feeds) if getattr(args, "feeds", None) else None
    lending = load_lending(args.lending) if getattr(args, "lending", None) else None
    if getattr(args, "devnet_ledger", None):
        devnet_feeds, devnet_lending = load_devnet_ledger(args.devnet_ledger)
        feeds = (*(mainnet_feeds().feeds if feeds is None else feeds), *devnet_feeds)
        lending = (*((LendingConfig(),) if lending is None else lending), *devnet_lending)
    fetch = FetchConfig(
        ipfs_gateway=getattr(args, "ipfs_gateway", None) or DEFAULT_IPFS_GATEWAY,
        offchain=tuple(getattr(args, "registry_source", None) or ()),
    )
    if args.electrum and args.bitcoind_rpc:
        raise ValueError("--electrum and --bitcoind-rpc are two chain sources: give one")
    return IndexerConfig(
        electrum=tuple(args.electrum) if args.electrum else DEFAULT_ELECTRUM,
        bitcoind=args.bitcoind_rpc,
        rpc_cookie=args.rpc_cookie,
        zmq=tuple(args.zmq or ()),
        db=args.db,
        start_height=args.start_height,
        insecure_tls=args.insecure_tls,
        window=args.window,
        bulk_distance=None if args.bulk_distance < 0 else args.bulk_distance,
        mempool=not args.no_mempool,
        mempool_interval=args.mempool_interval,
        exit_at_tip=args.exit_at_tip,
        progress=not args.no_progress,
        feeds=feeds,
        lending=lending,
        registry_fetch=not getattr(args, "no_registry_fetch", False),
        fetch=fetch,
    )


async def _serve(config: IndexerConfig) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(run_indexer(config))
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("stopped by a signal", extra=fields(event="stopped"))
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    return run_daemon(args, config_from_args, _serve, _index_failed)


def _index_failed(exc: Exception) -> int:
    log.exception("the indexer failed", exc_info=exc, extra=fields(event="failed"))
    return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ladle index", description=__doc__.splitlines()[0])
    add_index_arguments(parser)
    return cmd_index(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
