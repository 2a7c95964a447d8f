"""The real node under a devnet: bitcoind (and Fulcrum in front when asked) in one temporary
directory, started and stopped together."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from devnet.realnode.backend import RealNodeBackend
from devnet.realnode.bitcoind import Bitcoind, vm_year
from devnet.realnode.fulcrum import Fulcrum


@dataclass
class RealNode:
    root: Path
    bitcoind: Bitcoind
    backend: RealNodeBackend
    fulcrum: Fulcrum | None = None
    _miner: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def vm_year(self) -> int:
        return vm_year(self.bitcoind.version)

    def info(self) -> dict[str, object]:
        """The ready line's "bitcoind" object (with "fulcrum" when Fulcrum runs)."""
        info = self.bitcoind.info()
        if self.fulcrum is not None:
            info["fulcrum"] = {
                "version": self.fulcrum.version,
                "datadir": str(self.fulcrum.datadir),
            }
        return info

    async def serve_electrum(self, binary: str, *, host: str, tcp_port: int, ws_port: int) -> None:
        """Start Fulcrum in front of the node and wait until it serves the node's tip and
        mempool (started once the history is on the node: one initial sync, no catching up)."""
        fulcrum = Fulcrum(binary, self.root / "fulcrum", host, tcp_port, ws_port)
        self.fulcrum = fulcrum
        rpc = self.bitcoind.rpc
        await fulcrum.start(rpc)
        height = int(rpc.call("getblockcount"))
        mempool = tuple(str(txid) for txid in rpc.call("getrawmempool"))
        await fulcrum.wait_synced(height, mempool)

    def start_mining(self, interval: float, address: str) -> None:
        """A block every `interval` seconds, mined by the node itself (`generatetoaddress`):
        with Fulcrum in front, transactions reach the node directly, and its miner takes them."""

        async def run() -> None:
            while True:
                await asyncio.sleep(interval)
                await asyncio.to_thread(self.bitcoind.rpc.call, "generatetoaddress", 1, address)

        self._miner = asyncio.create_task(run())

    async def stop(self) -> None:
        """Fulcrum first (it reads from the node), then the node; the directory goes."""
        if self._miner is not None:
            self._miner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._miner
        try:
            if self.fulcrum is not None:
                await self.fulcrum.stop()
        finally:
            try:
                await self.bitcoind.stop()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)


async def start_real_node(binary: str, *, host: str = "127.0.0.1") -> RealNode:
    """A fresh regtest bitcoind in a new temporary directory."""
    root = Path(tempfile.mkdtemp(prefix="ladle-devnet-"))
    node = Bitcoind(binary, root / "bitcoind", host)
    try:
        await node.start()
        backend = RealNodeBackend(node.rpc)
    except BaseException:
        await node.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    return RealNode(root, node, backend)
