"""The token list behind `/dex/tokens/list_cached`, `list_cached_by_ids` and `search_cached`:
one object per token the index has seen in a pool, computed once per index version (and
registry revision) and shared by every request until the next block.

Figures are "as of the tip": `now` is the tip's running max header time, so the list is a pure
function of the index (cacheable, and the same on every replica). Definitions in docs/api.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiosqlite

from indexer.store import queries as q
from rest.apy_index import token_apys
from rest.db import IndexVersion
from rest.tokens import TokenMetadata, TokenRegistry, UsdOracle

DAY = 86_400
SORT_KEYS = ("score", "tvl", "volume", "price_change", "apy", "trade_count", "name")
_FIELD = {
    "score": "score",
    "tvl": "tvl_sats",
    "volume": "trade_volume",
    "price_change": "change_24h_bp",
    "apy": "apy_30d_bp",
    "trade_count": "trade_count",
}

TokenObject = dict[str, Any]


def price_of(sats: int, tokens: int) -> float | None:
    """Liquidity-weighted marginal price: Σ sats / Σ tokens over the token's live pools."""
    return sats / tokens if tokens > 0 else None


def change_bp(now: float | None, then: float | None) -> int | None:
    if now is None or then is None or then <= 0:
        return None
    return round((now / then - 1.0) * 10_000)


def usd(price: float | None, usd_per_bch: float | None) -> float | None:
    """USD per token base unit from sats per base unit."""
    if price is None or usd_per_bch is None:
        return None
    return price * usd_per_bch / 100_000_000


def bcmr_object(meta: TokenMetadata | None) -> dict[str, Any] | None:
    if meta is None:
        return None
    return {
        "name": meta.name,
        "description": meta.description,
        "token": {"category": meta.token_id, "decimals": meta.decimals, "symbol": meta.symbol},
        "uris": {"icon": meta.icon, "web": meta.web},
    }


async def compute(
    conn: aiosqlite.Connection, tip: IndexVersion, registry: TokenRegistry, oracle: UsdOracle
) -> list[TokenObject]:
    now = tip.max_time
    rows = await q.tokens(conn)
    ids = [t.token_id for t in rows]
    tvl = await q.value_locked(conn)
    past: dict[int, dict[str, q.ValueLocked]] = {}
    for span in (DAY, 7 * DAY):
        h = await q.height_at(conn, now - span)
        past[span] = {} if h is None else await q.value_locked(conn, height=h)
    volume = await q.volume_by_token(conn, now - DAY, now)
    apys = await token_apys(conn, now - 30 * DAY, now)
    meta = await registry.metadata(ids)
    rate = {span: await oracle.usd_per_bch(now - span) for span in (0, DAY, 7 * DAY)}
    out: list[TokenObject] = []
    for token_id in ids:
        v = tvl.get(token_id)
        live = v is not None and v.pools > 0
        p_now = price_of(v.sats, v.tokens) if v is not None and live else None
        then = {}
        for span in (DAY, 7 * DAY):
            pv = past[span].get(token_id)
            then[span] = price_of(pv.sats, pv.tokens) if pv is not None and pv.pools else None
        vol = volume.get(token_id, (0, 0, 0))
        m = meta.get(token_id)
        a = apys.get(token_id)
        tvl_sats = v.sats if v is not None else 0
        usd_now, usd_24h, usd_7d = (
            usd(p_now, rate[0]),
            usd(then[DAY], rate[DAY]),
            usd(then[7 * DAY], rate[7 * DAY]),
        )
        out.append(
            {
                "token_id": token_id,
                "display_name": m.name if m is not None else None,
                "display_symbol": m.symbol if m is not None else None,
                "price_now": p_now,
                "price_now_usd": usd_now,
                "price_24h": then[DAY],
                "price_24h_usd": usd_24h,
                "price_7d": then[7 * DAY],
                "price_7d_usd": usd_7d,
                "change_24h_bp": change_bp(p_now, then[DAY]),
                "change_24h_usd_bp": change_bp(usd_now, usd_24h),
                "change_7d_bp": change_bp(p_now, then[7 * DAY]),
                "change_7d_usd_bp": change_bp(usd_now, usd_7d),
                "apy_30d_bp": a.basis_points if a is not None else 0,
                "score": tvl_sats + vol[0],
                "score_rank": 0,
                "trade_count": vol[2],
                "trade_volume": vol[0],
                "tvl_sats": tvl_sats,
                "tvl_tokens": v.tokens if v is not None else 0,
                "pools": v.pools if v is not None else 0,
                "bcmr": bcmr_object(m),
            }
        )
    ranked = sorted(out, key=lambda o: (-o["score"], o["token_id"]))
    for rank, o in enumerate(ranked, start=1):
        o["score_rank"] = rank
    return ranked


def sort_tokens(objs: Sequence[TokenObject], by: str, order: str) -> list[TokenObject]:
    """Sort by `by` (nulls last in either order), ties by token id."""
    if by == "name":

        def name(o: TokenObject) -> str | None:
            n = o["display_name"] or o["display_symbol"]
            return n.casefold() if isinstance(n, str) else None

        present = [o for o in objs if name(o) is not None]
        missing = [o for o in objs if name(o) is None]
        present.sort(key=lambda o: (name(o), o["token_id"]), reverse=order == "desc")
        return present + sorted(missing, key=lambda o: o["token_id"])
    field = _FIELD[by]
    present = [o for o in objs if o[field] is not None]
    missing = [o for o in objs if o[field] is None]
    present.sort(key=lambda o: o["token_id"])
    present.sort(key=lambda o: o[field], reverse=order == "desc")
    return present + sorted(missing, key=lambda o: o["token_id"])


def matches(obj: TokenObject, query: str) -> bool:
    """Case-insensitive substring of the symbol or name, or a prefix of the token id."""
    needle = query.casefold()
    for text in (obj.get("display_symbol"), obj.get("display_name")):
        if isinstance(text, str) and needle in text.casefold():
            return True
    return str(obj["token_id"]).startswith(needle)


class TokenTable:
    """The token list for the current version, computed once (single flight)."""

    def __init__(self) -> None:
        self._key: tuple[IndexVersion, int] | None = None
        self._objects: list[TokenObject] = []
        self._ids: frozenset[str] = frozenset()
        self._lock = asyncio.Lock()

    @property
    def version(self) -> tuple[IndexVersion, int] | None:
        """(tip, registry revision) of the list `get` last returned."""
        return self._key

    def known(self, tip: IndexVersion, token_id: str) -> bool | None:
        """Has the index seen `token_id` as of `tip`? None when the list is not at `tip`."""
        if self._key is None or self._key[0] != tip:
            return None
        return token_id in self._ids

    async def get(
        self,
        conn: aiosqlite.Connection,
        tip: IndexVersion,
        registry: TokenRegistry,
        oracle: UsdOracle,
    ) -> list[TokenObject]:
        key = (tip, registry.revision)
        if self._key == key:
            return self._objects
        async with self._lock:
            if self._key != key:
                self._objects = await compute(conn, tip, registry, oracle)
                self._ids = frozenset(o["token_id"] for o in self._objects)
                self._key = key
            return self._objects
