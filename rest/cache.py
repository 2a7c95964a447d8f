"""Answers cached per index version: an entry is served only while the index tip is the one it
was computed at, so a new block (or a reorg) invalidates everything at once, with no timers.

Concurrent requests for the same missing answer share one computation (single flight).

An answer assembled from parts that repeat between answers (the hours of a candle series) can
bring its gzip already made: `gzip_join` splices deflate pieces compressed once with pieces
compressed now, so a new answer does not pay for compressing its whole body.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field

from rest.db import IndexVersion

# Level 1: about 3x faster than 5 for ~10 % more bytes; a miss pays it on the request path.
GZIP_LEVEL = 1
# zlib's default (8) allocates and clears ~256 kB of tables per stream, which costs more than
# compressing an answer of a few kB; 6 quarters them and compresses answers as small.
MEM_LEVEL = 6


@dataclass(frozen=True, slots=True)
class RawJson:
    """An answer already serialised (a compute function may return it instead of objects),
    with its gzip member if it was cheaper to assemble than to compress (`gzip_join`)."""

    data: bytes
    gzipped: bytes | None = None


def json_array(items: Sequence[bytes]) -> bytes:
    """The JSON array of items already serialised: the bytes `orjson.dumps` gives the list
    (compact, no spaces), so an answer made of kept rows is the answer computed anew."""
    return b"[" + b",".join(items) + b"]"


@dataclass(slots=True)
class Entry:
    tip: IndexVersion
    body: bytes
    etag: str
    _gz: bytes | None = field(default=None, repr=False)

    def gzipped(self) -> bytes:
        if self._gz is None:
            self._gz = gzip_member(self.body)
        return self._gz

    async def gzip_off_loop(self) -> None:
        """Compress in a worker thread (zlib releases the GIL): a large body then does not
        hold up the event loop."""
        if self._gz is None:
            self._gz = await asyncio.to_thread(gzip_member, self.body)


def _weight(entry: Entry) -> int:
    """Bytes an entry may come to hold: its body and, later, a gzipped copy (never larger)."""
    return 2 * len(entry.body)


class ResponseCache:
    """LRU bounded by entries and by bytes (a 30-day candle answer is ~150 kB, a 2,000-pool
    answer ~700 kB: an entry count alone would not bound memory)."""

    def __init__(self, size: int, max_bytes: int = 128 << 20) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self._inflight: dict[Hashable, asyncio.Future[Entry]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, tip: IndexVersion) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None or entry.tip != tip:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: Hashable, entry: Entry) -> None:
        if self.size <= 0 or _weight(entry) > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= _weight(old)
        self._entries[key] = entry
        self.bytes += _weight(entry)
        while len(self._entries) > self.size or self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= _weight(dropped)

    async def compute(
        self, key: Hashable, tip: IndexVersion, make: Callable[[], Awaitable[Entry]]
    ) -> Entry:
        """Run `make` once for all concurrent callers asking for `key` at `tip`; cache its
        entry under `key` (at the version it was actually computed at)."""
        flight = (key, tip)
        pending = self._inflight.get(flight)
        if pending is not None:
            return await asyncio.shield(pending)
        self.misses += 1
        future: asyncio.Future[Entry] = asyncio.get_running_loop().create_future()
        self._inflight[flight] = future
        try:
            entry = await make()
        except BaseException as exc:
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # marked retrieved: no warning when nobody else waited
            else:
                future.cancel()
            raise
        finally:
            self._inflight.pop(flight, None)
        future.set_result(entry)
        self.put(key, entry)
        return entry


# --- gzip from deflate pieces ---------------------------------------------------------------------

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, mtime 0, OS unknown


@dataclass(frozen=True, slots=True)
class Deflated:
    """`raw` compressed on its own by `deflate_piece`: kept, and reused in any answer."""

    raw: bytes
    data: bytes


def deflate_piece(raw: bytes, level: int) -> Deflated:
    """Raw deflate of `raw` with no reference to anything before it, ended by a sync flush on a
    byte boundary: any sequence of such pieces is one valid deflate stream (RFC 1951)."""
    c = zlib.compressobj(level, zlib.DEFLATED, -15, MEM_LEVEL)
    return Deflated(raw, c.compress(raw) + c.flush(zlib.Z_SYNC_FLUSH))


def gzip_member(body: bytes) -> bytes:
    """`body` gzipped (mtime 0, so the same body always gives the same bytes)."""
    return gzip_join([body], body)


def gzip_join(parts: Sequence[bytes | Deflated], body: bytes) -> bytes:
    """The gzip member of `body`, which must equal the concatenation of `parts`' raw bytes:
    `Deflated` parts are spliced in as they are, runs of plain bytes compressed now."""
    out = [_GZIP_HEADER]
    run: list[bytes] = []

    def flush(mode: int) -> None:
        c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15, MEM_LEVEL)
        out.append(c.compress(b"".join(run)) + c.flush(mode))
        run.clear()

    for part in parts:
        if isinstance(part, Deflated):
            if run:
                flush(zlib.Z_SYNC_FLUSH)
            out.append(part.data)
        else:
            run.append(part)
    flush(zlib.Z_FINISH)
    out.append(struct.pack("<II", zlib.crc32(body), len(body) & 0xFFFFFFFF))
    return b"".join(out)
