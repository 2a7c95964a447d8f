"""`ladle up`: the devnet and every ladle component, each its own process, under one supervisor.

This module only composes: it checks every option first (a bad one is exit status 2 before
anything starts), then runs the standalone commands as child processes (`runtime.supervise`):

    1. ladle devnet     the network and its history; writes the scenario's ledger
    2. ladle router     the indexer and the router in one process (the pool snapshot lives
                        where the router reads it), into the index database
       ladle rest       --workers N processes reading that database (SQLite WAL readers)
       ladle broadcast  in front of every devnet node

The data API and broadcast run at niceness `--http-nice` (default 10): a flood of HTTP requests
then takes only the CPU the router leaves idle, and swaps keep their latency
(`runtime.priority`, docs/benchmarks.md).

Each child announces its ready object on stdout; once every one is ready, `ladle up` prints
the children's lines for people, then exactly one machine-readable line

    LADLE_READY {"electrum": [...], "wallets": [...], "devnet": {...}, "indexer": {...},
                 "router": url, "router_fee": {...}, "rest": url, "broadcast": url}

and serves until SIGINT or SIGTERM, when it stops the children in reverse order and exits with
status 0. A child that dies is restarted with backoff on the same port (the devnet on the same
ports with the same history), so the announced addresses stay valid; the router resumes from
its index. What a component needs from another crosses as options and files: the devnet's
Electrum URLs and seed from its ready line, its feed and lending deployment from its ledger
file (`--devnet-ledger`), the explorer's view of the services from a file the data API reads
(`--explorer-env`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from broadcast.config import DEFAULT_PORT as BROADCAST_PORT
from broadcast.config import add_up_options
from devnet.cli import (
    HTTP_OFFSET,
    WS_OFFSET,
    LaunchConfig,
    add_devnet_options,
    address_prefix,
    launch_config_from_args,
    router_fee_wallet,
)
from devnet.service import PORT_STEP
from indexer.config_files import add_registry_arguments
from protocols.ledger import Ledger
from rest.config import DEFAULT_PORT as REST_PORT
from router.params import DEFAULT_PORT as ROUTER_PORT
from runtime.argv import options_argv
from runtime.logs import add_log_options, configure_logging
from runtime.priority import MAX_NICE, check_nice
from runtime.supervise import Child, ChildFailedError, Supervisor, ready_line
from runtime.usage import EXIT_FAILURE, EXIT_USAGE

Ready = Mapping[str, Any]

DEFAULT_HTTP_NICE = 10


def add_commands(subparsers: Any) -> None:
    """Register `ladle up` on the `ladle` command's subparsers."""
    parser = subparsers.add_parser(
        "up",
        help="start the devnet and every service, each its own process",
        description="Start the devnet (with a generated history) and every ladle component, "
        "each its own process restarted if it dies, print their URLs and one LADLE_READY "
        "line, serve until SIGINT/SIGTERM.",
    )
    add_arguments(parser)
    parser.set_defaults(func=cmd_up)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_devnet_options(parser)
    parser.add_argument(
        "--router-port",
        type=int,
        metavar="PORT",
        help=f"router WebSocket port (default {ROUTER_PORT}; 0 when --ports is 0)",
    )
    parser.add_argument(
        "--rest-port",
        type=int,
        metavar="PORT",
        help=f"data API port (default {REST_PORT}; 0 when --ports is 0)",
    )
    parser.add_argument(
        "--rest-workers",
        type=int,
        default=None,
        metavar="N",
        help="data API worker processes (default: the number of cores)",
    )
    parser.add_argument(
        "--http-nice",
        type=int,
        default=DEFAULT_HTTP_NICE,
        metavar="N",
        help=f"scheduling niceness of the data API workers and broadcast, 0 to {MAX_NICE} "
        f"(default {DEFAULT_HTTP_NICE}): the router and indexer, at 0, get the CPU first",
    )
    add_registry_arguments(parser)
    add_up_options(parser)
    add_log_options(parser)


def cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class UpConfig:
    """Every option of `ladle up`, checked; the devnet's are passed on as given."""

    devnet: LaunchConfig
    devnet_argv: tuple[str, ...]  # the devnet options given, less --ports and --ledger
    router_port: int
    rest_port: int
    broadcast_port: int
    rest_workers: int
    http_nice: int
    registry_argv: tuple[str, ...]  # --registry-source …, --no-registry-fetch
    ipfs_gateway: str | None
    broadcast_db: str
    log_argv: tuple[str, ...]

    @classmethod
    def from_args(cls, args: argparse.Namespace, log_format: str) -> UpConfig:
        """ValueError names a bad option."""
        devnet = launch_config_from_args(args)

        def port(value: int | None, default: int, flag: str) -> int:
            chosen = (0 if args.ports == 0 else default) if value is None else value
            if not 0 <= chosen <= 65535:
                raise ValueError(f"{flag} must be from 0 to 65535, got {chosen}")
            return int(chosen)

        workers = cores() if args.rest_workers is None else args.rest_workers
        if workers < 1:
            raise ValueError(f"--rest-workers must be at least 1, got {workers}")
        registry = [f"--registry-source={s.name}={s.location}" for s in args.registry_source or ()]
        if args.no_registry_fetch:
            registry.append("--no-registry-fetch")
        return cls(
            devnet=devnet,
            devnet_argv=tuple(options_argv(add_devnet_options, args, skip={"ports", "ledger"})),
            router_port=port(args.router_port, ROUTER_PORT, "--router-port"),
            rest_port=port(args.rest_port, REST_PORT, "--rest-port"),
            broadcast_port=port(args.broadcast_port, BROADCAST_PORT, "--broadcast-port"),
            rest_workers=workers,
            http_nice=check_nice(args.http_nice, "--http-nice"),
            registry_argv=tuple(registry),
            ipfs_gateway=args.ipfs_gateway,
            broadcast_db=args.broadcast_db or ":memory:",
            log_argv=("--log-format", log_format, "--log-level", args.log_level),
        )


class Plan:
    """The children of one `ladle up` and the files they share (in `workdir`)."""

    def __init__(self, config: UpConfig, workdir: Path) -> None:
        self.config = config
        self.db = str(workdir / "index.sqlite")
        self.ledger = Path(config.devnet.ledger or workdir / "ledger.json")
        self.explorer_env = workdir / "explorer.json"
        self.devnet_base = config.devnet.ports or free_base(config.devnet)
        self._ledger: Ledger | None = None

    def scenario_ledger(self) -> Ledger | None:
        """The ledger the devnet wrote (None: it runs without a scenario)."""
        if self._ledger is None and not self.config.devnet.no_scenario:
            self._ledger = Ledger.from_json(orjson.loads(self.ledger.read_bytes()))
        return self._ledger

    def stages(self) -> list[list[Child]]:
        return [
            [Child("devnet", self.devnet_argv, ("electrum", "wallets", "devnet", "bitcoind"))],
            [
                Child("router", self.router_argv, ("indexer", "router", "router_fee")),
                Child("rest", self.rest_argv, ("rest",)),
                Child("broadcast", self.broadcast_argv, ("broadcast",)),
            ],
        ]

    def devnet_argv(self, ready: Ready, first: Ready | None) -> list[str]:
        c = self.config
        argv = ["devnet", *c.devnet_argv, "--ports", str(self.devnet_base)]
        argv += ["--ledger", str(self.ledger), *c.log_argv]
        ledger = self.scenario_ledger() if first is not None else None
        if ledger is not None and c.devnet.start_time is None:
            argv += ["--start-time", str(ledger.chain.start_time)]  # the same history again
        return argv

    def router_argv(self, ready: Ready, first: Ready | None) -> list[str]:
        c = self.config
        devnet = ready["devnet"]
        argv = ["router", "--electrum", *(str(e["tcp"]) for e in ready["electrum"])]
        argv += ["--db", self.db, "--start-height", "0", "--no-progress", "--wait-registries"]
        argv += ["--host", c.devnet.host, "--port", str(_port(first, "router", c.router_port))]
        fee = router_fee_wallet(int(devnet["seed"]), _prefix(ready))
        argv += ["--fee-address", fee.token_address]
        if self.scenario_ledger() is not None:
            argv += ["--devnet-ledger", str(self.ledger)]
        argv += ["--ipfs-gateway", c.ipfs_gateway or str(devnet["ipfs_gateway"])]
        return [*argv, *c.registry_argv, *c.log_argv]

    def rest_argv(self, ready: Ready, first: Ready | None) -> list[str]:
        c = self.config
        argv = ["rest", "--db", self.db, "--workers", str(c.rest_workers)]
        argv += ["--nice", str(c.http_nice)]
        argv += ["--host", c.devnet.host, "--port", str(_port(first, "rest", c.rest_port))]
        argv += ["--electrum", *(str(e["tcp"]) for e in ready["electrum"])]
        argv += ["--explorer-env", str(self.explorer_env), "--network-label", "devnet"]
        ledger = self.scenario_ledger()
        if ledger is not None:  # the devnet's own BCH/USD feed behind the USD figures
            argv += ["--usd-feed", ledger.oracle.category]
        return [*argv, *c.log_argv]

    def broadcast_argv(self, ready: Ready, first: Ready | None) -> list[str]:
        c = self.config
        argv = ["broadcast", "--host", c.devnet.host, "--nice", str(c.http_nice)]
        argv += ["--port", str(_port(first, "broadcast", c.broadcast_port))]
        for entry in ready["electrum"]:
            argv += ["--node", str(entry["tcp"])]
        bitcoind = ready.get("bitcoind")
        if isinstance(bitcoind, dict):  # a real node: its own verdicts and dry runs
            argv += ["--bitcoind-rpc", str(bitcoind["rpc"])]
        argv += ["--db", c.broadcast_db]
        if c.devnet.no_verify:
            argv.append("--no-verify")
        return [*argv, *c.log_argv]

    def write_explorer_env(self, ready: Ready) -> None:
        """What the explorer pages need from the ready line (`rest --explorer-env`)."""
        electrum = ready.get("electrum") or [{}]
        indexer = ready.get("indexer") or {}
        ledger = self.scenario_ledger()
        usd = ledger.oracle.category if ledger is not None else None
        # The devnet's own BCH/USD feed first: it is the one with a month of updates.
        feeds = [usd] if usd else []
        feeds += [f for f in indexer.get("feeds") or [] if f != usd]
        env = {
            "network": "devnet",
            "oracle_feeds": feeds,
            "router": ready.get("router"),
            "broadcast": ready.get("broadcast"),
            "router_fee": ready.get("router_fee"),
            "electrum_ws": electrum[0].get("ws"),
            "wallets": ready.get("wallets") or [],
        }
        scratch = self.explorer_env.with_suffix(".tmp")
        scratch.write_bytes(orjson.dumps(env))
        scratch.replace(self.explorer_env)  # readers never see half a file

    def people_lines(self, supervisor: Supervisor) -> list[str]:
        ready = supervisor.ready
        extra: dict[str, Callable[[], list[str]]] = {
            "router": lambda: _fee_wif(ready),
            "rest": lambda: [
                f"rest: {ready['rest']}  (GET /tokenpool/…, /dex/…; docs at {ready['rest']}/docs;"
                f" {self.config.rest_workers} worker process(es))"
            ],
            "broadcast": lambda: [
                f"broadcast: {ready['broadcast']}  (POST /broadcast, GET /broadcast/status/"
                f"<txid>; fans out to {_broadcast_targets(ready)} node(s))"
            ],
        }
        lines: list[str] = []
        for name in supervisor.order():
            lines += supervisor.lines_of(name)
            if name in extra:
                lines += extra[name]()
        return lines


