"""`ladle devnet`: run a local network, lay down a scenario's history, serve it.

`add_devnet_options` is shared with `ladle up` (which runs `ladle devnet` as its first child
process, with the same options); `launch` does the work and returns a `LaunchedDevnet` that
knows its endpoints and how to stop; `cmd_devnet` prints them and one `LADLE_READY
{"electrum", "wallets", "devnet"}` line, then serves until SIGINT/SIGTERM. The network and the
scenario generator load inside `launch` (about 0.2 s of imports), so that `ladle --help` and
`ladle tx decode` start fast.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from bch.wallet import Wallet
from devnet.bcmr_http import DocumentServer
from protocols.ledger import Ledger
from runtime.command import run_daemon, usage_error
from runtime.logs import add_log_options
from runtime.supervise import ready_line
from runtime.usage import EXIT_FAILURE
from verify.libauth import AsyncLibauthVerifier

if TYPE_CHECKING:
    from devnet.realnode.stack import RealNode
    from devnet.scenario.generator import ScenarioResult
    from devnet.service import Devnet

DEFAULT_PORT = 50001  # node 0's Electrum TCP port; WS = +2, HTTP = +4, node k adds 10·k
WS_OFFSET = 2
HTTP_OFFSET = 4
PREMINE = 110
PREMINE_SPACING = 600


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """The devnet's options (`add_devnet_options`; the fields are the options' names), checked
    on construction: ValueError names a bad one."""

    nodes: int = 1
    ports: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    no_verify: bool = False
    no_rostrum: bool = False
    delay: float = 0.0
    mine_every: float = 0.0
    preset: str = "default"
    no_scenario: bool = False
    no_lending: bool = False
    seed: int | None = None
    days: int | None = None
    block_interval: int | None = None
    pools: int | None = None
    tokens: int | None = None
    trades_per_day: int | None = None
    payments_per_day: int | None = None
    start_time: int | None = None
    verify_scenario: bool = False
    ledger: str | None = None
    bitcoind: str | None = None
    fulcrum: str | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError("--nodes must be at least 1")
        if self.fulcrum is not None and self.bitcoind is None:
            raise ValueError("--fulcrum needs --bitcoind (Fulcrum reads the devnet's bitcoind)")
        if self.bitcoind is not None and self.nodes != 1:
            raise ValueError("--bitcoind runs one node: drop --nodes")
        for option, binary in (("--bitcoind", self.bitcoind), ("--fulcrum", self.fulcrum)):
            if binary is not None and shutil.which(binary) is None:
                raise ValueError(f"{option}: no executable {binary!r} (a path, or a name on PATH)")
        if self.verify_scenario and self.no_verify:
            raise ValueError("--verify-scenario needs script verification: drop --no-verify")


def launch_config_from_args(args: argparse.Namespace) -> LaunchConfig:
    return LaunchConfig(**{f.name: getattr(args, f.name) for f in fields(LaunchConfig)})


def add_devnet_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("devnet")
    g.add_argument("--nodes", type=int, default=1, help="nodes in the network (default 1)")
    g.add_argument(
        "--ports",
        type=int,
        default=DEFAULT_PORT,
        metavar="BASE",
        help="node 0's Electrum TCP port; its WebSocket is BASE+2, the HTTP server BASE+4, "
        "node k adds 10·k; 0 picks free ports (default 50001)",
    )
    g.add_argument("--host", default="127.0.0.1", help="address to listen on (default loopback)")
    g.add_argument(
        "--no-verify",
        action="store_true",
        help="do not check broadcast transactions' scripts with libauth (no Node.js needed)",
    )
    g.add_argument("--no-rostrum", action="store_true", help="disable Rostrum's extensions")
    g.add_argument(
        "--bitcoind",
        metavar="PATH",
        help="run the devnet on a real regtest bitcoind (Bitcoin Cash Node) started from PATH in "
        "a temporary directory: every transaction and block goes through its RPC",
    )
    g.add_argument(
        "--fulcrum",
        metavar="PATH",
        help="with --bitcoind: serve Electrum with Fulcrum (PATH) in front of the node instead "
        "of the devnet's own server",
    )
    g.add_argument("--delay", type=float, default=0.0, help="propagation delay between nodes, s")
    g.add_argument(
        "--mine-every",
        type=float,
        default=0.0,
        metavar="SEC",
        help="after the history, mine a block every SEC real seconds (default 0: only on "
        "request, devnet.mine)",
    )
    s = parser.add_argument_group("scenario")
    s.add_argument(
        "--preset", choices=("small", "default", "large"), default="default", help="scenario size"
    )
    s.add_argument("--no-scenario", action="store_true", help="only the premined chain")
    s.add_argument(
        "--no-lending",
        action="store_true",
        help="no lending activity (loans, staking bar, liquidation pool) in the history",
    )
    s.add_argument("--seed", type=int, help="scenario seed (default 1)")
    s.add_argument("--days", type=int, help="days of history")
    s.add_argument("--block-interval", type=int, metavar="SEC", help="simulated block interval")
    s.add_argument("--pools", type=int, help="pools of the busiest token")
    s.add_argument("--tokens", type=int, help="fungible tokens (at least 6)")
    s.add_argument("--trades-per-day", type=int, help="trades per simulated day")
    s.add_argument(
        "--payments-per-day", type=int, help="plain payments between traders per simulated day"
    )
    s.add_argument(
        "--start-time",
        type=int,
        metavar="UNIX",
        help="when the history starts (default: so that it ends now, to the hour); give it to "
        "get the same chain byte for byte on every run",
    )
    s.add_argument(
        "--verify-scenario",
        action="store_true",
        help="check every generated transaction's scripts with libauth too (slower)",
    )
    s.add_argument("--ledger", metavar="PATH", help="write the scenario's ledger (JSON) here")


def router_fee_wallet(seed: int, prefix: str = "bitcoincash") -> Wallet:
    """Where `ladle up`'s router sends its fee: derived from the seed like the scenario's own
    wallets, so a client or test can find, and spend, the fees it was paid."""
    return Wallet.from_seed(f"ladle scenario {seed}/router-fee", prefix)


@dataclass(slots=True)
class LaunchedDevnet:
    devnet: Devnet
    http: DocumentServer
    scenario: ScenarioResult | None
    seed: int = 1  # the scenario seed (also with --no-scenario: it still names the wallets)
    real: RealNode | None = None  # --bitcoind: the node (and Fulcrum) the chain lives on
    notes: list[str] = field(default_factory=list)  # what a person should know (lines())

    @property
    def address_prefix(self) -> str:
        """The CashAddr prefix of the devnet's addresses: `bchreg` on a real regtest node."""
        return address_prefix(self.real is not None)

    @property
    def ledger(self) -> Ledger | None:
        return None if self.scenario is None else self.scenario.ledger

    @property
    def http_url(self) -> str:
        return self.http.url

    def electrum(self) -> list[dict[str, object]]:
        if self.real is not None and self.real.fulcrum is not None:
            return [self.real.fulcrum.electrum()]
        out: list[dict[str, object]] = []
        for server in self.devnet.servers:
            entry: dict[str, object] = {
                "node": server.node.index,
                "host": server.host,
                "tcp_port": server.tcp_port,
                "tcp": f"tcp://{server.host}:{server.tcp_port}",
            }
            if server.ws_port is not None:
                entry["ws_port"] = server.ws_port
                entry["ws"] = f"ws://{server.host}:{server.ws_port}"
            out.append(entry)
        return out

    def wallets(self) -> list[dict[str, object]]:
        if self.scenario is None:
            return []
        holdings = {h.name: h for h in self.scenario.holdings}
        out: list[dict[str, object]] = []
        for w in self.scenario.ledger.wallets:
            entry: dict[str, object] = {
                "name": w.name,
                "wif": w.wif,
                "address": w.address,
                "token_address": w.token_address,
                "pkh": w.pkh,
            }
            if w.name in holdings:
                entry["sats"] = holdings[w.name].sats
                entry["tokens"] = holdings[w.name].tokens
            out.append(entry)
        return out

    def ready(self) -> dict[str, object]:
        """The devnet's part of the ready line ("bitcoind" only on a real node)."""
        ready: dict[str, object] = {
            "electrum": self.electrum(),
            "wallets": self.wallets(),
            "devnet": self.info(),
        }
        if self.real is not None:
            ready["bitcoind"] = self.real.info()
        return ready

    def info(self) -> dict[str, object]:
        node = self.devnet.nodes[0]
        info: dict[str, object] = {
            "height": node.height,
            "tip": node.chain.tip.hash_hex,
            "http": self.http.url,
            "ipfs_gateway": f"{self.http.url}/ipfs/",
            "seed": self.seed,  # it names the wallets (and the router fee's) without a scenario too
        }
        if self.scenario is not None:
            info["ledger"] = f"{self.http.url}/ledger.json"
        return info

    def lines(self) -> list[str]:
        """What a person reads: endpoints, the history, the wallets to try things with."""
        node = self.devnet.nodes[0]
        out = [f"devnet: {len(self.devnet.nodes)} node(s), height {node.height}"]
        if self.real is not None:
            bitcoind = self.real.bitcoind
            out.append(f"  bitcoind {bitcoind.version} (regtest): RPC {bitcoind.rpc.url}")
        out += self.notes
        if self.scenario is not None:
            s = self.scenario
            out.append(
                f"  history: seed {s.ledger.params['seed']}, {s.ledger.params['days']} days, "
                f"{s.transactions} transactions, {s.blocks} blocks, {len(s.ledger.pools)} pools "
                f"({s.seconds:.1f} s)"
            )
        for e in self.electrum():
            ws = f"  {e['ws']}" if "ws" in e else ""
            label = f"electrum node {e['node']}"
            if self.real is not None and self.real.fulcrum is not None:
                label = f"electrum ({self.real.fulcrum.version})"
            out.append(f"  {label}: {e['tcp']}{ws}")
        out.append(f"  http: {self.http.url}  (registries, IPFS gateway /ipfs/, /ledger.json)")
        if self.scenario is not None:
            holdings = {h.name: h for h in self.scenario.holdings}
            for w in self.scenario.ledger.wallets:
                out.append(f"  {w.name}: WIF {w.wif}")
                out.append(f"    address {w.address}")
                out.append(f"    tokens  {w.token_address}")
                h = holdings.get(w.name)
                if h is not None:
                    held = ", ".join(f"{symbol} {amount}" for symbol, amount in h.tokens.items())
                    out.append(f"    holds   {h.sats / 1e8:.8f} BCH; base units: {held}")
        return out

    async def stop(self) -> None:
        try:
            await self.http.close()
            await self.devnet.stop()
        finally:
            if self.real is not None:
                await self.real.stop()


