"""Candles from the in-memory series (trade arrays, hourly buckets, deflated days) equal candles
computed naively from the trades SQLite holds, for random windows and steps, while the index
grows (header times out of order included) and after a reorg; spliced gzip members decode to
the plain answer."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import random
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer.index import open_store
from rest.cache import deflate_piece, gzip_join
from rest.candles import CANDLES, DAY, HISTORY, HOUR, CandleStore, Trades
from rest.db import ReaderPool
from tests.rest.conftest import World

TOKENS = [bytes([0xA0 + i]) * 32 for i in range(2)]
T0 = 1_700_000_000 - 1_700_000_000 % DAY + 5 * HOUR  # starts mid-day
BLOCKS = 300  # ~ 12.5 days at 3600 s, with jitter


def _block_time(h: int, rng: random.Random) -> int:
    # Header times are not monotonic: up to 2 h before the previous block's.
    return T0 + h * 3600 + rng.randrange(-7200, 1800)


def _rows(heights: range, seed: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(blocks, cauldron_trades) rows for `heights` (deterministic per seed and height)."""
    blocks, trades = [], []
    for h in heights:
        rng = random.Random(seed * 1_000_003 + h)
        t = _block_time(h, rng)
        blocks.append((h, hashlib.sha256(f"{seed}:{h}".encode()).digest(), t))
        for pos in range(1, rng.randrange(1, 6)):
            cat = rng.choice(TOKENS)
            txid = hashlib.sha256(f"{seed}:{h}:{pos}".encode()).digest()
            vs, vt = rng.randrange(1, 10**8), rng.randrange(1, 10**10)
            trades.append((txid, cat, h, t, pos, "buy", vs, -vt, vs, vt, 0, 1, 1))
    return blocks, trades


def _write(db: Path, blocks: list[tuple[Any, ...]], trades: list[tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    prev = conn.execute("SELECT hash, max_time FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
    prev_hash, max_time = (bytes(32), 0) if prev is None else (prev[0], prev[1])
    for h, hash_, t in blocks:
        max_time = max(max_time, t)
        conn.execute(
            "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?)",
            (h, hash_, prev_hash, t, max_time, 1, bytes(80)),
        )
        prev_hash = hash_
    conn.executemany(f"INSERT INTO cauldron_trades VALUES ({', '.join('?' * 13)})", trades)
    conn.execute("COMMIT")
    conn.close()


def _undo_above(db: Path, height: int) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM cauldron_trades WHERE height > ?", (height,))
    conn.execute("DELETE FROM blocks WHERE height > ?", (height,))
    conn.close()


async def _new_index(db: Path) -> None:
    store = await open_store(db)  # the schema, through the store's migrations
    await store.close()


def naive(db: Path, cat: bytes, start: int, end: int, step: int, kind: str) -> list[Any]:
    """The answer computed from the table alone: trades in (time, height, position) order,
    grouped by interval."""
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT time, volume_sats, volume_tokens FROM cauldron_trades "
        "WHERE category = ? AND time BETWEEN ? AND ? ORDER BY time, height, position",
        (cat, start, end),
    ).fetchall()
    conn.close()
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for r in rows:
        groups.setdefault(r[0] - r[0] % step, []).append(r)
    out: list[Any] = []
    for at, g in sorted(groups.items()):
        prices = [vs / vt for _, vs, vt in g]
        vs_sum, vt_sum = sum(r[1] for r in g), sum(r[2] for r in g)
        if kind == CANDLES:
            out.append(
                {
                    "time": at,
                    "open": prices[0],
                    "high": max(prices),
                    "low": min(prices),
                    "close": prices[-1],
                    "volume_sats": vs_sum,
                    "volume_tokens": vt_sum,
                    "transaction_count": len(g),
                }
            )
        else:
            out.append({"time": at, "avg": vs_sum / vt_sum, "max": max(prices), "min": min(prices)})
    return out


async def render(
    pool: ReaderPool, store: CandleStore, cat: bytes, start: int, end: int, step: int, kind: str
) -> list[Any]:
    async with pool.snapshot() as snap:
        answer = await store.render(snap.conn, snap.tip, cat.hex(), start, end, step, kind)
    if answer.gzipped is not None:
        assert gzip.decompress(answer.gzipped) == answer.data
    body: dict[str, list[Any]] = orjson.loads(answer.data)
    assert list(body) == [kind]
    return body[kind]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("candles") / "index.sqlite"
    asyncio.run(_new_index(db))
    _write(db, *_rows(range(BLOCKS), seed=1))
    return db


windows = st.tuples(
    st.integers(T0 - DAY, T0 + BLOCKS * HOUR + DAY),  # start
    st.integers(0, 12 * DAY),  # length
    st.sampled_from([60, 900, 5400, HOUR, 2 * HOUR, 3 * HOUR, DAY, 7 * DAY]),
    st.sampled_from([CANDLES, HISTORY]),
    st.sampled_from(TOKENS),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(windows, min_size=1, max_size=8))
def test_any_window_and_step_equals_the_naive_candles(
    index: Path, asked: list[tuple[int, int, int, str, bytes]]
) -> None:
    async def check() -> None:
        pool = ReaderPool(index, 1)
        store = CandleStore(4)  # one series per token, reused across the windows
        try:
            for start, length, step, kind, cat in asked:
                end = start + length
                got = await render(pool, store, cat, start, end, step, kind)
                assert got == naive(index, cat, start, end, step, kind)
        finally:
            await pool.close()

    asyncio.run(check())


async def test_series_follow_new_blocks_and_reorgs(tmp_path: Path) -> None:
    """New blocks (some with header times before trades already held) extend the series and
    replace the hours and days they touch; a reorg rebuilds it."""
    db = tmp_path / "grow.sqlite"
    await _new_index(db)
    _write(db, *_rows(range(120), seed=2))
    pool = ReaderPool(db, 1)
    store = CandleStore(4)
    cat = TOKENS[0]
    span = (T0 - DAY, T0 + 200 * HOUR)
    windows = [(*span, HOUR), (T0 + 7 * HOUR + 17, T0 + 150 * HOUR - 5, HOUR), (*span, DAY)]
    try:
        for start, end, step in windows:  # builds the series and its days
            assert await render(pool, store, cat, start, end, step, CANDLES) == naive(
                db, cat, start, end, step, CANDLES
            )
        done = 120
        for upto in (121, 135, 160):  # one block, then several at once
            _write(db, *_rows(range(done, upto), seed=2))
            done = upto
            for start, end, step in windows:
                assert await render(pool, store, cat, start, end, step, CANDLES) == naive(
                    db, cat, start, end, step, CANDLES
                )
        assert store.rebuilds == 1
        _undo_above(db, 140)
        _write(db, *_rows(range(141, 170), seed=3))  # another branch
        for start, end, step in windows:
            assert await render(pool, store, cat, start, end, step, HISTORY) == naive(
                db, cat, start, end, step, HISTORY
            )
        assert store.rebuilds == 2
    finally:
        await pool.close()


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=30), st.integers(0, 9))
def test_gzip_from_deflated_and_fresh_pieces(pieces: list[tuple[int, bool]], level: int) -> None:
    rng = random.Random(len(pieces))
    parts = []
    for n, kept in pieces:
        raw = rng.randbytes(n * 20).hex().encode()  # compressible, like JSON of hex ids
        parts.append(deflate_piece(raw, level) if kept else raw)
    body = b"".join(p if isinstance(p, bytes) else p.raw for p in parts)
    member = gzip_join(parts, body)
    assert gzip.decompress(member) == body
    assert zlib.decompress(member, 31) == body


