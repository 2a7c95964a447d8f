"""Price history and candlesticks from trade execution prices.

An interval is [t, t + stepsize) with t a multiple of stepsize since the Unix epoch; trades are
ordered by (time, height, position in block). OHLC are execution prices (volume_sats /
volume_tokens of a trade), volumes are sums, intervals without trades are omitted.

`CandleStore` keeps, per token, every trade as compact arrays in (time, height, position) order
and the trades folded into hourly buckets, both extended block by block as the index grows
(rebuilt after a reorg). Any window is then answered from memory: a stepsize that is a multiple
of an hour merges the buckets of the whole hours inside the window and folds the trades of the
partial hours at its edges (two bisections); any other stepsize folds the window's trades. Both
give identical results (the buckets keep the keys of their first and last trades, so merging is
exact in any order).

Hourly answers (the charts' default) are mostly ready bytes: each hour is serialised once, and
each UTC day of hours is also kept deflated, so a window nobody asked for before is a join plus
the compression of its two partial days (`rest.cache.gzip_join`), not of 140 kB of JSON.
"""

from __future__ import annotations

import asyncio
import bisect
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, MutableSequence
from dataclasses import dataclass, field

import aiosqlite
import orjson

from rest import queries_dex as qd
from rest.cache import Deflated, RawJson, deflate_piece, gzip_join
from rest.db import IndexVersion
from rest.queries_dex import TradePoint

HOUR = 3_600
DAY = 86_400  # the hours kept deflated together (a UTC day: 24 hourly candles, ~4.6 kB)
DAY_LEVEL = 6  # compressed once per day and kind: worth a better ratio than a miss's level 1
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


def _column() -> MutableSequence[int]:
    return array("q")


class Trades:
    """A token's trades in (time, height, position) order as parallel arrays of 64-bit
    integers (32 bytes a trade), so a window's trades are two bisections away. A volume
    beyond 64 bits (possible in principle for tokens) turns its column into a list."""

    __slots__ = ("orders", "sats", "times", "tokens")

    def __init__(self) -> None:
        self.times: MutableSequence[int] = _column()
        self.orders: MutableSequence[int] = _column()  # height << 32 | position
        self.sats: MutableSequence[int] = _column()
        self.tokens: MutableSequence[int] = _column()

    def __len__(self) -> int:
        return len(self.times)

    def _index(self, time: int, order: int) -> int:
        """The first index whose key is greater than (time, order)."""
        lo = bisect.bisect_left(self.times, time)
        hi = bisect.bisect_right(self.times, time, lo)
        return bisect.bisect_right(self.orders, order, lo, hi)

    def points(self, lo: int, hi: int) -> Iterator[TradePoint]:
        t, o, s, k = self.times, self.orders, self.sats, self.tokens
        for i in range(lo, hi):
            yield (t[i], o[i] >> 32, o[i] & 0xFFFFFFFF, s[i], k[i])

    def between(self, start: int, end: int) -> Iterator[TradePoint]:
        """The trades with start <= time <= end, in order."""
        lo = bisect.bisect_left(self.times, start)
        return self.points(lo, bisect.bisect_right(self.times, end, lo))

    def add(self, points: Iterable[TradePoint]) -> None:
        """Insert trades not held yet (priceless ones are skipped, as `fold` does). New blocks'
        trades usually come last; header times are not monotonic, so those that do not are
        merged with the few held trades after them."""
        new = sorted(p for p in points if p[4] > 0)
        if not new:
            return
        first = new[0]
        at = self._index(first[0], first[1] << 32 | first[2])
        if at < len(self):
            new = sorted([*self.points(at, len(self)), *new])
            for col in (self.times, self.orders, self.sats, self.tokens):
                del col[at:]
        self.times.extend(p[0] for p in new)
        self.orders.extend(p[1] << 32 | p[2] for p in new)
        self.sats = _extend(self.sats, [p[3] for p in new])
        self.tokens = _extend(self.tokens, [p[4] for p in new])


def _extend(col: MutableSequence[int], values: list[int]) -> MutableSequence[int]:
    try:
        col.extend(values)
        return col
    except (OverflowError, TypeError):
        return [*col, *values]


