"""Token metadata and the BCH/USD price read from the index itself: `IndexRegistry` (the
default `TokenRegistry`: the on-chain BCMR entries the fetch job stored) and `IndexUsdOracle`
(the default `UsdOracle`: the indexed BCH/USD oracle feed).

Both answer from memory on the request path; what they know is brought up to date by `sync`,
which the API's index watcher calls on one of its reader connections each time it polls the tip
(outside any request's snapshot). Registry documents arrive from the fetch job without a new
block, so the registry compares a cheap signature of its tables at every poll and rebuilds its
maps only when that changed; its `revision` changes only when the entries do. A source used
before its first sync (or whose cache misses) reads through a short-lived connection of its
own, never the request pool: a request holding a pool connection must never wait for another.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import aiosqlite

from indexer.store.db import open_reader
from protocols.bcmr import FileMeta, flatten_entry, identity_snapshot
from rest.db import IndexVersion, read_tip
from rest.tokens import TokenMetadata

# The mainnet Delphi BCH/USD feed (shared/reference/oracle-registry-lending.md).
MAINNET_USD_FEED = "d0d46f5cbd82188acede0d3e49c75700c19cb8331a30101f0bb6a260066ac972"

# Changes whenever a registry table does: a fetch attempt (every stored copy comes with one),
# a publication or stored copy added or removed, an off-chain source's content.
_SIGNATURE = (
    "SELECT (SELECT max(id) FROM registry_fetches), (SELECT count(*) FROM registry_documents), "
    "(SELECT count(*) FROM registry_publications), "
    "(SELECT group_concat(source || ':' || coalesce(hex(actual_hash), ''), ',') "
    " FROM registry_offchain)"
)
# What the registry answers are made of, in key order, for the revision's digest: the copies
# (by their hash), the publications and the off-chain lists. The fetch log is left out: replicas
# that fetched the same copies a different number of times answer alike.
_CONTENT_SIGNATURE = (
    "SELECT 'd', hex(txid), hex(authbase), hex(actual_hash) FROM registry_documents "
    "UNION ALL SELECT 'p', count(*), '', '' FROM registry_publications "
    "UNION ALL SELECT 'o', source, coalesce(hex(actual_hash), ''), '' FROM registry_offchain"
)
# Every stored copy with its publication, oldest link first per token (the newest one wins);
# the bytes are read only for copies not parsed yet.
_DOCUMENTS = (
    "SELECT p.authbase, p.txid, p.expected_hash, d.actual_hash "
    "FROM registry_publications AS p JOIN registry_documents AS d "
    "ON d.txid = p.txid AND d.authbase = p.authbase ORDER BY p.authbase, p.seq"
)
_CONTENT = "SELECT content FROM registry_documents WHERE txid = ? AND authbase = ?"
# The price standing at a time: the latest update at or before it (by oracle time, then
# sequence), as `queries_oracle.feed_history` orders them.
_PRICE_AT = (
    "SELECT price FROM oracle_updates WHERE category = ? AND price IS NOT NULL "
    "AND oracle_time <= ? ORDER BY oracle_time DESC, sequence DESC LIMIT 1"
)


class IndexSource(Protocol):
    """Something derived from the index that the API's watcher keeps current."""

    async def sync(self, conn: aiosqlite.Connection, tip: IndexVersion) -> None: ...


@contextlib.asynccontextmanager
async def _own_reader(path: Path) -> AsyncIterator[aiosqlite.Connection | None]:
    """A short-lived read-only connection (None while the index does not exist yet)."""
    if not path.exists():
        yield None
        return
    conn = await open_reader(path)
    try:
        yield conn
    finally:
        await conn.close()


def _missing_table(exc: sqlite3.OperationalError) -> bool:
    """An index written without that decoder has no such table: it holds no such data."""
    return "no such table" in str(exc)


