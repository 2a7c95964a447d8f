"""Fulcrum in front of the devnet's bitcoind: a config file in the temporary directory, plain TCP
and WebSocket listeners on loopback, no peering."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from devnet.realnode.bitcoind import NodeStartError
from devnet.realnode.process import free_port, spawn, tail, terminate
from devnet.realnode.rpc import BitcoindRpc

SYNC_TIMEOUT = 120.0
CALL_TIMEOUT = 10.0


@dataclass
class Fulcrum:
    binary: str
    datadir: Path
    host: str = "127.0.0.1"
    tcp_port: int = 0
    ws_port: int = 0
    version: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.datadir / "fulcrum.log"

    def config(self, node: BitcoindRpc) -> str:
        return "\n".join(
            [
                f"datadir = {self.datadir / 'db'}",
                f"bitcoind = {node.host}:{node.port}",
                f"rpcuser = {node.user}",
                f"rpcpassword = {node.password}",
                f"tcp = {self.host}:{self.tcp_port}",
                f"ws = {self.host}:{self.ws_port}",
                "peering = false",
                "announce = false",
                "",
            ]
        )

    async def start(self, node: BitcoindRpc) -> None:
        """Start Fulcrum; it syncs in the background (`wait_synced`)."""
        self.datadir.mkdir(parents=True, exist_ok=True)
        self.tcp_port = self.tcp_port or free_port(self.host)
        self.ws_port = self.ws_port or free_port(self.host)
        conf = self.datadir / "fulcrum.conf"
        conf.write_text(self.config(node))
        self.process = spawn([self.binary, str(conf)], self.log)

    async def call(self, method: str, *params: Any) -> Any:
        """One request on a fresh connection: its result (None when it answered an error)."""
        async with asyncio.timeout(CALL_TIMEOUT):
            reader, writer = await asyncio.open_connection(self.host, self.tcp_port)
        try:
            message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
            writer.write(orjson.dumps(message) + b"\n")
            async with asyncio.timeout(CALL_TIMEOUT):
                line = await reader.readline()
        finally:
            writer.close()
        return orjson.loads(line).get("result")

    async def wait_synced(
        self, height: int, txids: tuple[str, ...] = (), timeout: float = SYNC_TIMEOUT
    ) -> None:
        """Until Fulcrum serves the tip at `height` and knows every one of `txids` (the
        mempool's, which it reads after the blocks)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pending = list(txids)
        while True:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise NodeStartError(f"Fulcrum exited with status {code}:\n{tail(self.log)}")
            try:
                if not self.version:
                    self.version = str((await self.call("server.version", "ladle", "1.5"))[0])
                tip = await self.call("blockchain.headers.get_tip")
                if isinstance(tip, dict) and tip.get("height") == height:
                    while pending and await self.call("blockchain.transaction.get", pending[0]):
                        pending.pop(0)
                    if not pending:
                        return
            except (TimeoutError, OSError, ValueError, TypeError, IndexError):
                pass
            if loop.time() > deadline:
                raise NodeStartError(f"Fulcrum did not reach height {height}:\n{tail(self.log)}")
            await asyncio.sleep(0.1)

    def electrum(self) -> dict[str, object]:
        """An entry of the ready line's "electrum" list, as the embedded servers announce."""
        return {
            "node": 0,
            "host": self.host,
            "tcp_port": self.tcp_port,
            "tcp": f"tcp://{self.host}:{self.tcp_port}",
            "ws_port": self.ws_port,
            "ws": f"ws://{self.host}:{self.ws_port}",
        }

    async def stop(self) -> None:
        if self.process is not None:
            await terminate(self.process)
