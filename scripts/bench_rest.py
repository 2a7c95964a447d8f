"""Benchmark of the REST data API on an index of more than a million trades.

    .venv/bin/python scripts/bench_rest.py [--trades 1000000] [--seconds 3] [--runs 3]
                                           [--connections 16] [--cache-dir DIR] [--json out.json]

1. The index: generated directly in SQLite (cached in `--cache-dir`, by default under the
   system temp dir, and reused while its parameters match): 180 days of blocks every 600 s,
   12 tokens, one with 2,000 live pools, 1,000,000 trades through 1–5 pools each (exact Cauldron
   formulas), deposits, withdrawals with re-creation, trader addresses. The rows follow
   docs/index-schema.md (pool lineages, events with before/after states, trades, value locked
   per block, first pools, owners, trader months), written with bulk inserts into a database
   created by `Store.open` (the store's own migrations). The oracle, lending and registry rows
   (`add_protocol_rows`: a BCH/USD Delphi feed updated 5 times a block, a daily rate feed,
   20,000 loans and their actions, a BCMR publication and fetched copy per token) are added to
   a cached index that lacks them, versioned apart so the trades need not be regenerated.
2. Two server processes (uvicorn, one core's worth each time they are measured): `ladle rest`'s
   app as configured in production, and the same with its answer cache disabled (every request
   computed from SQLite; the hourly candle series and the token list, both kept per index
   version, stay on).
3. This process is the load: raw asyncio sockets, HTTP/1.1 keep-alive, `--connections`
   connections each with one request in flight, `Accept-Encoding: gzip` like browsers and
   wallets. Per endpoint: requests/s, p50 and p99 latency, bytes per answer.

Ceilings, measured in the same run on the same server: `/bench/bare`, a trivial Starlette app
(routing and Starlette's default middleware only, in front of ours), and `/bench/ceiling`, a
trivial route inside our app (our middleware: CORS, rate limit check, metrics). Each endpoint
runs `--runs` times, each run right after a run of `/bench/bare`; the reported run is the one
with the median ratio (endpoint ÷ the bare ceiling just before it), which cancels most of the
drift other jobs cause on a shared machine. The rate limit is off (one client IP would be
throttled). Servers start only once their background warmer has prepared the token list and
the candle series (`ladle_rest_warmed_height` in /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from protocols.cauldron.formulas import (  # noqa: E402
    PoolState,
    apply_buy_tokens_exact_out,
    apply_sell_tokens_exact_in,
    lp_fee,
)

GENERATOR_VERSION = 1
DAY = 86_400


# --- the index ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexParams:
    trades: int = 1_000_000
    days: int = 180
    block_interval: int = 600
    tokens: int = 12
    big_pools: int = 2_000  # live pools of token 0
    owners: int = 500
    traders: int = 5_000
    seed: int = 1
    version: int = GENERATOR_VERSION

    def tag(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(text).hexdigest()[:12]


@dataclass
class _Pool:
    txid: bytes  # current UTXO, display order
    vout: int
    lineage: tuple[bytes, int]
    owner: bytes
    category: bytes
    state: PoolState
    height: int
    time: int
    position: int
    via: str


class IndexWriter:
    """Builds the rows the store would write, block by block, and bulk-inserts them."""

    def __init__(self, conn: sqlite3.Connection, p: IndexParams) -> None:
        self.conn = conn
        self.p = p
        self.rng = random.Random(p.seed)
        self.counter = 0
        self.rows: dict[str, list[tuple[Any, ...]]] = {}
        self.pools: dict[bytes, list[_Pool]] = {}  # category -> live pools
        self.owners = [self.rng.randbytes(20) for _ in range(p.owners)]
        self.traders = [self.rng.randbytes(20) for _ in range(p.traders)]
        self.categories = [self.rng.randbytes(32) for _ in range(p.tokens)]
        self.known_owners: set[bytes] = set()
        self.months: set[tuple[str, bytes]] = set()
        self.trades_written = 0

    def _txid(self) -> bytes:
        self.counter += 1
        return hashlib.blake2b(self.counter.to_bytes(8, "little"), digest_size=32).digest()

    def _add(self, table: str, row: tuple[Any, ...]) -> None:
        self.rows.setdefault(table, []).append(row)

    def flush(self) -> None:
        for table, rows in self.rows.items():
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                self.conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        self.rows = {}

    def _spend(self, pool: _Pool, txid: bytes, height: int, t: int, kind: str) -> None:
        s = pool.state
        self._add(
            "cauldron_pools",
            (
                *(pool.txid, pool.vout, *pool.lineage, pool.owner, pool.category),
                *(s.sats, s.tokens, pool.height, pool.time, pool.position, pool.via),
                *(txid, height, t, kind),
            ),
        )

    def _event(
        self,
        txid: bytes,
        seq: int,
        height: int,
        t: int,
        pos: int,
        kind: str,
        pool: _Pool,
        inp: int | None,
        out: int | None,
        before: PoolState | None,
        after: PoolState | None,
        touched: int,
    ) -> None:
        d = (
            (after.sats - before.sats, after.tokens - before.tokens)
            if before and after
            else (None, None)
        )
        fee = lp_fee(before.sats, after.sats) if before and after else None
        self._add(
            "cauldron_events",
            (
                *(txid, seq, height, t, pos, kind, *pool.lineage, pool.owner, pool.category),
                *(inp, out),
                *((before.sats, before.tokens) if before else (None, None)),
                *((after.sats, after.tokens) if after else (None, None)),
                *d,
                *(fee, touched),
            ),
        )

    def _owner_seen(self, pkh: bytes, height: int) -> None:
        if pkh not in self.known_owners:
            self.known_owners.add(pkh)
            self._add("cauldron_owners", (pkh, height))

    def create_pools(
        self, category: bytes, n: int, height: int, t: int, pos: int
    ) -> list[tuple[bytes, int]]:
        """`n` pools of `category`, one SUMMON creation transaction each."""
        made = []
        price = self.rng.uniform(0.001, 50.0)
        for _ in range(n):
            txid = self._txid()
            owner = self.rng.choice(self.owners)
            sats = self.rng.randrange(200_000, 50_000_000)
            tokens = max(1_000, int(sats / price))
            pool = _Pool(
                txid,
                0,
                (txid, 0),
                owner,
                category,
                PoolState(sats, tokens),
                height,
                t,
                pos,
                "summon",
            )
            self.pools.setdefault(category, []).append(pool)
            self._event(txid, 0, height, t, pos, "create", pool, None, 0, None, pool.state, 1)
            self._owner_seen(owner, height)
            made.append((txid, pos))
            pos += 1
        return made

    def trade(self, category: bytes, height: int, t: int, pos: int) -> None:
        txid = self._txid()
        live = self.pools[category]
        n = 1 if self.rng.random() < 0.7 else self.rng.randrange(2, 6)
        chosen = self.rng.sample(range(len(live)), min(n, len(live)))
        buy = self.rng.random() < 0.5
        net_s = net_t = vol_s = vol_t = fees = 0
        for i, index in enumerate(chosen):
            pool = live[index]
            before = pool.state
            share = self.rng.uniform(0.0005, 0.02)
            if buy:
                after = apply_buy_tokens_exact_out(before, max(1, int(before.tokens * share)))
            else:
                after = apply_sell_tokens_exact_in(before, max(1, int(before.tokens * share)))
            self._spend(pool, txid, height, t, "trade")
            new = _Pool(
                txid, i, pool.lineage, pool.owner, category, after, height, t, pos, "continuation"
            )
            live[index] = new
            kind = "buy" if after.sats > before.sats else "sell"
            self._event(txid, i, height, t, pos, kind, new, i, i, before, after, len(chosen))
            ds, dt = after.sats - before.sats, after.tokens - before.tokens
            net_s, net_t = net_s + ds, net_t + dt
            vol_s, vol_t = vol_s + abs(ds), vol_t + abs(dt)
            fees += lp_fee(before.sats, after.sats)
        direction = "buy" if net_s > 0 or (net_s == 0 and net_t < 0) else "sell"
        k = len(chosen)
        self._add(
            "cauldron_trades",
            (txid, category, height, t, pos, direction, net_s, net_t, vol_s, vol_t, fees, k, k),
        )
        self.trades_written += 1
        trader = self.rng.choice(self.traders)
        month = time.strftime("%Y-%m", time.gmtime(t))
        if (month, trader) not in self.months:
            self.months.add((month, trader))
            self._add("cauldron_trader_months", (month, trader, height))

    def deposit(self, category: bytes, height: int, t: int, pos: int) -> None:
        txid = self._txid()
        live = self.pools[category]
        index = self.rng.randrange(len(live))
        pool = live[index]
        before = pool.state
        after = PoolState(before.sats + before.sats // 10, before.tokens + before.tokens // 10)
        self._spend(pool, txid, height, t, "trade")
        new = _Pool(
            txid, 0, pool.lineage, pool.owner, category, after, height, t, pos, "continuation"
        )
        live[index] = new
        self._event(txid, 0, height, t, pos, "deposit", new, 0, 0, before, after, 1)

    def withdraw_and_recreate(self, category: bytes, height: int, t: int, pos: int) -> None:
        """The owner withdraws and re-creates a smaller pool (a new lineage): count unchanged."""
        txid = self._txid()
        live = self.pools[category]
        index = self.rng.randrange(len(live))
        pool = live[index]
        self._spend(pool, txid, height, t, "withdraw")
        self._event(txid, 0, height, t, pos, "withdraw", pool, 0, None, pool.state, None, 2)
        state = PoolState(max(10_000, pool.state.sats // 2), max(10, pool.state.tokens // 2))
        new = _Pool(
            txid, 1, (txid, 1), pool.owner, category, state, height, t, pos, "withdraw_recreate"
        )
        live[index] = new
        self._event(txid, 1, height, t, pos, "create", new, None, 1, None, state, 2)

    def build(self) -> None:
        p, rng = self.p, self.rng
        blocks = p.days * DAY // p.block_interval
        end = int(time.time()) // 3600 * 3600
        start = end - p.days * DAY
        weights = [0.35] + [0.65 / (p.tokens - 1)] * (p.tokens - 1)
        prev = bytes(32)
        tvl: dict[bytes, list[int]] = {}
        for h in range(blocks + 1):
            t = start + h * p.block_interval
            block_hash = hashlib.sha256(b"bench" + h.to_bytes(8, "little")).digest()
            pos = 1  # the coinbase is at 0
            touched: set[bytes] = set()
            if h == 1:
                for i, cat in enumerate(self.categories):
                    n = p.big_pools if i == 0 else rng.randrange(20, 200)
                    made = self.create_pools(cat, n, h, t, pos)
                    self._add("cauldron_tokens", (cat, h, t, made[0][1], 0, made[0][0], 0))
                    pos += n
                    touched.add(cat)
            elif h > 1:
                goal = self.p.trades * h // blocks - self.trades_written
                for _ in range(goal):
                    cat = rng.choices(self.categories, weights)[0]
                    self.trade(cat, h, t, pos)
                    touched.add(cat)
                    pos += 1
                if rng.random() < 0.05:
                    cat = rng.choice(self.categories)
                    self.deposit(cat, h, t, pos)
                    touched.add(cat)
                    pos += 1
                if rng.random() < 0.02:
                    cat = rng.choice(self.categories)
                    self.withdraw_and_recreate(cat, h, t, pos)
                    touched.add(cat)
                    pos += 1
            header = block_hash + bytes(48)
            self._add("blocks", (h, block_hash, prev, t, t, pos, header))
            for cat in touched:
                live = self.pools[cat]
                tvl[cat] = [sum(x.state.sats for x in live), sum(x.state.tokens for x in live)]
                self._add("cauldron_tvl", (cat, h, t, *tvl[cat], len(live)))
            prev = block_hash
            if h % 500 == 0:
                self.flush()
                if h % 5000 == 0:
                    print(f"  block {h:,}/{blocks:,}, {self.trades_written:,} trades", flush=True)
        for live in self.pools.values():
            for pool in live:
                s = pool.state
                self._add(
                    "cauldron_pools",
                    (
                        *(pool.txid, pool.vout, *pool.lineage, pool.owner, pool.category),
                        *(s.sats, s.tokens, pool.height, pool.time, pool.position, pool.via),
                        *(None, None, None, None),
                    ),
                )
        self.flush()


async def build_index(path: Path, p: IndexParams) -> None:
    from indexer.index import open_store

    tmp = path.with_suffix(".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    store = await open_store(tmp)  # the store's own migrations: tables and indexes
    await store.close()
    conn = sqlite3.connect(tmp, isolation_level=None)
    # A scratch file until renamed: no journal, no fsync, and a cache big enough that random
    # txid keys do not make SQLite spill and rewrite index pages over and over.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -4000000")
    conn.execute("BEGIN")
    IndexWriter(conn, p).build()
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA journal_mode = WAL")  # as the indexer leaves it
    conn.close()
    tmp.rename(path)


PROTOCOLS_VERSION = 3  # of `add_protocol_rows`: recorded in the index, rows redone on change
ORACLE_UPDATES_PER_BLOCK = 5  # the BCH/USD feed re-created about every 2 minutes
LOANS = 20_000  # lending loans opened over the 180 days (v1 and v11), ~2.5 actions each


def add_protocol_rows(path: Path, p: IndexParams) -> None:
    """The oracle, lending and registry rows of the bench index, added to a cached index that
    lacks them (their generator is versioned apart from the trades', so a cached 1M-trade index
    need not be rebuilt). Shaped as the decoders write them (docs/index-schema.md): a Delphi
    BCH/USD feed with `ORACLE_UPDATES_PER_BLOCK` updates a block and a daily interest-rate feed,
    `LOANS` loans with their actions (borrow, add collateral, refinance, then repay,
    liquidation or redeem unless still live), and an authchain, a BCMR publication and its
    fetched, matching copy (the devnet scenario's document) for every token."""
    from devnet.scenario.registry import registry_document
    from protocols.lending.v1 import RateCommitment
    from protocols.oracle import DelphiCommitment

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (key TEXT PRIMARY KEY, value INTEGER)")
    row = conn.execute("SELECT value FROM bench_meta WHERE key = 'protocols'").fetchone()
    if row is not None and row[0] == PROTOCOLS_VERSION:
        conn.close()
        return
    began = time.perf_counter()
    rng = random.Random(p.seed + 1)
    blocks = conn.execute("SELECT height, time FROM blocks ORDER BY height").fetchall()
    # Each added transaction's position: after the block's own (its tx_count is left as is).
    positions = dict(conn.execute("SELECT height, tx_count FROM blocks").fetchall())

    def position(height: int) -> int:
        positions[height] += 1
        return int(positions[height] - 1)

    tokens = [bytes(r[0]) for r in conn.execute("SELECT category FROM cauldron_tokens")]
    conn.execute("BEGIN")
    for table in (
        "oracle_updates",
        "lending_actions",
        "lending_loans",
        "registry_documents",
        "registry_fetches",
        "registry_publications",
        "registry_links",
    ):
        conn.execute(f"DELETE FROM {table}")

    def txid() -> bytes:
        return rng.randbytes(32)

    # Oracles: the BCH/USD Delphi feed (a random walk of cents per BCH) and the rate feed.
    feed, rate_feed = _feed_category(p, "usd"), _feed_category(p, "rate")
    price, seq = 45_000, 0
    updates: list[tuple[Any, ...]] = []
    for h, t in blocks[1:]:
        for k in range(ORACLE_UPDATES_PER_BLOCK):
            seq += 1
            price = max(1_000, price + rng.randrange(-150, 151))
            when = t - 600 + (k + 1) * 600 // ORACLE_UPDATES_PER_BLOCK
            c = DelphiCommitment(when, 0, seq, price)
            pos = position(h)
            updates.append((txid(), 0, feed, "delphi", h, t, pos, when, seq, price, 0, c.encode()))
        if h % 144 == 0:
            bp = rng.randrange(300, 1_500)
            commitment = RateCommitment(t, 0, bp).encode()
            pos = position(h)
            updates.append((txid(), 0, rate_feed, "rate", h, t, pos, t, t, bp, 0, commitment))
    conn.executemany(f"INSERT INTO oracle_updates VALUES ({', '.join('?' * 12)})", updates)

    # Lending: each loan a lineage of UTXOs (one per action that keeps it open).
    opened: dict[tuple[bytes, int], tuple[Any, ...]] = {}
    spent: dict[tuple[bytes, int], tuple[Any, ...]] = {}
    actions = []
    last = len(blocks) - 1
    for n in range(LOANS):
        version = "v11" if n % 3 else "v1"
        borrower = rng.randbytes(32)
        delegate = rng.randbytes(32) if version == "v11" and rng.random() < 0.2 else None
        h = rng.randrange(12, last)
        principal = rng.randrange(1_000, 500_000)  # cents
        # (collateral sats, principal cents, rate bp, loan_ts)
        state: tuple[int, int, int, int] = (
            *(principal * rng.randrange(300, 600), principal, rng.randrange(300, 1_500)),
            blocks[h][1],
        )
        steps = ["borrow", *rng.sample(["add_collateral", "refinance"], rng.randrange(0, 3))]
        end = rng.random()
        if end < 0.7:
            steps.append("repay" if end < 0.55 else "liquidation" if end < 0.65 else "redeem")
        prev: tuple[bytes, int] | None = None
        for kind in steps:
            if kind != "borrow":
                h = min(last, h + rng.randrange(1, 4_000))
            t = blocks[h][1]
            tx, pos = txid(), position(h)
            before = state
            if kind == "add_collateral":
                state = (state[0] + state[0] // 4, state[1], state[2], state[3])
            elif kind == "refinance":
                state = (state[0], state[1] + rng.randrange(50_000), rng.randrange(300, 1_500), t)
            closes = kind in ("repay", "liquidation", "redeem")
            if prev is not None:
                spent[prev] = (tx, h, t, kind)
            b = None if kind == "borrow" else before
            after = None if closes else state
            interest = None if b is None else b[1] * b[2] * max(0, t - b[3]) // 315_360_000_000
            actions.append(
                (
                    *(tx, 0, h, t, t - 3_000, pos, version, kind, borrower, delegate),
                    *(None if b is None else 0, None if after is None else 0),
                    *(None if b is None else b[0], None if after is None else after[0]),
                    *(None if b is None else b[1], None if after is None else after[1]),
                    *(None if b is None else b[2], None if after is None else after[2]),
                    *(None if b is None else b[3], None if after is None else after[3]),
                    interest,
                )
            )
            if not closes:
                prev = (tx, 0)
                collateral, principal, rate, loan_ts = state
                opened[prev] = (version, borrower, delegate, principal, rate, loan_ts, collateral)
                opened[prev] += (h, t, t - 3_000, pos)
    loans = [(*k, *v, *spent.get(k, (None, None, None, None))) for k, v in opened.items()]
    conn.executemany(f"INSERT INTO lending_loans VALUES ({', '.join('?' * 17)})", loans)
    conn.executemany(f"INSERT INTO lending_actions VALUES ({', '.join('?' * 21)})", actions)

    # Registries: every token's authchain (genesis link), its BCMR publication and the
    # fetched copy, which matches the published hash.
    for i, cat in enumerate(tokens):
        h, t = blocks[1]
        doc = registry_document(
            category_hex=cat.hex(),
            name=f"Bench token {i}",
            symbol=f"BENCH{i}",
            decimals=rng.randrange(0, 9),
            description=f"Token {i} of the REST benchmark's index",
            published=t,
            web=f"https://bench{i}.example",
        )
        digest = hashlib.sha256(doc).digest()
        link = txid()
        url = f"https://bench{i}.example/bitcoin-cash-metadata-registry.json"
        conn.execute("INSERT INTO registry_links VALUES (?, 1, ?, ?, ?, 0)", (cat, link, h, t))
        conn.execute(
            "INSERT INTO registry_publications VALUES (?, ?, 1, 0, ?, 'digest', ?, ?, ?)",
            (link, cat, digest, json.dumps([url]), h, t),
        )
        conn.execute(
            "INSERT INTO registry_fetches (txid, authbase, url, fetched_at, http_status, "
            "actual_hash, size, matches, error) VALUES (?, ?, ?, ?, 200, ?, ?, 1, NULL)",
            (link, cat, url, t + 60, digest, len(doc)),
        )
        conn.execute(
            "INSERT INTO registry_documents VALUES (?, ?, ?, ?, 200, ?, 1, ?)",
            (link, cat, url, t + 60, digest, doc),
        )
    conn.execute("INSERT OR REPLACE INTO bench_meta VALUES ('protocols', ?)", (PROTOCOLS_VERSION,))
    conn.execute("COMMIT")
    for table in ("oracle_updates", "lending_actions", "lending_loans", "registry_publications"):
        conn.execute(f"ANALYZE {table}")
    conn.close()
    print(
        f"  oracle, lending and registry rows added in {time.perf_counter() - began:.0f} s "
        f"({len(updates):,} oracle updates, {len(loans):,} loan UTXOs, {len(actions):,} "
        f"lending actions, {len(tokens)} registries)",
        flush=True,
    )


def _feed_category(p: IndexParams, name: str) -> bytes:
    return hashlib.sha256(f"bench-feed:{p.seed}:{name}".encode()).digest()


async def upgrade_index(path: Path) -> None:
    """Bring a cached index to the current schema the way the indexer would (`Store.open`
    applies the migrations it has not seen; a no-op when it is current)."""
    from indexer.index import open_store

    began = time.perf_counter()
    store = await open_store(path)
    await store.close()
    print(f"  index opened by the store (migrations) in {time.perf_counter() - began:.1f} s")


def index_facts(path: Path) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    q = conn.execute
    big = q(
        "SELECT category, count(*) c FROM cauldron_pools WHERE spent_height IS NULL "
        "GROUP BY category ORDER BY c DESC LIMIT 1"
    ).fetchone()
    tip = q("SELECT max(height), max(max_time) FROM blocks").fetchone()
    facts = {
        "trades": q("SELECT count(*) FROM cauldron_trades").fetchone()[0],
        "events": q("SELECT count(*) FROM cauldron_events").fetchone()[0],
        "pool_utxos": q("SELECT count(*) FROM cauldron_pools").fetchone()[0],
        "blocks": tip[0] + 1,
        "tip_time": tip[1],
        "big_token": bytes(big[0]).hex(),
        "big_token_pools": big[1],
        "tokens": q("SELECT count(*) FROM cauldron_tokens").fetchone()[0],
        "size_mb": round(path.stat().st_size / 1e6, 1),
    }
    facts["oracle_updates"] = q("SELECT count(*) FROM oracle_updates").fetchone()[0]
    facts["lending_actions"] = q("SELECT count(*) FROM lending_actions").fetchone()[0]
    facts["usd_feed"] = _feed_category(IndexParams(), "usd").hex()
    facts["registry_tokens"] = [
        bytes(r[0]).hex()
        for r in q("SELECT DISTINCT authbase FROM registry_documents ORDER BY authbase")
    ]
    facts["big_token_trades_30d"] = q(
        "SELECT count(*) FROM cauldron_trades WHERE category = ? AND time > ?",
        (big[0], tip[1] - 30 * DAY),
    ).fetchone()[0]
    conn.close()
    return facts


# --- the servers ----------------------------------------------------------------------------------


def bench_app(arg: tuple[str, bool, int]) -> Any:
    """The app of one server worker: `ladle rest`'s production app (rate limit off, answer cache
    on or off) behind `/bench/bare` and `/bench/blob/<n>`. Its clock starts at the index tip's
    time (`arg`: database, cache, tip time), so "the last 30 days" means the index's last 30
    days however old the cached index is."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    from rest.app import create_app
    from rest.config import RestConfig

    db, cache, tip_time = arg

    async def bare_endpoint(request: Request) -> Response:
        return PlainTextResponse("ok")

    blobs: dict[int, bytes] = {}

    async def blob_endpoint(request: Request) -> Response:
        """`n` incompressible bytes: what a transfer of that size costs, with no work."""
        n = int(request.path_params["n"])
        if n not in blobs:
            blobs[n] = random.Random(n).randbytes(n)
        return Response(blobs[n], media_type="application/octet-stream")

    bare = Starlette(
        routes=[Route("/bench/bare", bare_endpoint), Route("/bench/blob/{n:int}", blob_endpoint)]
    )
    offset = time.time() - tip_time
    config = RestConfig(
        db_path=db,
        rate_limit=0,
        stale_after=0,
        bench_ceiling=True,
        cache_entries=4096 if cache else 0,
        clock=lambda: time.time() - offset,
    )
    api = create_app(config)

    async def front(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/bench/b"):
            await bare(scope, receive, send)
        else:
            await api(scope, receive, send)

    return front


def serve_main(db: str, cache: bool, tip_time: int, workers: int) -> int:
    """`--serve`: one server, `workers` processes on one socket as `ladle rest --workers`
    runs them (`runtime.workers`); prints its ready line once every worker listens."""
    from runtime.workers import serve_workers

    return serve_workers(
        bench_app,
        (db, cache, tip_time),
        host="127.0.0.1",
        port=0,
        workers=workers,
        name="bench",
        announce=lambda url: {"port": int(url.rsplit(":", 1)[1])},
        log_level="warning",
    )


async def start_server(
    db: Path, cache: bool, tip_time: int, workers: int = 1
) -> tuple[asyncio.subprocess.Process, int]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        str(db),
        str(tip_time),
        str(workers),
        *([] if cache else ["--no-cache"]),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    port = int(json.loads(await proc.stdout.readline())["port"])
    for _ in range(500):  # until it accepts connections
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            break
        except OSError:
            await asyncio.sleep(0.02)
    began = time.perf_counter()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        while "ladle_rest_warmed_height " not in (await client.get("/metrics")).text:
            await asyncio.sleep(0.2)  # the background warmer: token list and candle series
    print(f"  server warmed up in {time.perf_counter() - began:.1f} s", flush=True)
    return proc, port


async def answer_size(port: int, path: str) -> int:
    """Bytes on the wire of one gzip answer."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        r = await client.get(path, headers={"Accept-Encoding": "gzip"})
        r.raise_for_status()
        return int(r.headers["content-length"])


# --- the load -------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    server: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    bytes_per_answer: int
    ceiling_rps: float | None = None  # the bare ceiling measured right before this run
    ratio: float | None = None  # rps / ceiling_rps (median over the paired runs)
    client_cpu: float | None = None  # this process's CPU seconds per second of the run
    server_cpu: float | None = None  # the server's (all its processes) CPU seconds per second
    cpu_ratio: float | None = None  # bare ceiling's server CPU per request ÷ this one's


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive HTTP/1.1 connection of the load generator. Answers are received into one
    reusable buffer and only their length is kept: on a 2-core machine the client shares the
    CPU with the server, so a client that copies every 300 kB answer twice (StreamReader)
    measures itself as much as the server."""

    def __init__(self) -> None:
        self.buffer = bytearray(1 << 21)
        self.view = memoryview(self.buffer)
        self.used = 0
        self.need = -1  # bytes of the current answer (head and body), -1 until its head is in
        self.status = 0
        self.size = 0
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, int]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.used == len(self.buffer):  # an answer larger than the buffer: grow it
            self.buffer.extend(bytes(len(self.buffer)))
            self.view = memoryview(self.buffer)
        return self.view[self.used :]

    def buffer_updated(self, nbytes: int) -> None:
        self.used += nbytes
        if self.need < 0:
            end = self.buffer.find(b"\r\n\r\n", 0, self.used)
            if end < 0:
                return
            head = bytes(self.buffer[:end])
            self.status = int(head[9:12])
            self.size = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    self.size = int(line[15:])
            self.need = end + 4 + self.size
        if self.used >= self.need and self.waiter is not None:
            extra = self.used - self.need  # never more than a pipelined answer; none here
            self.buffer[:extra] = self.buffer[self.need : self.used]
            self.used, self.need = extra, -1
            waiter, self.waiter = self.waiter, None
            waiter.set_result((self.status, self.size))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("the server closed the connection"))

    def request(self, path: str) -> asyncio.Future[tuple[int, int]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(
            f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\n\r\n".encode()
        )
        return self.waiter


_CURSORS: dict[int, int] = {}
GENERATOR = ["python"]  # the load generator of `load`: "python" (this process) or "wrk"

# wrk (a C load generator: `apt install wrk`): the paths of a workload in turn, from a file.
WRK_SCRIPT = """
local paths = {}
for line in io.lines(os.getenv("BENCH_PATHS")) do paths[#paths + 1] = line end
wrk.headers["Accept-Encoding"] = "gzip"
if #paths == 1 then
  wrk.path = paths[1]  -- one request, built once by wrk
else
  local i = 0
  request = function()
    i = i + 1
    return wrk.format("GET", paths[(i - 1) % #paths + 1])
  end
end
"""


async def paired(
    runs: int,
    port: int,
    name: str,
    server: str,
    paths: list[str],
    seconds: float,
    conns: int,
    pid: int | None = None,
) -> Result:
    """`runs` pairs of (bare ceiling, endpoint) runs back to back; the pair with the median
    ratio is reported. Pairing cancels the load other jobs put on the machine, which moves
    absolute rates by a factor of two between minutes on a shared 2-core host. With the
    server's `pid`, also `cpu_ratio`: the server's CPU per bare request ÷ its CPU per request
    of the endpoint (median over the pairs), what the ratio would be on an idle machine."""
    pairs, cpu_ratios = [], []
    for _ in range(runs):
        ceiling = await load(port, "ceiling", server, ["/bench/bare"], seconds, conns, pid)
        r = await load(port, name, server, paths, seconds, conns, pid)
        r.ceiling_rps = ceiling.rps
        r.ratio = round(r.rps / ceiling.rps, 3)
        pairs.append(r)
        if ceiling.server_cpu and r.server_cpu:
            cpu_ratios.append((ceiling.server_cpu / ceiling.rps) / (r.server_cpu / r.rps))
    pairs.sort(key=lambda r: r.ratio or 0.0)
    best = pairs[len(pairs) // 2]
    if cpu_ratios:
        best.cpu_ratio = round(statistics.median(cpu_ratios), 3)
    return best


async def load(
    port: int,
    name: str,
    server: str,
    paths: list[str],
    seconds: float,
    connections: int,
    server_pid: int | None = None,
) -> Result:
    """Requests from `paths` in turn (continuing where the last call on the same list
    stopped, so a list of distinct URLs is never repeated before it is used up). With
    `server_pid`, also the CPU the server's processes used."""
    if GENERATOR[0] == "wrk":
        return await load_wrk(port, name, server, paths, seconds, connections, server_pid)
    latencies: list[float] = []
    sizes: list[int] = []
    stop_at = 0.0

    async def worker() -> None:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_connection(_Connection, "127.0.0.1", port)
        try:
            while time.perf_counter() < stop_at:
                i = _CURSORS.get(id(paths), 0)
                _CURSORS[id(paths)] = i + 1
                path = paths[i % len(paths)]
                began = time.perf_counter()
                status, size = await conn.request(path)
                if status != 200:
                    raise RuntimeError(f"{path}: HTTP {status}")
                latencies.append(time.perf_counter() - began)
                sizes.append(size)
        finally:
            transport.close()

    stop_at = time.perf_counter() + min(1.0, seconds / 5)  # warm-up (caches, connections)
    await asyncio.gather(*(worker() for _ in range(connections)))
    latencies.clear()
    sizes.clear()
    server_before = tree_cpu(server_pid) if server_pid else 0.0
    client_before = time.process_time()
    began = time.perf_counter()
    stop_at = began + seconds
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.perf_counter() - began
    client = (time.process_time() - client_before) / elapsed
    served = (tree_cpu(server_pid) - server_before) / elapsed if server_pid else None
    q = statistics.quantiles(latencies, n=100)
    return Result(
        name,
        server,
        len(latencies),
        round(elapsed, 2),
        round(len(latencies) / elapsed),
        round(q[49] * 1000, 2),
        round(q[98] * 1000, 2),
        int(statistics.mean(sizes)),
        client_cpu=round(client, 2),
        server_cpu=round(served, 2) if served is not None else None,
    )


async def load_wrk(
    port: int,
    name: str,
    server: str,
    paths: list[str],
    seconds: float,
    connections: int,
    server_pid: int | None,
) -> Result:
    """`load` with wrk (one thread) as the generator: its CPU per request is a fraction of
    this process's, so on 2 cores it leaves the server more of the machine. The paths go to
    wrk starting where the last run on the same list stopped."""
    start = _CURSORS.get(id(paths), 0) % len(paths)
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        script, listing = Path(tmp) / "paths.lua", Path(tmp) / "paths.txt"
        script.write_text(WRK_SCRIPT)
        listing.write_text("\n".join(paths[start:] + paths[:start]) + "\n")
        url = f"http://127.0.0.1:{port}"
        argv = ["wrk", "-t1", f"-c{connections}", "--latency", "-s", str(script), url]
        env = {**os.environ, "BENCH_PATHS": str(listing)}

        async def wrk(duration: float) -> str:
            proc = await asyncio.create_subprocess_exec(
                *argv, f"-d{max(1, round(duration))}s", stdout=asyncio.subprocess.PIPE, env=env
            )
            out, _ = await proc.communicate()
            return out.decode()

        await wrk(1)  # warm-up (caches, connections)
        server_before = tree_cpu(server_pid) if server_pid else 0.0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        out = await wrk(seconds)
        elapsed = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        served = (tree_cpu(server_pid) - server_before) / elapsed if server_pid else None
    if "Non-2xx" in out:
        raise RuntimeError(f"{name}: answers other than 200:\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    _CURSORS[id(paths)] = start + requests

    def latency_ms(q: str) -> float:
        value, unit = re.search(rf"\s{q}%\s+([\d.]+)(us|ms|s)\b", out).groups()  # type: ignore[union-attr]
        return round(float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit], 2)

    transfer = re.search(r"([\d.]+)([KMG]?B) read", out).groups()  # type: ignore[union-attr]
    scale = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[transfer[1]]
    wrk_seconds = float(re.search(r"requests in ([\d.]+)s", out).group(1))  # type: ignore[union-attr]
    client = (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / elapsed
    return Result(
        name,
        server,
        requests,
        round(wrk_seconds, 2),
        round(requests / wrk_seconds),
        latency_ms("50"),
        latency_ms("99"),
        int(float(transfer[0]) * scale / max(1, requests)),  # with the headers: approximate
        client_cpu=round(client, 2),
        server_cpu=round(served, 2) if served is not None else None,
    )


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by process `pid` and all its descendants (from /proc)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
                parent[int(entry)] = int(fields[1])
                cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in cpu:
        q = p
        while q not in (pid, 0) and q in parent:
            q = parent[q]
        if q == pid:
            total += cpu[p]
    return total


def workloads(facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    big, tip = facts["big_token"], facts["tip_time"]
    # Every request a window no other request asked for (ends 6 s apart over the last week):
    # the answer cache never helps, each answer is computed.
    ends = [tip - 6 * i for i in range(7 * DAY // 6)]
    random.Random(2).shuffle(ends)
    sliding = [
        f"/dex/price/{big}/candlesticks?start={e - 30 * DAY}&end={e}&stepsize=3600" for e in ends
    ]
    # Prices at instants nobody asked for before, anywhere in the 180 days.
    rng = random.Random(3)
    feed = facts["usd_feed"]
    closest = [
        f"/oracle/feed/closest?token_id={feed}&timestamp={tip - rng.randrange(180 * DAY)}"
        for _ in range(100_000)
    ]
    return [
        ("ceiling: trivial Starlette app", ["/bench/bare"]),
        (
            "transfer: trivial Starlette app answering as many bytes as pool/active",
            [f"/bench/blob/{facts['big_token_active_gzip_bytes']}"],
        ),
        ("ceiling: trivial route in our app", ["/bench/ceiling"]),
        ("contract/count", ["/dex/contract/count"]),
        ("price/current", [f"/dex/price/{big}/current"]),
        ("pool/active?token= (2,000 pools)", [f"/dex/pool/active?token={big}"]),
        ("candlesticks 30 d / 1 h (defaults: ending now)", [f"/dex/price/{big}/candlesticks"]),
        ("candlesticks 30 d / 1 h, a new window each request", sliding),
        ("tokens/list_cached", ["/dex/tokens/list_cached"]),
        ("oracle/feed/closest, a new timestamp each request", closest),
        ("lending/history (defaults: the newest 50 v1 actions)", ["/lending/history"]),
        *page_workloads(facts),
        (
            f"registry/token/<c> ({len(facts['registry_tokens'])} tokens in turn)",
            [f"/registry/token/{c}" for c in facts["registry_tokens"]],
        ),
    ]


PAGE_OFFSETS = (0, 30_000)


def page_workloads(facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Every paginated endpoint near offset 0 and near offset 30,000: each request a page no
    other request asked for (offset + 0…49 and page size 1…50 in turn), so the answer cache
    never helps and each page is selected from SQLite (or from the list held in memory)."""
    big, registry = facts["big_token"], facts["registry_tokens"]
    needle = "bench"
    endpoints = [
        ("dex/tx/latest", "/dex/tx/latest?", 500),
        ("dex/tx/latest?token=", f"/dex/tx/latest?token={big}&", 500),
        ("tokenpool/pools", "/tokenpool/pools?", 100_000),
        ("dex/tokens/list_cached", "/dex/tokens/list_cached?", 1_000),
        ("dex/tokens/search_cached", f"/dex/tokens/search_cached?q={needle}&", 100),
        ("dex/tokens/list_by_volume", "/dex/tokens/list_by_volume?", 1_000),
        (
            "dex/tokens/search_by_volume",
            f"/dex/tokens/search_by_volume?search_query={needle}&",
            100,
        ),
        ("lending/v11/history", "/lending/v11/history?", 200),
        ("lending/history", "/lending/history?", 200),
        ("lending/v11/loans/active", "/lending/v11/loans/active?", 200),
        ("lending/loans/active", "/lending/loans/active?", 200),
    ]
    assert registry  # the token search finds the registry names ("Bench token <i>")
    out = []
    for name, prefix, max_limit in endpoints:
        for base in PAGE_OFFSETS:
            pages = [
                f"{prefix}offset={base + o}&limit={min(max_limit, n)}"
                for o in range(50)
                for n in range(1, 51)
            ]
            random.Random(base).shuffle(pages)
            out.append((f"page {name} at offset {base:,}", pages))
    return out


SCALING = (
    "ceiling: trivial route in our app",
    "contract/count",
    "candlesticks 30 d / 1 h, a new window each request",
)


async def scaling(args: argparse.Namespace, db: Path, facts: dict[str, Any]) -> list[Any]:
    """`--workers 1,2`: one server per worker count, all started at once and measured in
    turn (each run of an endpoint right after its bare ceiling on the same server), so every
    count sees the same minutes of the machine. Per count the run with the median endpoint
    rate; the speedup is the median over runs of (rate with n workers ÷ rate with the first
    count) of runs made back to back."""
    counts = [int(n) for n in args.workers.split(",")]
    servers = []
    try:
        for n in counts:
            proc, port = await start_server(db, True, facts["tip_time"], n)
            servers.append((n, proc, port))
        for n, _proc, port in servers:
            await load(port, "warm-up", f"{n}", ["/bench/bare"], 2, args.connections)
        if "big_token_active_gzip_bytes" not in facts:  # for `workloads`, not measured here
            big = facts["big_token"]
            facts["big_token_active_gzip_bytes"] = await answer_size(
                servers[0][2], f"/dex/pool/active?token={big}"
            )
        rows: list[Any] = []
        for name, paths in workloads(facts):
            if name not in SCALING or (
                args.only and not any(w in name for w in args.only.split(","))
            ):
                continue
            runs: dict[int, list[Result]] = {n: [] for n in counts}
            for _ in range(args.runs):
                for n, proc, port in servers:
                    server = f"{n} worker(s)"
                    conns = args.connections
                    ceiling = await load(
                        port, "ceiling", server, ["/bench/bare"], args.seconds, conns, proc.pid
                    )
                    r = await load(port, name, server, paths, args.seconds, conns, proc.pid)
                    r.ceiling_rps = ceiling.rps
                    r.ratio = round(r.rps / ceiling.rps, 3)
                    runs[n].append(r)
            first = runs[counts[0]]
            for n in counts:
                ordered = sorted(runs[n], key=lambda r: r.rps)
                row = asdict(ordered[len(ordered) // 2])
                row["workers"] = n
                row["speedup"] = round(
                    statistics.median(r.rps / b.rps for r, b in zip(runs[n], first, strict=True)),
                    2,
                )
                row["ceiling_speedup"] = round(
                    statistics.median(
                        (r.ceiling_rps or 0) / (b.ceiling_rps or 1)
                        for r, b in zip(runs[n], first, strict=True)
                    ),
                    2,
                )
                rows.append(row)
                print(
                    f"  [{n} worker(s)] {name}: {row['rps']} req/s (ceiling {row['ceiling_rps']})"
                    f", ×{row['speedup']} (ceiling ×{row['ceiling_speedup']}), client CPU "
                    f"{row['client_cpu']}, server CPU {row['server_cpu']}",
                    flush=True,
                )
        return rows
    finally:
        for _, proc, _ in servers:
            proc.send_signal(signal.SIGINT)
            await proc.wait()


def scaling_table(rows: list[Any]) -> str:
    lines = [
        "| endpoint | workers | req/s | p50 ms | p99 ms | ceiling req/s | ÷ ceiling | speedup "
        "| ceiling speedup | server CPU | client CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['workers']} | {r['rps']:,} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['ceiling_rps']:,} | {r['ratio']:.2f} | {r['speedup']:.2f} | "
            f"{r['ceiling_speedup']:.2f} | {r['server_cpu']:.2f} | {r['client_cpu']:.2f} |"
        )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    params = IndexParams(trades=args.trades)
    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    db = cache_dir / f"bench-rest-{params.tag()}.sqlite"
    if not db.exists():
        print(f"building the index ({params.trades:,} trades) in {db} …", flush=True)
        began = time.perf_counter()
        await build_index(db, params)
        print(f"  built in {time.perf_counter() - began:.0f} s", flush=True)
    await upgrade_index(db)
    add_protocol_rows(db, params)
    facts = index_facts(db)
    print("index:", json.dumps(facts), flush=True)
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    if args.workers:
        rows = await scaling(args, db, facts)
        return {
            "machine": machine,
            "index": facts,
            "connections": args.connections,
            "seconds": args.seconds,
            "runs": args.runs,
            "scaling": rows,
        }
    results: list[Result] = []
    servers = [("cached", True), ("no answer cache", False)][: 1 if args.cached_only else 2]
    for server, cache in servers:
        proc, port = await start_server(db, cache, facts["tip_time"])
        try:
            if "big_token_active_gzip_bytes" not in facts:
                facts["big_token_active_gzip_bytes"] = await answer_size(
                    port, f"/dex/pool/active?token={facts['big_token']}"
                )
            await load(port, "warm-up", server, ["/bench/bare"], 2, args.connections)
            for name, paths in workloads(facts):
                if name.startswith("ceiling: trivial Starlette") or (
                    not cache and name.startswith(("ceiling", "transfer"))
                ):
                    continue
                if args.only and not any(w in name for w in args.only.split(",")):
                    continue
                r = await paired(
                    args.runs, port, name, server, paths, args.seconds, args.connections, proc.pid
                )
                results.append(r)
                print(
                    f"  [{server}] {name}: {r.rps} req/s (ceiling {r.ceiling_rps}, ratio "
                    f"{r.ratio}, CPU ratio {r.cpu_ratio}), p50 {r.p50_ms} ms, p99 {r.p99_ms} ms, "
                    f"{r.bytes_per_answer} B",
                    flush=True,
                )
        finally:
            proc.send_signal(signal.SIGINT)
            await proc.wait()
    return {
        "machine": machine,
        "params": asdict(params),
        "index": facts,
        "connections": args.connections,
        "seconds": args.seconds,
        "runs": args.runs,
        "results": [asdict(r) for r in results],
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        "| server | endpoint | req/s | p50 ms | p99 ms | bytes (gzip) | ceiling req/s | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['server']} | {r['name']} | {r['rps']:,} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['bytes_per_answer']:,} | {r['ceiling_rps']:,} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) >= 5 and sys.argv[1] == "--serve":
        cache = "--no-cache" not in sys.argv
        sys.exit(serve_main(sys.argv[2], cache, int(sys.argv[3]), int(sys.argv[4])))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trades", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=3.0, help="per run")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3, help="paired runs per endpoint")
    parser.add_argument(
        "--cache-dir", default=str(Path(tempfile.gettempdir()) / "ladle-bench-rest")
    )
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--only", help="comma-separated parts of workload names to run")
    parser.add_argument(
        "--cached-only", action="store_true", help="skip the server without an answer cache"
    )
    parser.add_argument(
        "--workers",
        help="compare server worker counts side by side, e.g. 1,2 (the scaling rows only)",
    )
    parser.add_argument(
        "--generator",
        choices=("python", "wrk"),
        default="python",
        help="the load: this process (default), or wrk (a C generator, `apt install wrk`)",
    )
    args = parser.parse_args()
    if args.generator == "wrk" and shutil.which("wrk") is None:
        parser.error("--generator wrk: no wrk on PATH")
    GENERATOR[0] = args.generator
    report = asyncio.run(run(args))
    print(scaling_table(report["scaling"]) if args.workers else table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
