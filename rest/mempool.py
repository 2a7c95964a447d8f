"""Pools at their latest state: the confirmed live pools with the indexer's mempool overlay
applied (`indexer.store.overlay`), so the pool listings agree with the router, which trades
against the same unconfirmed state.

The index watcher keeps the overlay's `revision` in memory (`MempoolOverlay.sync` at every poll
of the tip); listing answers put it in their cache key, so an unconfirmed trade changes their
ETag and cache entry as a block does. The overlay itself is read inside the answer's snapshot
and applied only if it was computed against that snapshot's tip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import aiosqlite

from indexer.store.overlay import overlay_state
from indexer.store.queries import PoolRow
from rest.db import IndexVersion


class MempoolOverlay:
    """The overlay's revision as of the last poll (0: none yet)."""

    def __init__(self) -> None:
        self.revision = 0

    async def sync(self, conn: aiosqlite.Connection, tip: IndexVersion) -> None:
        state = await overlay_state(conn)
        self.revision = 0 if state is None else state.revision


@dataclass(frozen=True, slots=True)
class Overlay:
    """Confirmed pool outpoints spent in the mempool, and the pools it created (still live),
    in arrival order."""

    spent: frozenset[tuple[str, int]] = frozenset()
    created: tuple[PoolRow, ...] = field(default=())

    def has_token(self, token: str) -> bool:
        return any(p.token_id == token for p in self.created)

    def apply(
        self, confirmed: Iterable[PoolRow], token: str | None = None, pkh: str | None = None
    ) -> list[PoolRow]:
        """`confirmed` (already filtered by token/pkh) at its latest state: spent pools left
        out, created ones matching the filters appended (after the confirmed ones)."""
        out = [p for p in confirmed if (p.txid, p.vout) not in self.spent]
        seen = {(p.txid, p.vout) for p in out}
        for p in self.created:
            wanted = (token is None or p.token_id == token) and (pkh is None or p.owner_pkh == pkh)
            if wanted and (p.txid, p.vout) not in seen:
                out.append(p)
        return out


EMPTY = Overlay()


async def read_overlay(conn: aiosqlite.Connection, tip: IndexVersion) -> Overlay:
    """The overlay, if it applies to `tip` (else, e.g. between a block's commit and the
    overlay's rewrite, none: the confirmed pools alone)."""
    state = await overlay_state(conn)
    if state is None or (state.height, state.hash) != (tip.height, tip.hash):
        return EMPTY
    rows = await conn.execute_fetchall(
        "SELECT txid, vout, kind, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens "
        "FROM mempool_pools ORDER BY seq, vout"
    )
    spent: set[tuple[str, int]] = set()
    created: list[PoolRow] = []
    for txid, vout, kind, ltxid, lvout, owner, category, sats, tokens in rows:
        if kind == "spent":
            spent.add((bytes(txid).hex(), int(vout)))
        else:
            created.append(
                PoolRow(
                    txid=bytes(txid).hex(),
                    vout=int(vout),
                    pool_id=f"{bytes(ltxid).hex()}:{lvout}",
                    owner_pkh=bytes(owner).hex(),
                    token_id=bytes(category).hex(),
                    sats=int(sats),
                    tokens=int(tokens),
                    height=tip.height + 1,  # the block that may mine it (not shown)
                    time=tip.max_time,
                )
            )
    return Overlay(frozenset(spent), tuple(created))
