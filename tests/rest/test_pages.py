"""Deep pages (`rest.pages`): every page of the offset-paged listings (started from an anchor,
or keys first from a covering index) holds exactly the rows of the plain `LIMIT ? OFFSET ?`
query it replaces (kept here as the reference), at offsets from 0 to beyond the end, on a
real index: the devnet scenario's, and generated rows (transactions trading several tokens,
several actions and loans per transaction) that then grow by blocks and go through a reorg,
so the anchors are extended and rebuilt."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import aiosqlite
import pytest

from indexer.index import open_store
from indexer.store import queries as q
from indexer.store import queries_lending as ql
from rest.db import IndexVersion, read_tip
from rest.pages import ROWS_PER_CHUNK, Anchors
from tests.rest.conftest import World

# The queries as they were before anchors: the reference rows of every page.
_OLD_TRADES = (
    "SELECT t.txid, t.category, t.height, t.time, b.hash, t.direction, t.sats, t.tokens, "
    "t.volume_sats, t.volume_tokens, t.lp_fee, t.pools, t.pools_touched "
    "FROM cauldron_trades t JOIN blocks b ON b.height = t.height {where} "
    "ORDER BY t.height DESC, t.position DESC, t.category LIMIT ? OFFSET ?"
)
_OLD_HISTORY = (
    "SELECT txid, height, time, mtp, kind, version, borrower_hash, delegate_hash, "
    "collateral_before, collateral_after, principal_before, principal_after, rate_before, "
    "rate_after, loan_ts_before, loan_ts_after, interest FROM lending_actions "
    "JOIN (SELECT txid, seq FROM lending_actions WHERE version = ? "
    "ORDER BY height DESC, position DESC, seq DESC LIMIT ? OFFSET ?) AS page USING (txid, seq) "
    "ORDER BY height DESC, position DESC, seq DESC"
)


async def old_trades(
    conn: aiosqlite.Connection, limit: int, offset: int, token: str | None
) -> list[q.TradeRow]:
    where, params = ("", []) if token is None else ("WHERE t.category = ?", [bytes.fromhex(token)])
    rows = await conn.execute_fetchall(_OLD_TRADES.format(where=where), [*params, limit, offset])
    return [q._trade(r) for r in rows]


async def old_history(
    conn: aiosqlite.Connection, version: str, limit: int, offset: int
) -> list[ql.ActionOut]:
    rows = await conn.execute_fetchall(_OLD_HISTORY, (version, limit, offset))
    return [ql._action(r) for r in rows]


async def count(conn: aiosqlite.Connection, sql: str, *params: object) -> int:
    rows = list(await conn.execute_fetchall(sql, params))
    return int(rows[0][0])


async def old_loans(
    conn: aiosqlite.Connection, version: str, limit: int, offset: int
) -> list[ql.LoanRow]:
    rows = await conn.execute_fetchall(
        "SELECT txid, vout, version, borrower_hash, delegate_hash, principal, rate_bp, loan_ts, "
        "collateral, height, time FROM lending_loans WHERE version = ? AND spent_height IS NULL "
        "ORDER BY height, position, vout LIMIT ? OFFSET ?",
        (version, limit, offset),
    )
    return [ql._loan(r) for r in rows]


def offsets(n: int, stride: int) -> list[int]:
    """0, around every anchor boundary, the middle, the last rows, the end and beyond."""
    picks = {0, 1, n // 2, n - 1, n, n + 1, n + 7 * stride, 100_000}
    for k in range(0, n + stride, stride):
        picks |= {k - 1, k, k + 1, n - k, n - k - 1}
    return sorted(p for p in picks if p >= 0)


async def check_all_pages(conn: aiosqlite.Connection, anchors: Anchors, tip: IndexVersion) -> int:
    """Every listing's pages at many offsets and sizes against the old queries; the number of
    pages compared (non-empty among them)."""
    tokens = [
        bytes(r[0]).hex()
        for r in await conn.execute_fetchall("SELECT DISTINCT category FROM cauldron_trades")
    ]
    trades = await count(conn, "SELECT count(*) FROM cauldron_trades")
    compared = 0
    for token in [None, *tokens]:
        listing = q.trades_listing(token)
        for offset in offsets(trades, anchors.stride):
            for limit in (1, 3, 50):
                start = await anchors.seek(conn, tip, listing, offset)
                got = await q.latest_trades(conn, limit, offset, token, start)
                assert got == await old_trades(conn, limit, offset, token), (token, offset)
                compared += bool(got)
    for version in ("v1", "v11"):
        actions = await count(
            conn, "SELECT count(*) FROM lending_actions WHERE version = ?", version
        )
        listing = ql.history_listing(version)
        for offset in offsets(actions, anchors.stride):
            for limit in (1, 4, 50):
                start = await anchors.seek(conn, tip, listing, offset)
                page = await ql.history(conn, version, offset, limit, None, start)
                assert page == await old_history(conn, version, limit, offset), (version, offset)
                compared += bool(page)
        live = await count(
            conn,
            "SELECT count(*) FROM lending_loans WHERE version = ? AND spent_height IS NULL",
            version,
        )
        for offset in offsets(live, anchors.stride):
            for limit in (1, 4, 50):
                loans = await ql.active_loans(conn, version, offset, limit)
                assert loans == await old_loans(conn, version, limit, offset), (version, offset)
                compared += bool(loans)
    return compared


async def test_pages_of_the_scenario_index(world: World) -> None:
    conn = await aiosqlite.connect(f"file:{world.db}?mode=ro", uri=True)
    try:
        tip = await read_tip(conn)
        assert tip is not None
        assert await check_all_pages(conn, Anchors(stride=5), tip) > 100
    finally:
        await conn.close()


# --- generated rows: growth and a reorg ---------------------------------------------------------

CATEGORIES = [hashlib.sha256(f"pages token {i}".encode()).digest() for i in range(3)]


def _id(*parts: object) -> bytes:
    return hashlib.sha256(repr(parts).encode()).digest()


async def add_blocks(
    conn: aiosqlite.Connection, first: int, last: int, branch: str, rng: random.Random
) -> None:
    """Blocks first..last (of `branch`), each with 0–6 transactions; a transaction trades 1–3
    tokens (a row per token) and, now and then, makes 1–3 loan actions."""
    prev = list(
        await conn.execute_fetchall("SELECT hash FROM blocks WHERE height = ?", (first - 1,))
    )
    prev_hash = bytes(prev[0][0]) if prev else bytes(32)
    for h in range(first, last + 1):
        block = _id("block", branch, h)
        t = 1_700_000_000 + 600 * h
        await conn.execute(
            "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?)",
            (h, block, prev_hash, t, t, 7, block + bytes(48)),
        )
        prev_hash = block
        for pos in range(1, rng.randrange(1, 8)):
            txid = _id("tx", branch, h, pos)
            for cat in rng.sample(CATEGORIES, rng.randrange(1, 4)):
                await conn.execute(
                    "INSERT INTO cauldron_trades VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (txid, cat, h, t, pos, "buy", 10, -5, 10, 5, 1, 1, 1),
                )
            for vout in range(rng.randrange(0, 3)):  # loans: live, or spent in this block
                spent = rng.random() < 0.3
                await conn.execute(
                    f"INSERT INTO lending_loans VALUES ({', '.join('?' * 17)})",
                    (txid, vout, rng.choice(["v1", "v11"]), _id("b", vout), None, 5, 7, t,
                     300, h, t, t - 3000, pos, *((txid, h, t, "repay") if spent else (None,) * 4)),
                )  # fmt: skip
            if rng.random() < 0.5:
                version = rng.choice(["v1", "v11"])
                for seq in range(rng.randrange(1, 4)):
                    await conn.execute(
                        f"INSERT INTO lending_actions VALUES ({', '.join('?' * 21)})",
                        (txid, seq, h, t, t - 3000, pos, version, "borrow", _id("b", seq),
                         None, None, 0, None, 5, None, 7, None, 300, None, t, None),
                    )  # fmt: skip


async def tip_of(conn: aiosqlite.Connection) -> IndexVersion:
    tip = await read_tip(conn)
    assert tip is not None
    return tip


@pytest.mark.parametrize("seed", [1, 2])
async def test_pages_as_the_chain_grows_and_reorgs(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "index.sqlite"
    await (await open_store(db)).close()  # the store's migrations: tables and indexes
    conn = await aiosqlite.connect(db, isolation_level=None)
    rng = random.Random(seed)
    anchors = Anchors(stride=4)
    try:
        await add_blocks(conn, 0, 30, "a", rng)
        assert await check_all_pages(conn, anchors, await tip_of(conn)) > 100
        await add_blocks(conn, 31, 40, "a", rng)  # the anchors are extended
        assert await check_all_pages(conn, anchors, await tip_of(conn)) > 100
        for table in ("cauldron_trades", "lending_actions", "lending_loans", "blocks"):  # reorg
            await conn.execute(f"DELETE FROM {table} WHERE height >= 36")
        await add_blocks(conn, 36, 45, "b", rng)
        assert await check_all_pages(conn, anchors, await tip_of(conn)) > 100
    finally:
        await conn.close()


async def test_the_trade_feed_reads_its_keys_in_index_order(tmp_path: Path) -> None:
    """The page's keys come from `cauldron_trades_height` with no sort (the migration put it
    in the feed's order), so a deep page costs the rows it skips from its anchor only."""
    db = tmp_path / "index.sqlite"
    await (await open_store(db)).close()
    conn = await aiosqlite.connect(db)
    try:
        listing = q.trades_listing()
        plan = await conn.execute_fetchall(
            f"EXPLAIN QUERY PLAN SELECT txid, category FROM cauldron_trades "
            f"{listing.filtered(listing.from_key(True))} ORDER BY {listing.order()} LIMIT 5 "
            "OFFSET 3",
            listing.bind((5, 2, b"x")),
        )
    finally:
        await conn.close()
    details = [str(r[3]) for r in plan]
    assert any("COVERING INDEX cauldron_trades_height" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


async def test_kept_rows_answer_a_page_only_when_all_are_kept(tmp_path: Path) -> None:
    """`keep` → `ready` by rank, across runs of ranks; a row not kept, or dropped beyond the
    capacity (oldest runs first), or another tip, means no answer from memory."""
    db = tmp_path / "index.sqlite"
    await (await open_store(db)).close()
    conn = await aiosqlite.connect(db, isolation_level=None)
    rng = random.Random(3)
    anchors = Anchors(stride=4, rows=3 * ROWS_PER_CHUNK)
    listing = q.trades_listing()
    try:
        await add_blocks(conn, 0, 60, "a", rng)
        tip = await tip_of(conn)
        n = await count(conn, "SELECT count(*) FROM cauldron_trades")
        assert n > 4 * ROWS_PER_CHUNK
        await anchors.seek(conn, tip, listing, 0)
        assert anchors.ready(tip, listing, 0, 3) is None
        rows = [b"%d" % i for i in range(ROWS_PER_CHUNK + 10)]  # across two runs of ranks
        anchors.keep(tip, listing, 5, rows)
        assert anchors.ready(tip, listing, 5, len(rows)) == rows
        assert anchors.ready(tip, listing, 7, 60) == rows[2:62]
        assert anchors.ready(tip, listing, 4, 3) is None  # the row at offset 4 is not kept
        assert anchors.ready(tip, listing, 5 + len(rows) - 1, 2) is None
        assert anchors.ready(tip, listing, n, 5) == []  # beyond the end
        await add_blocks(conn, 61, 61, "a", rng)
        assert anchors.ready(await tip_of(conn), listing, 5, 3) is None  # not at that tip
        far = [b"x"] * ROWS_PER_CHUNK
        anchors.keep(tip, listing, 3 * ROWS_PER_CHUNK, far)
        anchors.keep(tip, listing, 4 * ROWS_PER_CHUNK, far)
        assert anchors.ready(tip, listing, 3 * ROWS_PER_CHUNK, ROWS_PER_CHUNK) == far
        assert anchors.ready(tip, listing, 5, 3) is None  # its run was dropped first
    finally:
        await conn.close()