async def registry_signature(conn: aiosqlite.Connection) -> tuple[Any, ...]:
    """A cheap fingerprint of the registry tables (one row of aggregates)."""
    try:
        rows = list(await conn.execute_fetchall(_SIGNATURE))
    except sqlite3.OperationalError as exc:
        if _missing_table(exc):
            return ()
        raise
    return tuple(rows[0])


class RegistryTables:
    """The revision of the index's registry tables, for answers read straight from them
    (`/registry/…`): cached per index version *and* this revision, since the fetch job adds
    copies between blocks. A digest of what the answers are made of, so processes over the
    same content (workers, replicas) agree on it."""

    def __init__(self) -> None:
        self.revision = 0
        self._signature: tuple[Any, ...] | None = None

    async def sync(self, conn: aiosqlite.Connection, tip: IndexVersion) -> None:
        await self.revision_in(conn)

    async def revision_in(self, conn: aiosqlite.Connection) -> int:
        """The revision of the tables as `conn` sees them (kept as `revision`). An answer read
        inside a snapshot asks it there, so the key it is cached under describes what it read
        even when a copy arrived since the last poll."""
        # The cheap signature says when to look again; the digest is of the content itself.
        signature = await registry_signature(conn)
        if signature != self._signature:
            content = sorted(tuple(row) for row in await conn.execute_fetchall(_CONTENT_SIGNATURE))
            self.revision, self._signature = _digest(content), signature
        return self.revision


def _digest(content: object) -> int:
    """A revision derived from the content alone (its repr: plain data), so that processes
    holding the same entries (workers, replicas) key their answers and ETags alike."""
    return int.from_bytes(hashlib.blake2b(repr(content).encode(), digest_size=8).digest())


