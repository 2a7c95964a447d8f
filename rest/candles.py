"""Price history and candlesticks from trade execution prices.

An interval is [t, t + stepsize) with t a multiple of stepsize since the Unix epoch; trades are
ordered by (time, height, position in block). OHLC are execution prices (volume_sats /
volume_tokens of a trade), volumes are sums, intervals without trades are omitted.

`CandleStore` keeps, per token, the trades folded into hourly buckets, extended block by block
as the index grows (rebuilt after a reorg). A request whose stepsize is a multiple of an hour
merges the buckets of the whole hours inside its window and folds the raw trades of the partial
hours at its edges, so a 30-day window costs a few hundred merges instead of a scan of every
trade; any other stepsize folds the window's raw trades. Both give identical results (the
buckets keep the keys of their first and last trades, so merging is exact in any order).
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

import aiosqlite
import orjson

from rest import queries_dex as qd
from rest.db import IndexVersion
from rest.queries_dex import TradePoint

HOUR = 3_600
CANDLES = "candlesticks"
HISTORY = "history"
Key = tuple[int, int, int]  # (time, height, position): the order of trades


@dataclass(slots=True)
class Bucket:
    time: int
    open_key: Key
    open: float
    close_key: Key
    close: float
    high: float
    low: float
    volume_sats: int
    volume_tokens: int
    count: int

    @classmethod
    def of(cls, time: int, p: TradePoint) -> Bucket:
        price = p[3] / p[4]
        key = (p[0], p[1], p[2])
        return cls(time, key, price, key, price, price, price, p[3], p[4], 1)

    def add(self, p: TradePoint) -> None:
        price = p[3] / p[4]
        key = (p[0], p[1], p[2])
        if key < self.open_key:
            self.open_key, self.open = key, price
        if key > self.close_key:
            self.close_key, self.close = key, price
        self.high = max(self.high, price)
        self.low = min(self.low, price)
        self.volume_sats += p[3]
        self.volume_tokens += p[4]
        self.count += 1

    def merge(self, other: Bucket) -> None:
        if other.open_key < self.open_key:
            self.open_key, self.open = other.open_key, other.open
        if other.close_key > self.close_key:
            self.close_key, self.close = other.close_key, other.close
        self.high = max(self.high, other.high)
        self.low = min(self.low, other.low)
        self.volume_sats += other.volume_sats
        self.volume_tokens += other.volume_tokens
        self.count += other.count

    def copy(self, time: int) -> Bucket:
        return Bucket(
            time,
            self.open_key,
            self.open,
            self.close_key,
            self.close,
            self.high,
            self.low,
            self.volume_sats,
            self.volume_tokens,
            self.count,
        )

    def candle(self) -> dict[str, object]:
        return {
            "time": self.time,
            "open": self.open,
            "high": self.high,
            "low": self.low,
            "close": self.close,
            "volume_sats": self.volume_sats,
            "volume_tokens": self.volume_tokens,
            "transaction_count": self.count,
        }

    def history(self) -> dict[str, object]:
        """avg is the volume-weighted mean price: Σ volume_sats / Σ volume_tokens."""
        return {
            "time": self.time,
            "avg": self.volume_sats / self.volume_tokens,
            "max": self.high,
            "min": self.low,
        }


def fold(buckets: dict[int, Bucket], step: int, points: Iterable[TradePoint]) -> None:
    for p in points:
        if p[4] <= 0:
            continue  # no tokens moved: no price (never produced by the index for a trade)
        t = p[0] - p[0] % step
        b = buckets.get(t)
        if b is None:
            buckets[t] = Bucket.of(t, p)
        else:
            b.add(p)


def ordered(buckets: dict[int, Bucket]) -> list[Bucket]:
    return [buckets[t] for t in sorted(buckets)]


@dataclass(slots=True)
class _Series:
    height: int
    hash: str
    hours: dict[int, Bucket]
    starts: list[int]  # sorted keys of `hours`
    # Serialised hours ("candle"/"history" JSON objects), made on first use, dropped when the
    # hour changes: an hourly answer is then mostly a join of ready bytes.
    fragments: dict[tuple[int, str], bytes] = field(default_factory=dict)

    def fragment(self, t: int, kind: str) -> bytes:
        key = (t, kind)
        frag = self.fragments.get(key)
        if frag is None:
            b = self.hours[t]
            frag = self.fragments[key] = orjson.dumps(
                b.candle() if kind == CANDLES else b.history()
            )
        return frag


class CandleStore:
    """Hourly buckets per token, kept for the `capacity` most recently used tokens."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._series: OrderedDict[str, _Series] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self.rebuilds = 0

    async def _current(
        self, conn: aiosqlite.Connection, tip: IndexVersion, token_id: str
    ) -> _Series | None:
        """The token's series brought up to `tip`; None if it is already past `tip` (an
        older snapshot: the caller folds raw trades instead)."""
        lock = self._locks.setdefault(token_id, asyncio.Lock())
        async with lock:
            s = self._series.get(token_id)
            if s is not None and s.height > tip.height:
                return None
            if s is None:
                stale = True
            elif s.height == tip.height:
                stale = s.hash != tip.hash
            else:  # behind: still on the chain the tip extends?
                stale = await qd.block_hash(conn, s.height) != s.hash
            if stale:
                self.rebuilds += 1
                hours = await _fold_pages(conn, token_id, -1, tip.height)
                s = _Series(tip.height, tip.hash, hours, sorted(hours))
            elif s is not None and s.height < tip.height:
                new = await _fold_pages(conn, token_id, s.height, tip.height)
                for t, b in new.items():
                    old = s.hours.get(t)
                    if old is None:
                        s.hours[t] = b
                        bisect.insort(s.starts, t)
                    else:
                        old.merge(b)
                        s.fragments.pop((t, CANDLES), None)
                        s.fragments.pop((t, HISTORY), None)
                s.height, s.hash = tip.height, tip.hash
            assert s is not None
            self._series[token_id] = s
            self._series.move_to_end(token_id)
            while len(self._series) > self.capacity:
                dropped, _ = self._series.popitem(last=False)
                self._locks.pop(dropped, None)
            return s

    async def ensure(self, conn: aiosqlite.Connection, tip: IndexVersion, token_id: str) -> None:
        """Bring the token's series up to `tip` (the background warmer's entry point)."""
        await self._current(conn, tip, token_id)

    async def render(
        self,
        conn: aiosqlite.Connection,
        tip: IndexVersion,
        token_id: str,
        start: int,
        end: int,
        step: int,
        kind: str,
    ) -> bytes:
        """The JSON answer `{kind: [interval, …]}` (kind: `candlesticks` or `history`) of the
        token's non-empty intervals of `step` seconds over start <= time <= end."""
        first_hour = -(-start // HOUR) * HOUR  # whole hours: [first_hour, last_hour)
        last_hour = (end + 1) // HOUR * HOUR
        series = None
        if step % HOUR == 0 and first_hour < last_hour:
            series = await self._current(conn, tip, token_id)
        if series is None:
            out: dict[int, Bucket] = {}
            fold(out, step, await qd.trade_points_between(conn, token_id, start, end))
            return _document(kind, [_dump(b, kind) for b in ordered(out)])
        lo = bisect.bisect_left(series.starts, first_hour)
        hi = bisect.bisect_left(series.starts, last_hour)
        head: dict[int, Bucket] = {}
        tail: dict[int, Bucket] = {}
        ranges = []
        if start < first_hour:
            ranges.append((start, first_hour - 1))
        if last_hour <= end:
            ranges.append((last_hour, end))
        edges = await qd.trade_points_in_ranges(conn, token_id, ranges)
        fold(head, step, (p for p in edges if p[0] < first_hour))
        fold(tail, step, (p for p in edges if p[0] >= last_hour))
        if step == HOUR:  # edges and whole hours never share an interval
            parts = [_dump(b, kind) for b in ordered(head)]
            parts += [series.fragment(t, kind) for t in series.starts[lo:hi]]
            parts += [_dump(b, kind) for b in ordered(tail)]
            return _document(kind, parts)
        merged = head
        for t in series.starts[lo:hi]:
            hour = series.hours[t]
            at = t - t % step
            b = merged.get(at)
            if b is None:
                merged[at] = hour.copy(at)
            else:
                b.merge(hour)
        for at, b in tail.items():
            if at in merged:
                merged[at].merge(b)
            else:
                merged[at] = b
        return _document(kind, [_dump(b, kind) for b in ordered(merged)])


PAGE = 20_000


async def _fold_pages(
    conn: aiosqlite.Connection, token_id: str, above: int, upto: int
) -> dict[int, Bucket]:
    """Hourly buckets of the trades with above < height <= upto, read a page at a time and
    yielding to the event loop between pages: building a busy token's series (hundreds of
    thousands of trades) must not stall every other request."""
    hours: dict[int, Bucket] = {}
    after = (above, 1 << 62)
    while True:
        page = await qd.trade_points_page(conn, token_id, after, upto, PAGE)
        fold(hours, HOUR, page)
        if len(page) < PAGE:
            return hours
        after = (page[-1][1], page[-1][2])
        await asyncio.sleep(0)


def _dump(b: Bucket, kind: str) -> bytes:
    return orjson.dumps(b.candle() if kind == CANDLES else b.history())


def _document(kind: str, parts: list[bytes]) -> bytes:
    return b'{"' + kind.encode() + b'":[' + b",".join(parts) + b"]}"
