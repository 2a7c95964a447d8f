"""Several nodes: separate mempools and chains, relay with a configurable delay, partitions.

Nodes form a full mesh. A relayed transaction or an announced block reaches each reachable peer
after `delay` seconds (immediately, inside the same call, when the delay is 0 — which keeps
scenario generation deterministic). On delivery a peer adopts the announcer's chain when it is
longer (possibly reorganising), so partitions that heal converge on the longest chain.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
from collections.abc import Callable, Sequence

from bch.tx import Transaction
from bch.wallet import Wallet
from devnet.backend import ChainBackend, EmbeddedBackend
from devnet.blocks import BlockRecord
from devnet.clock import SimClock
from devnet.faucet import build_payment
from devnet.node import Node
from verify.libauth import AsyncLibauthVerifier

MINER_SEED = "ladle devnet miner"

Action = Callable[[], object]


class Network:
    def __init__(
        self,
        n_nodes: int = 1,
        *,
        clock: SimClock | None = None,
        delay: float = 0.0,
        verify: bool = False,
        verifier: AsyncLibauthVerifier | None = None,
        miner_seed: str = MINER_SEED,
        vm_year: int = 2026,
        backend: ChainBackend | None = None,
    ) -> None:
        if n_nodes < 1:
            raise ValueError("a network needs at least one node")
        self.clock = clock or SimClock()
        self.delay = delay
        self.miner = Wallet.from_seed(miner_seed)
        if verify and verifier is None:
            verifier = AsyncLibauthVerifier()
        self.verifier = verifier
        backend = backend or EmbeddedBackend()
        self.nodes = [
            Node(
                i,
                self.clock,
                self.miner.locking_bytecode,
                verifier=verifier,
                verify=verify,
                vm_year=vm_year,
                genesis=backend.genesis,
                backend=backend,
            )
            for i in range(n_nodes)
        ]
        for node in self.nodes:
            node.network = self
        self._queue: list[tuple[float, int, Action]] = []
        self._seq = itertools.count()
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._miner_task: asyncio.Task[None] | None = None
        self._faucet_lock: asyncio.Lock | None = None

    @property
    def genesis(self) -> BlockRecord:
        return self.nodes[0].chain.blocks[0]

    def peers(self, node: Node) -> list[Node]:
        """The nodes `node` can currently exchange messages with."""
        if node.faults.partitioned:
            return []
        return [p for p in self.nodes if p is not node and not p.faults.partitioned]

    # --- propagation ------------------------------------------------------------------------

    def relay_tx(self, origin: Node, tx: Transaction) -> None:
        for peer in self.peers(origin):
            self._deliver(origin, peer, functools.partial(peer.accept_relayed, tx))

    def announce_block(self, origin: Node) -> None:
        for peer in self.peers(origin):
            self._deliver(origin, peer, functools.partial(self.sync, peer, origin))

    def sync(self, node: Node, source: Node) -> bool:
        """Adopt `source`'s chain if it is longer (first seen wins at equal height)."""
        if source.chain.height <= node.chain.height:
            return False
        ours, theirs = node.chain.blocks, source.chain.blocks
        fork = min(len(ours), len(theirs)) - 1
        while ours[fork].hash != theirs[fork].hash:
            fork -= 1
        branch = theirs[fork + 1 :]
        if fork == node.chain.height:
            for block in branch:
                node.connect_block(block)
        else:
            node.switch_to(branch)
        return True

    def heal(self, node: Node) -> None:
        """`node` rejoined: everyone reachable converges on the longest chain, then the
        mempools are exchanged (each side keeps its first-seen transaction on a conflict)."""
        group = [node, *self.peers(node)]
        best = max(group, key=lambda n: n.chain.height)
        for other in group:
            if other is not best:
                self.sync(other, best)
        for source in group:
            for entry in list(source.mempool.entries.values()):
                for other in group:
                    if other is not source:
                        other.accept_relayed(entry.tx)

    def _deliver(self, origin: Node, peer: Node, action: Action) -> None:
        def guarded() -> None:
            if not origin.faults.partitioned and not peer.faults.partitioned:
                action()

        if self.delay <= 0:
            guarded()
            return
        loop = asyncio.get_running_loop()
        heapq.heappush(self._queue, (loop.time() + self.delay, next(self._seq), guarded))
        if self._worker is None or self._worker.done():
            self._wakeup = asyncio.Event()
            self._worker = asyncio.create_task(self._run_deliveries())
        elif self._wakeup is not None:
            self._wakeup.set()

    async def _run_deliveries(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            due, _, action = self._queue[0]
            wait = due - loop.time()
            if wait > 0:
                assert self._wakeup is not None
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wakeup.wait()
                continue
            heapq.heappop(self._queue)
            action()

    async def settle(self) -> None:
        """Wait until every scheduled delivery has happened."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    # --- conveniences a scenario uses -------------------------------------------------------

    async def faucet(self, node: Node, locking: bytes, amount: int) -> str:
        """Pay `amount` sats from the miner's coins to `locking`; return the txid."""
        if self._faucet_lock is None:
            self._faucet_lock = asyncio.Lock()
        async with self._faucet_lock:
            tx = build_payment(node, self.miner, locking, amount)
            return await node.submit(tx)

    def reorg(self, node: Node, depth: int, txs: Sequence[Transaction] = ()) -> list[BlockRecord]:
        return node.reorg(depth, txs)

    def start_mining(self, interval: float, *, node: int = 0, spacing: int = 600) -> None:
        """Mine a block every `interval` real seconds, advancing the clock by `spacing`."""
        self.stop_mining()

        async def run() -> None:
            while True:
                await asyncio.sleep(interval)
                self.nodes[node].mine(1, spacing=spacing)

        self._miner_task = asyncio.create_task(run())

    def stop_mining(self) -> None:
        if self._miner_task is not None:
            self._miner_task.cancel()
            self._miner_task = None

    async def close(self) -> None:
        self.stop_mining()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        if self.verifier is not None:
            await self.verifier.close()
