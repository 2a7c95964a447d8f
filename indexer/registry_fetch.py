"""The background job that downloads token registries (BCMR) — never on a request path.

For each publication the registry decoder found on an authchain (`registry_publications`), the
job resolves its URIs (`protocols.bcmr.resolve_uri`: https defaults, `ipfs://` through the
configured gateway), downloads with a timeout and a size limit, retries transient failures
(network errors, 429, 5xx) with backoff, and records every attempt in `registry_fetches`:
URL, time, HTTP status, sha256 of the raw bytes, whether it matches the published hash (the
hex-as-ASCII variant was normalised when the publication was parsed), error. The copy served
(`registry_documents`) is the last good one — hash match and valid BCMR v2 JSON — and a later
mismatching fetch never replaces it; while there is no good copy, the last valid-JSON copy is
kept with `matches = 0`. Configured off-chain registries (URLs or local files) are fetched the
same way into `registry_offchain`.

HTTP goes through the standard library (urllib in a worker thread: TLS, redirects, chunked
bodies) so the indexer needs no HTTP client dependency. The job writes on its OWN connection
(never the store's, whose block transactions it must not join); SQLite serialises the two
writers (busy timeout). Times come from `clock` so tests control them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from bch.hashes import sha256
from indexer.store.sql import Sql
from protocols.bcmr import DEFAULT_IPFS_GATEWAY, resolve_uri, validate_registry

log = logging.getLogger("ladle.registry_fetch")
USER_AGENT = "ladle-indexer/registry-fetch"


@dataclass(frozen=True, slots=True)
class OffchainSource:
    """A well-known registry outside any authchain: an http(s) URL, or a local file path."""

    name: str  # the `source` shown in /registry/token/<c>/all
    location: str


@dataclass(frozen=True, slots=True)
class FetchConfig:
    ipfs_gateway: str = DEFAULT_IPFS_GATEWAY
    timeout: float = 10.0  # seconds per attempt
    max_bytes: int = 4 * 1024 * 1024  # a larger registry is refused
    retries: int = 2  # further attempts after a transient failure
    backoff: float = 0.5  # seconds, doubled per retry
    refetch_after: int = 86_400  # re-check a publication fetched successfully this long ago
    retry_after: int = 600  # re-try a publication whose last fetch failed this long ago
    batch: int = 32  # publications per round
    offchain: tuple[OffchainSource, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Download:
    url: str
    status: int | None  # None: no HTTP answer (network error, timeout, local file)
    body: bytes | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.body is not None


_TRANSIENT = {408, 425, 429, 500, 502, 503, 504}


def _get(url: str, timeout: float, max_bytes: int) -> Download:
    """One blocking attempt (run in a thread)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            body = resp.read(max_bytes + 1)
            status = getattr(resp, "status", None)
            if len(body) > max_bytes:
                return Download(url, status, None, f"larger than {max_bytes} bytes")
            return Download(url, status, body, None)
    except urllib.error.HTTPError as exc:
        return Download(url, exc.code, None, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Download(url, None, None, f"{type(exc).__name__}: {reason}")


async def download(url: str, config: FetchConfig) -> Download:
    """GET with retries on transient failures (network errors, 408/425/429/5xx)."""
    delay = config.backoff
    result = Download(url, None, None, "not attempted")
    for attempt in range(config.retries + 1):
        result = await asyncio.to_thread(_get, url, config.timeout, config.max_bytes)
        transient = result.body is None and (result.status is None or result.status in _TRANSIENT)
        if not transient or "larger than" in (result.error or ""):
            return result
        if attempt < config.retries:
            await asyncio.sleep(delay)
            delay *= 2
    return result


def _valid_json(body: bytes) -> bool:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    return not validate_registry(doc)


@dataclass(frozen=True, slots=True)
class Due:
    txid: bytes  # display order, as stored
    authbase: bytes
    expected_hash: bytes
    uris: tuple[str, ...]


class RegistryFetcher:
    def __init__(
        self,
        conn: Sql,
        config: FetchConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
        fetch: Callable[[str, FetchConfig], Any] = download,
    ) -> None:
        self.conn = conn
        self.config = config or FetchConfig()
        self.clock = clock
        self._fetch = fetch

    async def due(self) -> list[Due]:
        """Publications never fetched, or whose last fetch is older than its re-check time."""
        now = int(self.clock())
        rows = await self.conn.execute_fetchall(
            "SELECT p.txid, p.authbase, p.expected_hash, p.uris, "
            "(SELECT max(f.fetched_at) FROM registry_fetches AS f "
            " WHERE f.txid = p.txid AND f.authbase = p.authbase), "
            "(SELECT f.matches FROM registry_fetches AS f "
            " WHERE f.txid = p.txid AND f.authbase = p.authbase ORDER BY f.fetched_at DESC, "
            " f.id DESC LIMIT 1) "
            "FROM registry_publications AS p ORDER BY p.height, p.txid"
        )
        out: list[Due] = []
        for txid, authbase, expected, uris, last, matches in rows:
            if last is not None:
                wait = self.config.refetch_after if matches else self.config.retry_after
                if now - int(last) < wait:
                    continue
            out.append(Due(bytes(txid), bytes(authbase), bytes(expected), tuple(json.loads(uris))))
            if len(out) >= self.config.batch:
                break
        return out

    async def fetch_publication(self, item: Due) -> Download | None:
        """Try each URI in order until one answers with a body; record every attempt."""
        last: Download | None = None
        urls = [u for u in (resolve_uri(x, self.config.ipfs_gateway) for x in item.uris) if u]
        if not urls:
            await self._record(item, "", Download("", None, None, "no fetchable URI"))
            return None
        for url in urls:
            last = await self._fetch(url, self.config)
            assert last is not None
            await self._record(item, url, last)
            if last.ok:
                return last
        return last

    async def _record(self, item: Due, url: str, d: Download) -> None:
        now = int(self.clock())
        actual = None if d.body is None else sha256(d.body)
        matches = actual is not None and actual == item.expected_hash
        await self.conn.execute("BEGIN IMMEDIATE")
        try:
            gone = not list(
                await self.conn.execute_fetchall(
                    "SELECT 1 FROM registry_publications WHERE txid = ? AND authbase = ?",
                    (item.txid, item.authbase),
                )
            )
            if gone:  # a reorg removed it while we were downloading
                await self.conn.execute("COMMIT")
                return
            await self.conn.execute(
                "INSERT INTO registry_fetches (txid, authbase, url, fetched_at, http_status, "
                "actual_hash, size, matches, error) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    *(item.txid, item.authbase, url, now, d.status, actual),
                    *(None if d.body is None else len(d.body), int(matches), d.error),
                ),
            )
            if d.body is not None and actual is not None and _valid_json(d.body):
                # A matching copy always wins; a mismatching one only replaces another
                # mismatching one (never the last good copy).
                await self.conn.execute(
                    "INSERT INTO registry_documents VALUES (?,?,?,?,?,?,?,?) "
                    "ON CONFLICT (txid, authbase) DO UPDATE SET url = excluded.url, "
                    "fetched_at = excluded.fetched_at, http_status = excluded.http_status, "
                    "actual_hash = excluded.actual_hash, matches = excluded.matches, "
                    "content = excluded.content "
                    "WHERE excluded.matches = 1 OR registry_documents.matches = 0",
                    (
                        *(item.txid, item.authbase, url, now, d.status or 200, actual),
                        *(int(matches), d.body),
                    ),
                )
            await self.conn.execute("COMMIT")
        except BaseException:
            await self.conn.execute("ROLLBACK")
            raise

    async def fetch_offchain(self) -> int:
        """Fetch every configured off-chain registry; keep the last valid copy of each."""
        done = 0
        for src in self.config.offchain:
            loc = src.location
            if loc.startswith(("http://", "https://")):
                d = await self._fetch(loc, self.config)
            else:
                d = await asyncio.to_thread(_read_file, Path(loc), self.config.max_bytes)
            valid = d.body is not None and _valid_json(d.body)
            now = int(self.clock())
            error = d.error if d.body is None or valid else "not a valid BCMR v2 registry"
            await self.conn.execute(
                "INSERT INTO registry_offchain VALUES (?,?,?,?,?,?,?) ON CONFLICT (source) DO "
                "UPDATE SET url = excluded.url, fetched_at = excluded.fetched_at, "
                "http_status = excluded.http_status, error = excluded.error, "
                "actual_hash = CASE WHEN excluded.content IS NULL THEN "
                "registry_offchain.actual_hash ELSE excluded.actual_hash END, "
                "content = coalesce(excluded.content, registry_offchain.content)",
                (
                    *(src.name, loc, now, d.status),
                    *(sha256(d.body) if valid and d.body else None, d.body if valid else None),
                    error,
                ),
            )
            done += 1
        return done

    async def run_once(self) -> int:
        """One round: the due publications (and the off-chain sources); returns fetches made."""
        items = await self.due()
        for item in items:
            await self.fetch_publication(item)
        return len(items)

    async def run(
        self,
        interval: float = 60.0,
        offchain_every: int = 60,
        *,
        first_round: asyncio.Event | None = None,
    ) -> None:
        """Forever: a round every `interval` seconds; off-chain sources every N rounds. A round
        fetches everything due, batch after batch (a fresh index catches up in one round);
        `first_round` is set when the first one is over, failed or not."""
        rounds = 0
        while True:
            try:
                if rounds % offchain_every == 0:
                    await self.fetch_offchain()
                while await self.run_once() >= self.config.batch:
                    pass
            except (aiosqlite.Error, OSError) as exc:  # keep the job alive; log and go on
                log.warning("registry fetch round failed: %s", exc)
            if first_round is not None:
                first_round.set()
            rounds += 1
            await asyncio.sleep(interval)


def _read_file(path: Path, max_bytes: int) -> Download:
    try:
        with path.open("rb") as f:
            body = f.read(max_bytes + 1)
    except OSError as exc:
        return Download(str(path), None, None, f"{type(exc).__name__}: {exc}")
    if len(body) > max_bytes:
        return Download(str(path), None, None, f"larger than {max_bytes} bytes")
    return Download(str(path), None, body, None)


async def fetch_all(conn: Sql, config: FetchConfig | None = None) -> int:
    """Fetch everything due until nothing is (tests, and `ladle` one-shot commands)."""
    fetcher = RegistryFetcher(conn, config)
    total = await fetcher.fetch_offchain()
    while n := await fetcher.run_once():
        total += n
    return total


__all__: Sequence[str] = (
    "Download",
    "FetchConfig",
    "OffchainSource",
    "RegistryFetcher",
    "download",
    "fetch_all",
)
