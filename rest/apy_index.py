"""The APY of docs/api.md computed from the index.

A window [start, end] covers the blocks h0 < height <= h1 with h0 = height_at(start) and
h1 = height_at(end) ("as of" a time is as of the highest block whose running max header time
is <= it); a block's changes take effect at its running max time. Per token, the exposure is
the integral of the token's value locked (`cauldron_tvl`: one row per block that changed it);
per owner, the owner's events are replayed (the value locked is not kept per owner).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

import aiosqlite

from indexer.store import queries as q
from rest import queries_dex as qd
from rest.apy import Apy, apy, exposure, income

TRADES = ("buy", "sell")
BIRTHS = ("create", "discover")
ENDS = ("withdraw", "invalidated")


async def window_heights(conn: aiosqlite.Connection, start: int, end: int) -> tuple[int, int]:
    """(h0, h1); -1 where no block qualifies."""
    h0 = await q.height_at(conn, start)
    h1 = await q.height_at(conn, end)
    return (-1 if h0 is None else h0), (-1 if h1 is None else h1)


async def token_apys(
    conn: aiosqlite.Connection, start: int, end: int, token_id: str | None = None
) -> dict[str, Apy]:
    """APY per token (every token, or one) over [start, end]."""
    h0, h1 = await window_heights(conn, start, end)
    if h1 < 0:
        return {}
    initial = await q.value_locked(conn, token=token_id, height=h0) if h0 >= 0 else {}
    steps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for s in await qd.tvl_steps(conn, h0, h1, token_id):
        steps[s.category].append((s.time, s.sats))
    activity = await qd.window_activity(conn, h0, h1, token_id)
    out: dict[str, Apy] = {}
    for cat in set(initial) | set(steps) | set(activity):
        start_state = initial.get(cat)
        sats0 = start_state.sats if start_state is not None else 0
        pools0 = start_state.pools if start_state is not None else 0
        earned, births = activity.get(cat, (0.0, 0))
        out[cat] = apy(
            pools0 + births,
            earned,
            exposure(sats0, steps[cat], start, end),
            start,
            end,
        )
    return out


def combine(parts: dict[str, Apy], start: int, end: int) -> Apy:
    """Pool the income and exposure of several tokens (liquidity-weighted by construction)."""
    return apy(
        sum(a.pools for a in parts.values()),
        sum(a.income for a in parts.values()),
        sum(a.exposure for a in parts.values()),
        start,
        end,
    )


async def owner_apy(
    conn: aiosqlite.Connection, pkh: str, start: int, end: int, token_id: str | None = None
) -> Apy:
    """APY of one owner's pools (of one token, or all), by replaying their events."""
    h0, h1 = await window_heights(conn, start, end)
    if h1 < 0:
        return apy(0, 0.0, 0.0, start, end)
    events = await qd.owner_events(conn, pkh, h1, end, token_id)
    total = 0  # sats locked in the owner's pools; per-block sums do not depend on event order
    alive: dict[str, int] = defaultdict(int)  # lineage -> births - ends (1 while alive)
    sats0 = pools0 = 0
    steps: list[tuple[int, int]] = []
    trades: list[tuple[int, int, int, int]] = []
    born_in_window = 0
    for height, block in groupby(events, key=lambda e: e.height):
        block_events = list(block)
        for e in block_events:
            if e.kind in BIRTHS:
                assert e.sats_after is not None
                total += e.sats_after
                alive[e.lineage] += 1
                born_in_window += height > h0
            elif e.kind in ENDS:
                assert e.sats_before is not None
                total -= e.sats_before
                alive[e.lineage] -= 1
            elif e.sats_before is not None and e.sats_after is not None:
                total += e.sats_after - e.sats_before
                if height > h0 and e.kind in TRADES:
                    assert e.tokens_before is not None and e.tokens_after is not None
                    trades.append((e.sats_before, e.tokens_before, e.sats_after, e.tokens_after))
        if height <= h0:
            sats0 = total
            pools0 = sum(1 for n in alive.values() if n > 0)
        else:
            steps.append((block_events[0].max_time, total))
    return apy(
        pools0 + born_in_window, income(trades), exposure(sats0, steps, start, end), start, end
    )
