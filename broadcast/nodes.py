"""One configured node as the broadcaster sees it: its own Electrum client, weight and timeout.

Each node gets a client of its own (no failover: the point is to reach *this* node), which
never retries a broadcast itself and gives up at once on a node that refuses connections, so a
down node costs a refused connect, not a wait. Every call is bounded by the node's timeout,
connecting included.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from broadcast.config import NodeConfig
from broadcast.verdicts import (
    ACCEPTED,
    UNKNOWN,
    Verdict,
    classify_error,
)
from indexer.electrum import Backoff, ElectrumClient, ElectrumClientError, ElectrumError
from indexer.electrum.health import MAX_RECONNECT_DELAY

CLIENT_NAME = "ladle-broadcast"
T = TypeVar("T")


class NodeUnavailable(Exception):  # noqa: N818 (a state of the node, reported to callers)
    """The node could not answer (unreachable, timed out, or answered nonsense)."""


class NodeLink:
    def __init__(self, config: NodeConfig, *, reconnect_backoff: float = 0.5) -> None:
        self.config = config
        self.name = config.name
        self.weight = config.weight
        self.timeout = config.timeout
        self.client = ElectrumClient(
            [config.url],
            client_name=CLIENT_NAME,
            timeout=config.timeout,
            connect_timeout=config.timeout,
            retries=0,
            give_up_after=0.0,
            extensions=False,
            backoff=Backoff(
                base=reconnect_backoff, cap=max(reconnect_backoff, MAX_RECONNECT_DELAY)
            ),
        )

    def __repr__(self) -> str:
        return f"<NodeLink {self.name} weight={self.weight:g} timeout={self.timeout:g}s>"

    async def close(self) -> None:
        await self.client.close()

    async def connect(self) -> bool:
        """Open the connection ahead of the first broadcast; False if the node is unreachable
        (the broadcast will say so)."""
        try:
            await self.call(self.client.connection())
        except NodeUnavailable:
            return False
        return True

    async def send(self, raw_hex: str, txid: str) -> Verdict:
        """Broadcast and classify the answer; never raises for anything the node does."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                answer = await self.client.broadcast(raw_hex)
        except ElectrumError as exc:
            return Verdict.of(
                self.name, classify_error(exc.code, exc.message), exc.message, self._since(started)
            )
        except TimeoutError:
            message = f"no answer within {self.timeout:g}s"
            return Verdict.of(self.name, UNKNOWN, message, self._since(started))
        except (ElectrumClientError, OSError) as exc:
            return Verdict.of(self.name, UNKNOWN, f"unreachable: {exc}", self._since(started))
        if answer != txid:
            message = f"the node answered txid {answer}, not {txid}"
            return Verdict.of(self.name, UNKNOWN, message, self._since(started))
        return Verdict.of(self.name, ACCEPTED, "", self._since(started))

    async def call(self, call: Awaitable[T]) -> T:
        """Await one client call under the node's timeout; NodeUnavailable if it fails (a
        server error included: callers that expect one use `batch`, which returns them)."""
        try:
            async with asyncio.timeout(self.timeout):
                return await call
        except TimeoutError:
            raise NodeUnavailable(f"{self.name}: no answer within {self.timeout:g}s") from None
        except (ElectrumClientError, OSError) as exc:
            raise NodeUnavailable(f"{self.name}: {exc}") from None

    async def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        """Each call's result or its ElectrumError, in order (one round trip)."""
        if not calls:
            return []
        return await self.call(self.client.batch(calls))

    async def transaction_height(self, txid: str) -> int | None:
        """> 0 confirmed at that height, 0 (or -1) in the mempool, None unknown to the node."""
        return await self.call(self.client.transaction_height(txid))

    async def tip(self) -> tuple[int, bytes]:
        """(height, 80-byte header) of the node's best chain."""
        return await self.call(self.client.get_tip())

    @staticmethod
    def _since(started: float) -> float:
        return time.monotonic() - started
