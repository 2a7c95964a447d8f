"""A running devnet: the network of nodes and one Electrum server per node.

Ports: node k listens on `tcp_base + 10·k` (TCP) and `ws_base + 10·k` (WebSocket); a base of 0
lets the system pick free ports (tests), read back from `servers[k].tcp_port` / `.ws_port`.
"""

from __future__ import annotations

from dataclasses import dataclass

from devnet.backend import ChainBackend
from devnet.clock import DEFAULT_START, SimClock
from devnet.electrum.server import ElectrumServer
from devnet.network import MINER_SEED, Network
from devnet.node import Node
from runtime.lifecycle import Service
from verify.libauth import AsyncLibauthVerifier

PORT_STEP = 10


@dataclass(frozen=True, slots=True)
class DevnetConfig:
    nodes: int = 1
    host: str = "127.0.0.1"
    tcp_base: int = 50001
    ws_base: int | None = 50003  # None: no WebSocket listener
    delay: float = 0.0  # propagation delay between nodes, seconds
    verify: bool = True  # check scripts with libauth (fail closed when it is unavailable)
    rostrum: bool = True  # offer blockchain.block.get / mempool.get / mempool.count
    control: bool = True  # offer the devnet.* methods
    premine: int = 110  # blocks mined at start (100 mature the first coinbase)
    block_spacing: int = 600  # simulated seconds between premined blocks
    clock_start: int = DEFAULT_START
    clock_rate: float = 0.0
    miner_seed: str = MINER_SEED
    vm_year: int = 2026
    serve: bool = True  # listen for Electrum clients (off when Fulcrum is the front)


def _port(base: int | None, k: int) -> int | None:
    if base is None:
        return None
    return 0 if base == 0 else base + PORT_STEP * k


class Devnet(Service):
    def __init__(
        self,
        config: DevnetConfig | None = None,
        *,
        verifier: AsyncLibauthVerifier | None = None,
        backend: ChainBackend | None = None,
    ) -> None:
        self.config = config or DevnetConfig()
        c = self.config
        self.clock = SimClock(c.clock_start, rate=c.clock_rate)
        self.network = Network(
            c.nodes,
            clock=self.clock,
            delay=c.delay,
            verify=c.verify,
            verifier=verifier,
            miner_seed=c.miner_seed,
            vm_year=c.vm_year,
            backend=backend,
        )
        self.servers = [
            ElectrumServer(
                node,
                devnet=self,
                host=c.host,
                tcp_port=_port(c.tcp_base, k) or 0,
                ws_port=_port(c.ws_base, k),
                rostrum=c.rostrum,
                control=c.control,
            )
            for k, node in enumerate(self.network.nodes)
        ]

    @property
    def nodes(self) -> list[Node]:
        return self.network.nodes

    def server_for(self, node: Node) -> ElectrumServer:
        return self.servers[node.index]

    async def start(self) -> None:
        if self.config.premine and self.nodes[0].height == 0:
            self.nodes[0].mine(self.config.premine, spacing=self.config.block_spacing)
            await self.network.settle()
        if self.config.serve:
            for server in self.servers:
                await server.apply_faults()

    async def stop(self) -> None:
        for server in self.servers:
            await server.close()
        await self.network.close()

    close = stop  # what `async with` calls on the way out

    def endpoints(self) -> list[dict[str, object]]:
        return [
            {"node": s.node.index, "host": s.host, "tcp_port": s.tcp_port, "ws_port": s.ws_port}
            for s in self.servers
        ]