@dataclass(slots=True)
class _Series:
    height: int
    hash: str
    trades: Trades
    hours: dict[int, Bucket]
    starts: list[int]  # sorted keys of `hours`
    # Serialised hours ("candle"/"history" JSON objects) and days of them (each hour preceded
    # by a comma) deflated, made on first use, dropped when an hour of theirs changes.
    fragments: dict[tuple[int, str], bytes] = field(default_factory=dict)
    days: dict[tuple[int, str], Deflated] = field(default_factory=dict)

    def fragment(self, t: int, kind: str) -> bytes:
        key = (t, kind)
        frag = self.fragments.get(key)
        if frag is None:
            frag = self.fragments[key] = _dump(self.hours[t], kind)
        return frag

    def day(self, d: int, lo: int, hi: int, kind: str) -> Deflated:
        """Day `d`'s hours, whose indexes in `starts` are [lo, hi), as `,hour,hour…` deflated."""
        key = (d, kind)
        piece = self.days.get(key)
        if piece is None:
            raw = b"".join(b"," + self.fragment(t, kind) for t in self.starts[lo:hi])
            piece = self.days[key] = deflate_piece(raw, DAY_LEVEL)
        return piece

    def extend(self, points: list[TradePoint]) -> None:
        self.trades.add(points)
        new: dict[int, Bucket] = {}
        fold(new, HOUR, points)
        for t, b in new.items():
            old = self.hours.get(t)
            if old is None:
                self.hours[t] = b
                bisect.insort(self.starts, t)
            else:
                old.merge(b)
            for kind in (CANDLES, HISTORY):
                self.fragments.pop((t, kind), None)
                self.days.pop((t - t % DAY, kind), None)

    def whole_hours(
        self, first_hour: int, last_hour: int, kind: str, first: bool
    ) -> Iterator[bytes | Deflated]:
        """The answer's parts for the hours in [first_hour, last_hour), each preceded by a
        comma unless it opens the list (`first`); a UTC day wholly inside the range (and not
        opening the list) is its deflated piece."""
        starts = self.starts
        i = bisect.bisect_left(starts, first_hour)
        hi = bisect.bisect_left(starts, last_hour, i)
        while i < hi:
            d = starts[i] - starts[i] % DAY
            end = bisect.bisect_left(starts, d + DAY, i, hi)
            if not first and first_hour <= d and d + DAY <= last_hour:
                yield self.day(d, i, end, kind)
            else:
                for t in starts[i:end]:
                    frag = self.fragment(t, kind)
                    yield frag if first else b"," + frag
                    first = False
            first = False
            i = end


class CandleStore:
    """The trades and hourly buckets of the `capacity` most recently used tokens."""

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
        s = self._series.get(token_id)
        if s is not None and s.height == tip.height and s.hash == tip.hash:
            self._series.move_to_end(token_id)  # the common case: no lock, no await
            return s
        lock = self._locks.setdefault(token_id, asyncio.Lock())
        async with lock:
            s = self._series.get(token_id)
            if s is not None and s.height > tip.height:
                return None
            if s is None or (
                s.hash != tip.hash
                if s.height == tip.height
                else await qd.block_hash(conn, s.height) != s.hash  # still on the tip's chain?
            ):
                self.rebuilds += 1
                s = _Series(-1, "", Trades(), {}, [])  # invisible until complete
                await _read_pages(conn, token_id, -1, tip.height, s.extend)
            elif s.height < tip.height:
                # A few blocks: read them all, then change the series with no await in between
                # (requests at the older tip keep reading it meanwhile).
                new: list[TradePoint] = []
                await _read_pages(conn, token_id, s.height, tip.height, new.extend)
                s.extend(new)
            s.height, s.hash = tip.height, tip.hash
            self._series[token_id] = s
            self._series.move_to_end(token_id)
            while len(self._series) > self.capacity:
                dropped, _ = self._series.popitem(last=False)
                self._locks.pop(dropped, None)
            return s

    def buckets(self) -> int:
        """Hourly buckets held, over all series."""
        return sum(len(s.hours) for s in self._series.values())

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
    ) -> RawJson:
        """The JSON answer `{kind: [interval, …]}` (kind: `candlesticks` or `history`) of the
        token's non-empty intervals of `step` seconds over start <= time <= end (hourly
        answers come with their gzip member)."""
        series = await self._current(conn, tip, token_id)
        if series is None:
            out: dict[int, Bucket] = {}
            fold(out, step, await qd.trade_points_between(conn, token_id, start, end))
            return RawJson(_document(kind, [_dump(b, kind) for b in ordered(out)]))
        return _render(series, start, end, step, kind)

    def render_ready(
        self, tip: IndexVersion, token_id: str, start: int, end: int, step: int, kind: str
    ) -> RawJson | None:
        """`render`'s answer without a read snapshot when the token's series is exactly at
        `tip` (what the warmer keeps for the busiest tokens), else None. A request then costs
        no round trip through SQLite's thread, which under load queues behind other readers."""
        s = self._series.get(token_id)
        if s is None or s.height != tip.height or s.hash != tip.hash:
            return None
        self._series.move_to_end(token_id)
        return _render(s, start, end, step, kind)


