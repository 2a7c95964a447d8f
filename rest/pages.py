"""Deep pages of the chain-ordered listings without skipping rows: anchors every `STRIDE` rows.

`LIMIT ? OFFSET ?` makes SQLite step over every skipped row, so a page at offset 30,000 costs
30,000 index steps. The listings paged by offset (the trade feed, the lending action logs) are
in chain order, newest first, and between blocks they only grow at their newest end: a row's
distance from the *oldest* end (its rank) never changes while the chain only extends. So every
`STRIDE`-th rank's key (its `height`, `position` … columns) is remembered per listing, and a
page at offset o starts at the anchor at or just above it (rank ⌈(N−1−o)/STRIDE⌉·STRIDE): the
query seeks to the anchor's key through the listing's index and skips fewer than `STRIDE`
rows. The rows, their order and the page boundaries are those of the plain OFFSET query.

Anchors are kept per process, per listing (and filter), at the index version they were
computed for: a new block extends them from the last anchor (the new rows only); a reorg (the
anchors' tip is no longer in the chain) drops them, and they are built again on demand.

Rows are kept too: a row's rank names it as long as the anchors stand, so the JSON of each row
a page showed is kept by rank (`keep`, up to `MAX_ROWS` rows across listings, in runs of
`ROWS_PER_CHUNK` ranks, the oldest runs first out) and a page whose rows are all kept is
answered from memory (`ready`), with no read. A reorg drops a listing's rows with its anchors.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import aiosqlite

from indexer.store.listing import Key, Listing, Seek
from rest.db import IndexVersion

STRIDE = 512  # rows between anchors: the most a page skips
MAX_LISTINGS = 256  # anchored listings kept (a filtered listing per token, say)
MAX_ROWS = 20_000  # rows' JSON kept, across listings (~10 MB of trade rows)
ROWS_PER_CHUNK = 64  # rows are kept by runs of ranks: a page reads a run or two

_serials = itertools.count()


@dataclass(slots=True)
class _Anchors:
    tip: IndexVersion | None = None  # the version computed for (None: not yet)
    keys: list[Key] = field(default_factory=list)  # [j]: the row of rank j·STRIDE (0: oldest)
    count: int = 0  # rows in the listing
    serial: int = field(default_factory=lambda: next(_serials))  # names its kept rows
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Anchors:
    """The anchors of every listing this process has paged deeply."""

    def __init__(
        self, stride: int = STRIDE, capacity: int = MAX_LISTINGS, rows: int = MAX_ROWS
    ) -> None:
        self.stride = stride
        self.capacity = capacity
        self.max_rows = rows
        self._by_listing: OrderedDict[Listing, _Anchors] = OrderedDict()
        # (serial, rank // ROWS_PER_CHUNK) → the JSON of those ranks' rows (None: not kept)
        self._chunks: OrderedDict[tuple[int, int], list[bytes | None]] = OrderedDict()

    def ready(
        self, tip: IndexVersion, listing: Listing, offset: int, limit: int
    ) -> list[bytes] | None:
        """The JSON of the page's rows at `tip` from memory; None unless all are kept."""
        anchors = self._by_listing.get(listing)
        if anchors is None or anchors.tip != tip:
            return None
        top = anchors.count - 1 - offset  # rank of the page's first row
        bottom = max(top - limit + 1, 0)
        out: list[bytes] = []
        while top >= bottom:
            c = top // ROWS_PER_CHUNK
            chunk = self._chunks.get((anchors.serial, c))
            if chunk is None:
                return None
            first = c * ROWS_PER_CHUNK
            part = chunk[max(bottom, first) - first : top - first + 1]
            if None in part:
                return None
            out.extend(reversed(cast(list[bytes], part)))
            top = first - 1
        return out

    def keep(self, tip: IndexVersion, listing: Listing, offset: int, page: Sequence[bytes]) -> None:
        """Keep the JSON of the rows of the page at `offset`, read at `tip` (after `seek`)."""
        anchors = self._by_listing.get(listing)
        if anchors is None or anchors.tip != tip:
            return
        top, chunks = anchors.count - 1 - offset, self._chunks
        for i, row in enumerate(page):
            c, at = divmod(top - i, ROWS_PER_CHUNK)
            chunk = chunks.get((anchors.serial, c))
            if chunk is None:
                chunk = chunks[(anchors.serial, c)] = [None] * ROWS_PER_CHUNK
            chunk[at] = row
        while len(chunks) * ROWS_PER_CHUNK > self.max_rows:
            chunks.popitem(last=False)

    async def prepare(
        self, conn: aiosqlite.Connection, tip: IndexVersion, listing: Listing
    ) -> None:
        """The listing's anchors at `tip`, read in the snapshot `conn` holds (ahead of pages)."""
        await self._at(conn, tip, listing)

    async def seek(
        self, conn: aiosqlite.Connection, tip: IndexVersion, listing: Listing, offset: int
    ) -> Seek:
        """Where the page at `offset` (newest first) starts, read in the snapshot `conn`
        holds at `tip`; the listing's anchors are then at `tip` (for `keep`)."""
        anchors = await self._at(conn, tip, listing)
        if offset < self.stride:
            return Seek("", [], offset)
        rank = anchors.count - 1 - offset  # the page's first row, counted from the oldest
        if rank < 0:
            return Seek("", [], 0, empty=True)
        j = -(-rank // self.stride)
        if j >= len(anchors.keys):
            return Seek("", [], offset)  # among the newest rows, past the last anchor
        where = listing.from_key(newest_first=True)
        return Seek(where, listing.bind(anchors.keys[j]), j * self.stride - rank)

    async def _at(
        self, conn: aiosqlite.Connection, tip: IndexVersion, listing: Listing
    ) -> _Anchors:
        anchors = self._by_listing.get(listing)
        if anchors is None:
            anchors = self._by_listing[listing] = _Anchors()
            while len(self._by_listing) > self.capacity:
                self._by_listing.popitem(last=False)
        self._by_listing.move_to_end(listing)
        async with anchors.lock:
            if anchors.tip == tip:
                return anchors
            # Computed on a chain this snapshot does not extend (a reorg, or a snapshot older
            # than the anchors): start over.
            if anchors.tip is not None and not await _extends(conn, anchors.tip):
                anchors.keys, anchors.count = [], 0
                anchors.serial = next(_serials)  # its kept rows are no longer asked for
            await self._extend(conn, listing, anchors)
            anchors.tip = tip
            return anchors

    async def _extend(self, conn: aiosqlite.Connection, listing: Listing, a: _Anchors) -> None:
        """Anchors for the rows added since `a` was computed, and the new count."""
        cols = ", ".join(listing.columns)
        oldest_first = listing.order(newest_first=False)
        if not a.keys:
            row = await _first(
                conn,
                f"SELECT {cols} FROM {listing.table} {listing.filtered()} "
                f"ORDER BY {oldest_first} LIMIT 1",
                listing.params,
            )
            if row is None:
                return
            a.keys.append(row)
        after = listing.from_key(newest_first=False)
        step = (
            f"SELECT {cols} FROM {listing.table} {listing.filtered(after)} "
            f"ORDER BY {oldest_first} LIMIT 1 OFFSET {self.stride}"
        )
        while row := await _first(conn, step, [*listing.params, *listing.bind(a.keys[-1])]):
            a.keys.append(row)
        tail = await _first(
            conn,
            f"SELECT count(*) FROM {listing.table} {listing.filtered(after)}",
            [*listing.params, *listing.bind(a.keys[-1])],
        )
        assert tail is not None
        a.count = (len(a.keys) - 1) * self.stride + int(str(tail[0]))


async def _first(conn: aiosqlite.Connection, sql: str, params: Sequence[object]) -> Key | None:
    async with conn.execute(sql, params) as cursor:
        row = await cursor.fetchone()
    return None if row is None else tuple(row)


async def _extends(conn: aiosqlite.Connection, old: IndexVersion) -> bool:
    """Is the chain the anchors were computed on still below the snapshot's tip?"""
    row = await _first(conn, "SELECT hash FROM blocks WHERE height = ?", (old.height,))
    return row is not None and isinstance(row[0], bytes) and row[0].hex() == old.hash