def address_prefix(real_node: bool) -> str:
    return "bchreg" if real_node else "bitcoincash"


def _history_start(config: LaunchConfig, days: int) -> int:
    if config.start_time is not None:
        return int(config.start_time)
    hour = int(time.time()) // 3600 * 3600
    return hour - days * 86_400


async def launch(config: LaunchConfig) -> LaunchedDevnet:
    """Start the network and the HTTP server, generate the scenario, publish its documents."""
    # Heavy (the network, the generator: ~0.2 s) and needed by `ladle devnet`/`ladle up` only.
    from devnet.realnode.stack import start_real_node
    from devnet.scenario.generator import ScenarioGenerator
    from devnet.scenario.lending import MIN_VM_YEAR as LENDING_VM_YEAR
    from devnet.scenario.lending import LendingExtension
    from devnet.scenario.params import PRESETS
    from devnet.scenario.registry import icons
    from devnet.service import Devnet, DevnetConfig

    base = config.ports
    http = DocumentServer(config.host, base + HTTP_OFFSET if base else 0)
    await http.start()
    params = PRESETS[config.preset].replace(
        seed=config.seed,
        days=config.days,
        block_interval=config.block_interval,
        pools=config.pools,
        tokens=config.tokens,
        trades_per_day=config.trades_per_day,
        payments_per_day=config.payments_per_day,
        verify=config.verify_scenario or None,
        http_base=http.url,
    )
    start = _history_start(config, params.days)
    network = DevnetConfig(
        nodes=config.nodes,
        host=config.host,
        tcp_base=base,
        ws_base=base + WS_OFFSET if base else 0,
        delay=config.delay,
        verify=not config.no_verify,
        rostrum=not config.no_rostrum,
        premine=PREMINE,
        block_spacing=PREMINE_SPACING,
        clock_start=start - PREMINE * PREMINE_SPACING,
        serve=config.fulcrum is None,
    )
    verifier = AsyncLibauthVerifier() if network.verify else None
    real = None
    notes: list[str] = []
    try:
        if config.bitcoind is not None:
            real = await start_real_node(config.bitcoind)
            network = dataclasses.replace(network, vm_year=real.vm_year)
        devnet = Devnet(network, verifier=verifier, backend=None if real is None else real.backend)
    except BaseException:
        await http.close()
        if real is not None:
            await real.stop()
        raise
    try:
        await devnet.start()
        result = None
        if not config.no_scenario:
            extensions: tuple[LendingExtension, ...] = ()
            if not config.no_lending and network.vm_year < LENDING_VM_YEAR:
                notes.append(
                    f"  lending: off (the node enforces the {network.vm_year} rules; the lending "
                    f"contracts need the {LENDING_VM_YEAR} upgrade's NFT commitments)"
                )
            elif not config.no_lending:
                extensions = (LendingExtension(),)
            generator = ScenarioGenerator(
                devnet,
                params,
                extensions=extensions,
                address_prefix=address_prefix(real is not None),
            )
            result = await generator.run()
            for path, body in result.documents.items():
                http.publish(path, body)
            for path, body in icons(result.documents).items():
                http.publish(path, body, "image/svg+xml")
            ledger = result.ledger.dumps(indent=True)
            http.publish("/ledger.json", ledger)
            if config.ledger:
                with open(config.ledger, "wb") as fh:
                    fh.write(ledger)
        if real is not None:
            real.backend.release_time()
            if config.fulcrum is not None:
                await real.serve_electrum(
                    config.fulcrum,
                    host=config.host,
                    tcp_port=base,
                    ws_port=base + WS_OFFSET if base else 0,
                )
        if config.mine_every > 0 and real is not None and real.fulcrum is not None:
            miner = Wallet(devnet.network.miner.key, address_prefix(True))
            real.start_mining(config.mine_every, miner.address)
        elif config.mine_every > 0:
            devnet.network.start_mining(config.mine_every, spacing=max(1, int(config.mine_every)))
    except BaseException:
        await http.close()
        await devnet.stop()
        if real is not None:
            await real.stop()
        raise
    return LaunchedDevnet(devnet, http, result, params.seed, real, notes)