def _port(first: Ready | None, key: str, configured: int) -> int:
    """The port a child announced the first time (a restart keeps it), else the configured."""
    url = (first or {}).get(key)
    if isinstance(url, str):
        return int(url.rsplit(":", 1)[1].split("/", 1)[0])
    return configured


def _prefix(ready: Ready) -> str:
    """The devnet's CashAddr prefix: `bchreg` on a real regtest node."""
    return address_prefix("bitcoind" in ready)


def _broadcast_targets(ready: Ready) -> int:
    return len(ready["electrum"]) + ("bitcoind" in ready)


def _fee_wif(ready: Ready) -> list[str]:
    wallet = router_fee_wallet(int(ready["devnet"]["seed"]), _prefix(ready))
    return [f"  router fee wallet: WIF {wallet.key.to_wif()}"]


def free_base(devnet: LaunchConfig, attempts: int = 100) -> int:
    """A devnet base port whose ports (each node's TCP and WebSocket, the HTTP server) are all
    free now: fixed ports, so that a restarted devnet is where its clients left it. Chosen
    below the kernel's ephemeral range, where outgoing connections take theirs."""
    family = socket.AF_INET6 if ":" in devnet.host else socket.AF_INET
    for _ in range(attempts):
        base = random.randrange(20_000, 32_000 - PORT_STEP * devnet.nodes, PORT_STEP)
        ports = [base + HTTP_OFFSET]
        for k in range(devnet.nodes):
            ports += [base + PORT_STEP * k, base + PORT_STEP * k + WS_OFFSET]
        with contextlib.ExitStack() as stack:
            try:
                for port in ports:
                    sock = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
                    sock.bind((devnet.host, port))
            except OSError:
                continue
            return base
    raise OSError("no free ports for the devnet")


def cmd_up(args: argparse.Namespace) -> int:
    log_format = configure_logging(args.log_format, args.log_level.upper())
    try:
        config = UpConfig.from_args(args, log_format)
    except ValueError as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    workdir = Path(tempfile.mkdtemp(prefix="ladle-up-"))
    try:
        return asyncio.run(_serve(Plan(config, workdir)))
    except OSError as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


async def _serve(plan: Plan) -> int:
    supervisor = Supervisor(plan.stages())
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    startup = asyncio.create_task(supervisor.start())
    waiter = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({startup, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not startup.done():
            startup.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await startup
            return 0
        error = startup.exception()
        if error is not None:
            print(f"ladle: error: {error}", file=sys.stderr)
            usage = isinstance(error, ChildFailedError) and error.status == EXIT_USAGE
            return EXIT_USAGE if usage else EXIT_FAILURE
        ready = supervisor.ready
        plan.write_explorer_env(ready)
        for line in plan.people_lines(supervisor):
            print(line)
        print(ready_line(ready), flush=True)
        watching = asyncio.create_task(supervisor.watch())
        await waiter
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        return 0
    finally:
        waiter.cancel()
        await supervisor.stop()
        for sig in signals:
            loop.remove_signal_handler(sig)
