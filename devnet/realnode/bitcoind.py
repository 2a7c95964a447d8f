"""A regtest bitcoind (Bitcoin Cash Node) that ladle starts in a temporary datadir.

Loopback only, free ports, a generated RPC password, `-txindex` (Fulcrum needs it) and
`-expire=0` (a BCHN build past its expiry date otherwise refuses to run). ZMQ notifications
(`hashblock`, `hashtx`) are published when the build has ZMQ, so Fulcrum hears of blocks and
transactions at once instead of polling.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from devnet.realnode.process import free_port, spawn, tail, terminate, wait_exit
from devnet.realnode.rpc import BitcoindRpc, RpcError

START_TIMEOUT = 60.0
RPC_USER = "ladle"


FIRST_2026_MAJOR = 29  # Bitcoin Cash Node's first release with the May 2026 upgrade's rules


def vm_year(subversion: str) -> int:
    """The VM rules a BCHN build enforces, from its subversion ("Bitcoin Cash Node:28.0.1(…)"):
    2026 from v29 on, else 2025 (NFT commitments of at most 40 bytes, no loops or functions)."""
    version = subversion.rpartition(":")[2].split("(")[0]
    major = version.split(".")[0]
    return 2026 if major.isdigit() and int(major) >= FIRST_2026_MAJOR else 2025


class NodeStartError(RuntimeError):
    """A node or server did not start; the message ends with the last lines of its log."""


def has_option(binary: str, option: str) -> bool:
    """Whether `binary -help` lists `option` (a build without ZMQ refuses the ZMQ options)."""
    try:
        listing = subprocess.run(
            [binary, "-help"], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in listing


@dataclass
class Bitcoind:
    binary: str
    datadir: Path
    host: str = "127.0.0.1"
    rpc_port: int = 0
    p2p_port: int = 0
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    zmq: dict[str, str] = field(default_factory=dict)  # notification -> endpoint
    version: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def rpc(self) -> BitcoindRpc:
        return BitcoindRpc(self.host, self.rpc_port, RPC_USER, self.password)

    @property
    def log(self) -> Path:
        return self.datadir / "regtest" / "debug.log"

    def arguments(self) -> list[str]:
        args = [
            self.binary,
            "-regtest",
            f"-datadir={self.datadir}",
            "-server=1",
            "-listen=1",
            f"-bind={self.host}:{self.p2p_port}",
            f"-port={self.p2p_port}",
            f"-rpcbind={self.host}",
            f"-rpcallowip={self.host}",
            f"-rpcport={self.rpc_port}",
            f"-rpcuser={RPC_USER}",
            f"-rpcpassword={self.password}",
            "-expire=0",
            "-txindex=1",
            "-dnsseed=0",
            "-discover=0",
            "-upnp=0",
            "-printtoconsole=0",
        ]
        args += [f"-zmqpub{topic}={endpoint}" for topic, endpoint in self.zmq.items()]
        return args

    async def start(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        self.rpc_port = self.rpc_port or free_port(self.host)
        self.p2p_port = self.p2p_port or free_port(self.host)
        if await asyncio.to_thread(has_option, self.binary, "-zmqpubhashblock"):
            for topic in ("hashblock", "hashtx"):
                self.zmq[topic] = f"tcp://{self.host}:{free_port(self.host)}"
        self.process = spawn(self.arguments(), self.datadir / "stdout.log")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise NodeStartError(
                    f"bitcoind exited with status {self.process.returncode}:\n"
                    f"{tail(self.datadir / 'stdout.log')}\n{tail(self.log)}"
                )
            try:
                info = await asyncio.to_thread(self.rpc.call, "getnetworkinfo")
            except (OSError, RpcError):
                if loop.time() > deadline:
                    await self.stop()
                    raise NodeStartError(
                        f"bitcoind did not answer RPC:\n{tail(self.log)}"
                    ) from None
                await asyncio.sleep(0.1)
                continue
            self.version = str(info["subversion"]).strip("/")
            return

    def info(self) -> dict[str, object]:
        """The ready line's "bitcoind" entry."""
        return {
            "rpc": self.rpc.url,
            "host": self.host,
            "rpc_port": self.rpc_port,
            "user": RPC_USER,
            "password": self.password,
            "p2p_port": self.p2p_port,
            "zmq": dict(self.zmq),
            "datadir": str(self.datadir),
            "version": self.version,
            "vm": vm_year(self.version),
        }

    async def stop(self) -> None:
        """`stop` over RPC (a clean shutdown), SIGTERM if that fails, SIGKILL after a timeout."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            await asyncio.to_thread(self.rpc.call, "stop")
        except (OSError, RpcError):
            await terminate(self.process)
            return
        await wait_exit(self.process)
