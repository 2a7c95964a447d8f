"""The chain tip the data API compares its index with, from Electrum servers: `/health` then
reports the lag in blocks, and "synced" needs no guess from the age of the index tip."""

from __future__ import annotations

from indexer.electrum import ElectrumClient
from rest.config import ChainTipSource


def electrum_tip(servers: tuple[str, ...]) -> ChainTipSource:
    """Asks the servers (failover in order) for their tip; one client per process, opened on
    the first call (inside the worker's event loop)."""
    clients: list[ElectrumClient] = []

    async def height() -> int | None:
        if not clients:
            clients.append(ElectrumClient(servers, client_name="ladle-rest"))
        tip, _ = await clients[0].get_tip()
        return tip

    return height