def _parse(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None


def _metadata(category: str, entry: Mapping[str, Any]) -> TokenMetadata:
    token = entry.get("token")
    uris = entry.get("uris") or {}
    symbol = token.get("symbol") if isinstance(token, Mapping) else None
    decimals = token.get("decimals") if isinstance(token, Mapping) else None
    return TokenMetadata(
        token_id=category,
        symbol=symbol if isinstance(symbol, str) else None,
        name=entry["name"] if isinstance(entry.get("name"), str) else None,
        decimals=decimals if isinstance(decimals, int) and not isinstance(decimals, bool) else None,
        description=entry["description"] if isinstance(entry.get("description"), str) else None,
        icon=uris.get("icon") if isinstance(uris.get("icon"), str) else None,
        web=uris.get("web") if isinstance(uris.get("web"), str) else None,
    )


class IndexRegistry:
    """Token metadata from the index's on-chain registry entries: per token, the newest
    publication on its authchain with a stored copy, its identity snapshot current at the index
    tip's time (the same entry `/registry/token/<id>` shows). Off-chain sources only show in
    `/registry/token/<id>/all`; they never name a token here."""

    def __init__(self, db_path: Path | str | None = None) -> None:
        # None: not bound yet (`RestConfig` binds its default to its own `db_path`).
        self.db_path = None if db_path is None else Path(db_path)
        self._revision = 0
        self._signature: tuple[Any, ...] | None = None
        self._by_id: dict[str, TokenMetadata] = {}
        self._by_symbol: dict[str, list[TokenMetadata]] = {}
        self._parsed: dict[tuple[bytes, bytes, bytes], Any] = {}  # stored copies, parsed once
        self._lock = asyncio.Lock()

    @property
    def revision(self) -> int:
        return self._revision

    async def sync(self, conn: aiosqlite.Connection, tip: IndexVersion) -> None:
        """Rebuild when the registry tables or the tip (whose time picks each identity's
        current snapshot) changed; bump `revision` only if the entries differ."""
        signature = (tip, *await registry_signature(conn))
        if signature == self._signature:
            return
        async with self._lock:
            if signature == self._signature:
                return
            by_id = await self._load(conn, tip.max_time)
            if by_id != self._by_id:
                by_symbol: dict[str, list[TokenMetadata]] = {}
                for meta in sorted(by_id.values(), key=lambda m: m.token_id):
                    if meta.symbol is not None:
                        by_symbol.setdefault(meta.symbol.casefold(), []).append(meta)
                self._by_id, self._by_symbol = by_id, by_symbol
                self._revision = _digest(sorted(by_id.items()))
            self._signature = signature

    async def _load(self, conn: aiosqlite.Connection, now: int) -> dict[str, TokenMetadata]:
        try:
            rows = list(await conn.execute_fetchall(_DOCUMENTS))
        except sqlite3.OperationalError as exc:
            if _missing_table(exc):
                return {}
            raise
        newest: dict[bytes, Any] = {}
        for row in rows:
            newest[bytes(row[0])] = row  # ordered by seq: the last one is the newest link
        parsed: dict[tuple[bytes, bytes, bytes], Any] = {}
        out: dict[str, TokenMetadata] = {}
        for authbase, txid, expected, actual in newest.values():
            key = (bytes(authbase), bytes(txid), bytes(actual))
            if key in self._parsed:
                doc = self._parsed[key]
            else:
                found = list(await conn.execute_fetchall(_CONTENT, (key[1], key[0])))
                doc = _parse(bytes(found[0][0])) if found else None
            parsed[key] = doc
            category = bytes(authbase).hex()
            snap = identity_snapshot(doc, category, now) if isinstance(doc, dict) else None
            if snap is None:
                continue
            meta = FileMeta(bytes(expected).hex(), bytes(actual).hex(), "onchain")
            out[category] = _metadata(category, flatten_entry(snap[1], meta))
        self._parsed = parsed  # only the copies still served
        return out

    async def _ensure(self) -> None:
        """Before the watcher's first sync (an app used without its lifespan, or a request
        that beat the first poll): load once through a connection of our own."""
        if self._signature is not None or self.db_path is None:
            return
        async with _own_reader(self.db_path) as conn:
            if conn is None:
                return
            tip = await read_tip(conn)
            if tip is not None:
                await self.sync(conn, tip)

    async def by_symbol(self, symbol: str) -> Sequence[TokenMetadata]:
        await self._ensure()
        return list(self._by_symbol.get(symbol.casefold(), ()))

    async def metadata(self, token_ids: Collection[str]) -> Mapping[str, TokenMetadata]:
        await self._ensure()
        by_id = self._by_id
        return {t: by_id[t] for t in token_ids if t in by_id}


class IndexUsdOracle:
    """USD per BCH from the indexed oracle feed `category` (64-hex, display order): at a time,
    the price standing then — the latest update at or before it — in dollars (the feed's
    cents / 100); None before the feed's first update or without the feed. Answers are cached
    per index version (the token list asks for the same three times at every block)."""

    def __init__(self, category: str | None = None, db_path: Path | str | None = None) -> None:
        # None: not bound yet (`RestConfig` binds its default to `usd_feed` and `db_path`).
        self.category = None if category is None else category.lower()
        self.db_path = None if db_path is None else Path(db_path)
        self._tip: IndexVersion | None = None
        self._cache: dict[int, float | None] = {}

    async def sync(self, conn: aiosqlite.Connection, tip: IndexVersion) -> None:
        if tip != self._tip:
            self._tip, self._cache = tip, {}

    async def usd_per_bch(self, time: int) -> float | None:
        if time in self._cache:
            return self._cache[time]
        if self.category is None or self.db_path is None:
            return None
        tip = self._tip
        async with _own_reader(self.db_path) as conn:
            if conn is None:
                return None
            cents = await cents_at(conn, self.category, time)
        value = None if cents is None else cents / 100
        if tip is not None and self._tip == tip:  # still the version it was read at
            self._cache[time] = value
        return value


async def cents_at(conn: aiosqlite.Connection, category: str, time: int) -> int | None:
    """The feed's price (US cents per BCH) standing at `time`, or None."""
    try:
        rows = list(await conn.execute_fetchall(_PRICE_AT, (bytes.fromhex(category), time)))
    except sqlite3.OperationalError as exc:
        if _missing_table(exc):
            return None
        raise
    return int(rows[0][0]) if rows else None