async def serve_devnet(config: LaunchConfig) -> int:
    """Launch, print the endpoints and the ready line, serve until SIGINT/SIGTERM (exit 0)."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    starting = asyncio.create_task(launch(config))
    waiter = asyncio.create_task(stopping.wait())
    try:
        await asyncio.wait({starting, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return 0
        launched = starting.result()
        try:
            for line in launched.lines():
                print(line)
            print(ready_line(launched.ready()), flush=True)
            await waiter
        finally:
            await launched.stop()
        return 0
    finally:
        waiter.cancel()
        for sig in signals:
            loop.remove_signal_handler(sig)


def add_commands(subparsers: Any) -> None:
    """Register `ladle devnet` on the `ladle` command's subparsers."""
    parser = subparsers.add_parser(
        "devnet",
        help="run a local Bitcoin Cash network with a Cauldron history",
        description="Run a local network speaking the Electrum Cash protocol, generate a "
        "deterministic Cauldron history, print its endpoints and test wallets, then serve "
        "until SIGINT/SIGTERM. Prints the same LADLE_READY line as `ladle up`.",
    )
    add_devnet_options(parser)
    add_log_options(parser)
    parser.set_defaults(func=cmd_devnet)


def cmd_devnet(args: argparse.Namespace) -> int:
    return run_daemon(args, launch_config_from_args, serve_devnet, _devnet_failed)


def _devnet_failed(exc: Exception) -> int:
    if isinstance(exc, ValueError):  # an option's value the scenario refuses (e.g. --tokens 3)
        return usage_error(exc)
    if isinstance(exc, OSError):
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    raise exc
