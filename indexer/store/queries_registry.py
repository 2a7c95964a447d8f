"""Registry reads (for `/registry/token/<category>[/all]`). Never fetch: they read what the
background job (`indexer.registry_fetch`) stored.

The on-chain entry of a token: the newest publication on its authchain (highest link) that has
a stored copy, that copy's identity snapshot current at `now`, flattened to the API shape with
`filemeta.{expected_hash, actual_hash, source: "onchain"}`. The copy is the last good one; when
no fetch ever matched the published hash the last valid-JSON copy is served and
`expected_hash != actual_hash` says so. `/all` adds each configured off-chain registry that
describes the identity, with its own `source` and both hashes the stored copy's sha256.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from indexer.store.sql import Sql
from protocols.bcmr import FileMeta, flatten_entry, identity_snapshot


@dataclass(frozen=True, slots=True)
class AuthchainInfo:
    authbase: str
    head_txid: str  # the last link (the authhead unless burned)
    links: int  # links after the authbase
    burned: bool


async def authchain(conn: Sql, category: str) -> AuthchainInfo | None:
    rows = await conn.execute_fetchall(
        "SELECT txid, seq, burned FROM registry_links WHERE authbase = ? ORDER BY seq DESC LIMIT 1",
        (bytes.fromhex(category),),
    )
    for txid, seq, burned in rows:
        return AuthchainInfo(category, bytes(txid).hex(), int(seq), bool(burned))
    return None


def _parse(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return None


async def onchain_entry(conn: Sql, category: str, now: int) -> dict[str, Any] | None:
    """The token's on-chain registry entry, or None."""
    rows = await conn.execute_fetchall(
        "SELECT p.expected_hash, d.actual_hash, d.content FROM registry_publications AS p "
        "JOIN registry_documents AS d ON d.txid = p.txid AND d.authbase = p.authbase "
        "WHERE p.authbase = ? ORDER BY p.seq DESC LIMIT 1",
        (bytes.fromhex(category),),
    )
    for expected, actual, content in rows:
        doc = _parse(bytes(content))
        snap = None if not isinstance(doc, dict) else identity_snapshot(doc, category, now)
        if snap is None:
            return None
        meta = FileMeta(bytes(expected).hex(), bytes(actual).hex(), "onchain")
        return flatten_entry(snap[1], meta)
    return None


async def all_entries(conn: Sql, category: str, now: int) -> list[dict[str, Any]]:
    """Every registry's entry for the token: on-chain first, then off-chain sources by name."""
    out: list[dict[str, Any]] = []
    first = await onchain_entry(conn, category, now)
    if first is not None:
        out.append(first)
    rows = await conn.execute_fetchall(
        "SELECT source, actual_hash, content FROM registry_offchain "
        "WHERE content IS NOT NULL ORDER BY source"
    )
    for source, actual, content in rows:
        doc = _parse(bytes(content))
        snap = None if not isinstance(doc, dict) else identity_snapshot(doc, category, now)
        if snap is not None:
            # Nothing publishes a hash for an off-chain list: the copy its configured source
            # served is the expected one, so both hashes are that copy's (the field stays the
            # string the specification types it as; only on-chain entries can mismatch).
            digest = None if actual is None else bytes(actual).hex()
            meta = FileMeta(digest, digest, str(source))
            out.append(flatten_entry(snap[1], meta))
    return out


async def categories_with_symbol(conn: Sql, symbol: str, now: int) -> list[str]:
    """Tokens whose current on-chain entry has this symbol (a symbol may be shared: the caller
    decides what an ambiguous answer means). Scans the stored copies: one per token with a
    registry, parsed in Python."""
    rows = await conn.execute_fetchall("SELECT DISTINCT authbase FROM registry_documents")
    found = []
    for (authbase,) in rows:
        category = bytes(authbase).hex()
        entry = await onchain_entry(conn, category, now)
        token = None if entry is None else entry.get("token")
        if isinstance(token, dict) and token.get("symbol") == symbol:
            found.append(category)
    return sorted(found)


@dataclass(frozen=True, slots=True)
class FetchRow:
    txid: str
    url: str
    fetched_at: int
    http_status: int | None
    expected_hash: str
    actual_hash: str | None
    matches: bool
    error: str | None


async def fetch_log(conn: Sql, category: str) -> list[FetchRow]:
    """Every fetch attempt of the token's publications, oldest first."""
    rows = await conn.execute_fetchall(
        "SELECT f.txid, f.url, f.fetched_at, f.http_status, p.expected_hash, f.actual_hash, "
        "f.matches, f.error FROM registry_fetches AS f JOIN registry_publications AS p "
        "ON p.txid = f.txid AND p.authbase = f.authbase WHERE f.authbase = ? ORDER BY f.id",
        (bytes.fromhex(category),),
    )
    return [
        FetchRow(
            bytes(r[0]).hex(),
            str(r[1]),
            int(r[2]),
            None if r[3] is None else int(r[3]),
            bytes(r[4]).hex(),
            None if r[5] is None else bytes(r[5]).hex(),
            bool(r[6]),
            None if r[7] is None else str(r[7]),
        )
        for r in rows
    ]