def test_trades_insert_out_of_order_and_keep_order() -> None:
    rng = random.Random(4)
    points = [
        (rng.randrange(0, 50), h, p, rng.randrange(1, 99), rng.randrange(1, 99))
        for h in range(60)
        for p in range(1, 4)
    ]
    trades = Trades()
    for i in range(0, len(points), 7):  # batches in chain order, times out of order
        trades.add(points[i : i + 7])
    held = list(trades.points(0, len(trades)))
    assert held == sorted(points)
    assert list(trades.between(10, 20)) == sorted(p for p in points if 10 <= p[0] <= 20)
    big = Trades()
    big.add([(1, 1, 1, 5, 1 << 70)])  # beyond 64 bits: still exact
    assert list(big.points(0, 1)) == [(1, 1, 1, 5, 1 << 70)]


async def test_an_existing_index_gains_the_covering_trade_indexes(tmp_path: Path) -> None:
    """An index file made before migration cauldron #2 is upgraded when the store opens it,
    keeping its rows; the price point reads then never touch the table."""
    from indexer.decoders.cauldron.schema import MIGRATIONS
    from indexer.store import CORE_MIGRATIONS, migrate
    from indexer.store.db import open_reader, open_writer
    from rest import queries_dex as qd

    db = tmp_path / "old.sqlite"
    writer = await open_writer(db)
    await migrate(writer, [*CORE_MIGRATIONS, MIGRATIONS[0]])
    await writer.close()
    _write(db, *_rows(range(30), seed=4))
    old = sqlite3.connect(db)
    assert [c[2] for c in old.execute("PRAGMA index_info(cauldron_trades_category_time)")] == [
        "category",
        "time",
    ]
    old.close()
    await _new_index(db)  # Store.open: the pending migrations
    conn = await open_reader(db)  # as the data API reads it (and traceable in-process)
    try:
        cols = await conn.execute_fetchall("PRAGMA index_info(cauldron_trades_category_height)")
        assert [c[2] for c in cols][:4] == ["category", "height", "position", "time"]
        versions = await conn.execute_fetchall(
            "SELECT version FROM schema_migrations WHERE component = 'cauldron'"
        )
        # every pending migration applied (#2 and any later one)
        assert sorted(v[0] for v in versions) == [m.version for m in MIGRATIONS]
        traced: list[str] = []
        await conn.set_trace_callback(traced.append)
        page = await qd.trade_points_page(conn, TOKENS[0].hex(), (-1, 1 << 62), 100, 1000)
        window = await qd.trade_points_between(conn, TOKENS[0].hex(), 0, 1 << 40)
        traced = list(traced)  # the EXPLAINs below are traced too
        assert sorted(page) == sorted(window) and len(page) == sum(
            r[1] == TOKENS[0] for r in _rows(range(30), seed=4)[1]
        )
        for sql in traced:
            plan = await conn.execute_fetchall(f"EXPLAIN QUERY PLAN {sql}")
            assert all("USING COVERING INDEX cauldron_trades_category" in r[3] for r in plan), plan
    finally:
        await conn.close()