def _render(series: _Series, start: int, end: int, step: int, kind: str) -> RawJson:
    out: dict[int, Bucket] = {}
    first_hour = -(-start // HOUR) * HOUR  # whole hours: [first_hour, last_hour)
    last_hour = (end + 1) // HOUR * HOUR
    if step % HOUR or first_hour >= last_hour:
        fold(out, step, series.trades.between(start, end))
        return RawJson(_document(kind, [_dump(b, kind) for b in ordered(out)]))
    head: dict[int, Bucket] = {}
    tail: dict[int, Bucket] = {}
    fold(head, step, series.trades.between(start, first_hour - 1))
    fold(tail, step, series.trades.between(last_hour, end))
    if step == HOUR:  # edges and whole hours never share an interval
        return _hourly(series, kind, head, tail, first_hour, last_hour)
    merged = head
    lo = bisect.bisect_left(series.starts, first_hour)
    hi = bisect.bisect_left(series.starts, last_hour, lo)
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
    return RawJson(_document(kind, [_dump(b, kind) for b in ordered(merged)]))


def _hourly(
    series: _Series,
    kind: str,
    head: dict[int, Bucket],
    tail: dict[int, Bucket],
    first_hour: int,
    last_hour: int,
) -> RawJson:
    parts: list[bytes | Deflated] = [b'{"' + kind.encode() + b'":[']
    first = True
    for b in ordered(head):
        parts.append(_dump(b, kind) if first else b"," + _dump(b, kind))
        first = False
    parts += series.whole_hours(first_hour, last_hour, kind, first)
    first = first and len(parts) == 1 + len(head)
    for b in ordered(tail):
        parts.append(_dump(b, kind) if first else b"," + _dump(b, kind))
        first = False
    parts.append(b"]}")
    body = b"".join(p.raw if isinstance(p, Deflated) else p for p in parts)
    return RawJson(body, gzip_join(parts, body))


PAGE = 20_000


async def _read_pages(
    conn: aiosqlite.Connection,
    token_id: str,
    above: int,
    upto: int,
    sink: Callable[[list[TradePoint]], object],
) -> None:
    """Pass the trades with above < height <= upto to `sink`, read a page at a time and
    yielding to the event loop between pages: building a busy token's series (hundreds of
    thousands of trades) must not stall every other request."""
    after = (above, 1 << 62)
    while True:
        page = await qd.trade_points_page(conn, token_id, after, upto, PAGE)
        sink(page)
        if len(page) < PAGE:
            return
        after = (page[-1][1], page[-1][2])
        await asyncio.sleep(0)


def _dump(b: Bucket, kind: str) -> bytes:
    return orjson.dumps(b.candle() if kind == CANDLES else b.history())


def _document(kind: str, parts: list[bytes]) -> bytes:
    return b'{"' + kind.encode() + b'":[' + b",".join(parts) + b"]}"
