"""Real BCHN and Fulcrum processes for the real-node tier (this module holds no tests).

The binaries are found by `LADLE_BITCOIND` / `LADLE_FULCRUM` (a path, or a name on PATH), else
as `bitcoind` / `Fulcrum` on PATH. Both run on loopback, on free ports, in a temporary
directory that is removed afterwards: the tier must never touch a user's node or the network.
BCHN is started with `-expire=0` because a build past its expiry date otherwise disables RPC.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bch.wallet import Wallet
from devnet.realnode.process import free_port
from devnet.realnode.rpc import BitcoindRpc, RpcError

RPC_USER = "ladle"
RPC_PASSWORD = "realnode"  # loopback only, a throwaway datadir
MINER = Wallet.from_seed("ladle real-node tier miner", prefix="bchreg")
START_TIMEOUT = 60.0
SYNC_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Binaries:
    bitcoind: str
    fulcrum: str


def _resolve(env: str, name: str) -> str | None:
    wanted = os.environ.get(env) or name
    if os.sep in wanted:
        return wanted if os.access(wanted, os.X_OK) else None
    return shutil.which(wanted)


def find_binaries() -> tuple[Binaries | None, str]:
    """The binaries, or None and a plain reason naming what is missing and where it looked."""
    bitcoind = _resolve("LADLE_BITCOIND", "bitcoind")
    fulcrum = _resolve("LADLE_FULCRUM", "Fulcrum")
    missing = [
        f"{what} ({env}={os.environ[env]!r})" if os.environ.get(env) else f"{what} (not on PATH)"
        for what, env, found in (
            ("bitcoind", "LADLE_BITCOIND", bitcoind),
            ("Fulcrum", "LADLE_FULCRUM", fulcrum),
        )
        if found is None
    ]
    if bitcoind is None or fulcrum is None:
        return None, ", ".join(missing) + "; set LADLE_BITCOIND/LADLE_FULCRUM or PATH"
    return Binaries(bitcoind, fulcrum), ""


@dataclass
class Bitcoind:
    """A regtest BCHN on loopback; `rpc` speaks its JSON-RPC over HTTP."""

    binary: str
    datadir: Path
    rpc_port: int = field(default_factory=free_port)
    p2p_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    version: str = ""
    zmq_port: int | None = None  # hashblock and rawtx pushes, when the build has ZMQ
    cookie: bool = False  # log in with the cookie file the node writes, not RPC_USER

    def start(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        # Fulcrum hears of new blocks at once over ZMQ (else it polls), as deployed; a build
        # without ZMQ would refuse the option, so it is only given when the build lists it.
        options = subprocess.run(
            [self.binary, "-help"], capture_output=True, text=True, check=False
        ).stdout
        if "-zmqpubhashblock" in options:
            self.zmq_port = free_port()
        args = [
            self.binary,
            "-regtest",
            f"-datadir={self.datadir}",
            "-server=1",
            "-listen=1",
            f"-bind=127.0.0.1:{self.p2p_port}",
            f"-port={self.p2p_port}",
            "-rpcbind=127.0.0.1",
            "-rpcallowip=127.0.0.1",
            f"-rpcport={self.rpc_port}",
            *(() if self.cookie else (f"-rpcuser={RPC_USER}", f"-rpcpassword={RPC_PASSWORD}")),
            "-expire=0",
            "-dnsseed=0",
            "-discover=0",
            "-upnp=0",
            "-printtoconsole=0",
            "-txindex=1",
        ]
        if self.zmq_port is not None:
            args.append(f"-zmqpubhashblock=tcp://127.0.0.1:{self.zmq_port}")
            args.append(f"-zmqpubrawtx=tcp://127.0.0.1:{self.zmq_port}")
        log = (self.datadir / "stdout.log").open("wb")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"bitcoind exited with {self.process.returncode}: {self.log()}")
            try:
                info = self.rpc("getnetworkinfo")
                self.version = str(info["subversion"]).strip("/")
                return
            except (OSError, RpcError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def log(self, lines: int = 20) -> str:
        path = self.datadir / "regtest" / "debug.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def rpc(self, method: str, *params: Any) -> Any:
        return self.client().call(method, *params)

    def rpc_batch(self, calls: list[tuple[str, list[Any]]]) -> list[Any]:
        """Each call's result, in order, from one JSON-RPC batch; RpcError on the first error."""
        return self.client(timeout=120.0).batch(calls)

    def client(self, timeout: float = 60.0) -> BitcoindRpc:
        """The node's JSON-RPC, logged in as it is now (a cookie changes at every start)."""
        login = self.cookie_file.read_text() if self.cookie else f"{RPC_USER}:{RPC_PASSWORD}"
        user, _, password = login.strip().partition(":")
        return BitcoindRpc("127.0.0.1", self.rpc_port, user, password, timeout)

    @property
    def cookie_file(self) -> Path:
        return self.datadir / "regtest" / ".cookie"

    @property
    def rpc_url(self) -> str:
        """The node's JSON-RPC as `ladle index --bitcoind-rpc` takes it (with `--rpc-cookie
        cookie_file` for a node that logs in by cookie)."""
        if self.cookie:
            return f"http://127.0.0.1:{self.rpc_port}"
        return f"http://{RPC_USER}:{RPC_PASSWORD}@127.0.0.1:{self.rpc_port}"

    @property
    def zmq_url(self) -> str | None:
        """Where the node publishes `hashblock` and `rawtx` (None: a build without ZMQ)."""
        return None if self.zmq_port is None else f"tcp://127.0.0.1:{self.zmq_port}"

    def mine(self, blocks: int, address: str = MINER.address) -> list[str]:
        hashes: list[str] = self.rpc("generatetoaddress", blocks, address)
        return hashes

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(OSError, RpcError):
            self.rpc("stop")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Fulcrum:
    """Fulcrum in front of `node`, serving plain TCP on a loopback port."""

    binary: str
    node: Bitcoind
    datadir: Path
    tcp_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    version: str = ""

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.tcp_port}"

    def start(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        conf = self.datadir / "fulcrum.conf"
        conf.write_text(
            "\n".join(
                [
                    f"datadir = {self.datadir / 'db'}",
                    f"bitcoind = 127.0.0.1:{self.node.rpc_port}",
                    f"rpcuser = {RPC_USER}",
                    f"rpcpassword = {RPC_PASSWORD}",
                    f"tcp = 127.0.0.1:{self.tcp_port}",
                    "peering = false",
                    "announce = false",
                    "",
                ]
            )
        )
        log = (self.datadir / "fulcrum.log").open("wb")
        self.process = subprocess.Popen(
            [self.binary, str(conf)], stdout=log, stderr=subprocess.STDOUT
        )

    def log(self, lines: int = 20) -> str:
        text = (self.datadir / "fulcrum.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def call(self, method: str, *params: Any, timeout: float = 10.0) -> dict[str, Any]:
        """One request on a fresh connection: the whole response object (result or error)."""
        with socket.create_connection(("127.0.0.1", self.tcp_port), timeout=timeout) as sock:
            message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
            sock.sendall(orjson.dumps(message) + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
        reply: dict[str, Any] = orjson.loads(buf)
        return reply

    def wait_synced(self, timeout: float = SYNC_TIMEOUT) -> int:
        """Wait until Fulcrum's tip is the node's; the height."""
        want = int(self.node.rpc("getblockcount"))
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"Fulcrum exited with {self.process.returncode}: {self.log()}")
            try:
                if not self.version:
                    answer = self.call("server.version", "ladle-tests", "1.5")
                    self.version = str(answer["result"][0])
                tip = self.call("blockchain.headers.get_tip").get("result")
                if isinstance(tip, dict) and tip.get("height") == want:
                    return want
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Fulcrum did not reach height {want}: {self.log()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class RealNodes:
    """A regtest BCHN with Fulcrum in front, for one test session."""

    bitcoind: Bitcoind
    fulcrum: Fulcrum

    @property
    def electrum_url(self) -> str:
        return self.fulcrum.url

    def mine(self, blocks: int, address: str = MINER.address) -> list[str]:
        """Mine `blocks` and wait until Fulcrum serves them."""
        hashes = self.bitcoind.mine(blocks, address)
        self.fulcrum.wait_synced()
        return hashes

    @property
    def versions(self) -> str:
        """'BCHN v28.0.1 / Fulcrum 2.1.1', from what the servers report."""
        bchn = self.bitcoind.version.split(":")[-1].split("(")[0]
        fulcrum = self.fulcrum.version.removeprefix("Fulcrum").strip()
        return f"BCHN v{bchn} / Fulcrum {fulcrum}"


@contextlib.contextmanager
def real_nodes(binaries: Binaries, *, blocks: int = 110) -> Iterator[RealNodes]:
    """bitcoind with `blocks` mined to `MINER` (the first coinbases are mature), and a synced
    Fulcrum; both stopped and their directory removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="ladle-realnode-"))
    node = Bitcoind(binaries.bitcoind, root / "bchn")
    server = Fulcrum(binaries.fulcrum, node, root / "fulcrum")
    try:
        node.start()
        if blocks:
            node.mine(blocks)
        server.start()
        server.wait_synced()
        yield RealNodes(node, server)
    finally:
        try:
            server.stop()
        finally:
            node.stop()
            shutil.rmtree(root, ignore_errors=True)