async def test_ready_series_answers_exactly_like_the_snapshot_path(tmp_path: Path) -> None:
    """`render_ready` (no read snapshot) gives the bytes and gzip member `render` gives, only
    while the series is exactly at the tip asked for: not before the series holds a new block,
    not for the tip it left, not for a reorged-away tip at the same height."""
    db = tmp_path / "ready.sqlite"
    await _new_index(db)
    _write(db, *_rows(range(100), seed=5))
    pool = ReaderPool(db, 1)
    store = CandleStore(4)
    cat = TOKENS[1].hex()
    windows = [
        (T0 - DAY, T0 + 200 * HOUR, HOUR, CANDLES),
        (T0 + 7 * HOUR + 17, T0 + 150 * HOUR - 5, HOUR, HISTORY),
        (T0 + 3 * DAY + 11, T0 + 9 * DAY, DAY, CANDLES),
        (T0 + HOUR + 1, T0 + 60 * HOUR + 7, 900, CANDLES),
    ]

    async def tip_now() -> Any:
        async with pool.snapshot() as snap:
            return snap.tip

    async def check(tip: Any) -> list[Any]:
        answers = []
        for start, end, step, kind in windows:
            ready = store.render_ready(tip, cat, start, end, step, kind)
            assert ready is not None
            async with pool.snapshot() as snap:
                assert snap.tip == tip
                via_snapshot = await store.render(snap.conn, tip, cat, start, end, step, kind)
            assert ready == via_snapshot
            assert orjson.loads(ready.data)[kind] == naive(db, TOKENS[1], start, end, step, kind)
            answers.append(ready)
        return answers

    try:
        first = await tip_now()
        assert store.render_ready(first, cat, *windows[0]) is None  # no series yet
        async with pool.snapshot() as snap:
            await store.ensure(snap.conn, first, cat)
        at_first = await check(first)
        _write(db, *_rows(range(100, 104), seed=5))
        grown = await tip_now()
        assert store.render_ready(grown, cat, *windows[0]) is None  # the series is behind
        # Until it moves on, the series still answers for `first` exactly as before.
        assert [store.render_ready(first, cat, *w) for w in windows] == at_first
        async with pool.snapshot() as snap:
            await store.ensure(snap.conn, grown, cat)
        assert store.render_ready(first, cat, *windows[0]) is None
        await check(grown)
        _undo_above(db, 90)
        _write(db, *_rows(range(91, 104), seed=6))  # another branch, same height
        reorged = await tip_now()
        assert reorged.height == grown.height and reorged.hash != grown.hash
        assert store.render_ready(reorged, cat, *windows[0]) is None
        async with pool.snapshot() as snap:
            await store.ensure(snap.conn, reorged, cat)
        assert store.render_ready(grown, cat, *windows[0]) is None
        await check(reorged)
        assert store.rebuilds == 2
    finally:
        await pool.close()


async def test_the_warmer_freezes_large_series_out_of_the_gc(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a warm that built series of at least FREEZE_BUCKETS hours the process's objects are
    frozen (full collections skip them); a warm that built nothing, or only small series, does
    not freeze."""
    import gc

    from rest import warm
    from rest.context import ApiContext

    async def warmed(threshold: int, ctx: ApiContext | None = None) -> tuple[ApiContext, int]:
        monkeypatch.setattr(warm, "FREEZE_BUCKETS", threshold)
        ctx = ctx or ApiContext.create(world.config(warm=False))
        await ctx.watcher.refresh()
        gc.unfreeze()
        await warm.Warmer(ctx).warm()
        return ctx, gc.get_freeze_count()

    try:
        small, frozen = await warmed(10**9)
        built = small.candles.rebuilds
        assert built == len(world.ledger.tokens) and frozen == 0
        await small.pool.close()
        large, frozen = await warmed(small.candles.buckets())
        assert large.candles.rebuilds == built and frozen > 0
        _, frozen = await warmed(1, large)  # the same tip: nothing built
        assert large.candles.rebuilds == built and frozen == 0
        await large.pool.close()
    finally:
        gc.unfreeze()
