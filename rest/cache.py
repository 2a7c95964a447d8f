"""Answers cached per index version: an entry is served only while the index tip is the one it
was computed at, so a new block (or a reorg) invalidates everything at once, with no timers.

Concurrent requests for the same missing answer share one computation (single flight).
"""

from __future__ import annotations

import asyncio
import gzip
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from rest.db import IndexVersion

# Level 1: about 3x faster than 5 for ~10 % more bytes; a miss pays it on the request path.
GZIP_LEVEL = 1


@dataclass(frozen=True, slots=True)
class RawJson:
    """An answer already serialised (a compute function may return it instead of objects)."""

    data: bytes


@dataclass(slots=True)
class Entry:
    tip: IndexVersion
    body: bytes
    etag: str
    _gz: bytes | None = field(default=None, repr=False)

    def gzipped(self) -> bytes:
        if self._gz is None:
            self._gz = gzip.compress(self.body, GZIP_LEVEL, mtime=0)
        return self._gz

    async def gzip_off_loop(self) -> None:
        """Compress in a worker thread (zlib releases the GIL): a large body then does not
        hold up the event loop."""
        if self._gz is None:
            self._gz = await asyncio.to_thread(gzip.compress, self.body, GZIP_LEVEL, mtime=0)


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
