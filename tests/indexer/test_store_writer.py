"""The writer connection in its own process: results, errors, the commit rule and SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from indexer.store.writer import Writer, WriterGone

ROOT = Path(__file__).resolve().parents[2]


def rows(path: Path) -> list[int]:
    """The table as a separate, plain sqlite3 connection sees it (committed rows only)."""
    with sqlite3.connect(path) as db:
        return [r[0] for r in db.execute("SELECT x FROM t ORDER BY x")]


async def open_table(path: Path) -> Writer:
    conn = await Writer(path)
    await conn.execute("PRAGMA journal_mode = WAL")
    await conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER PRIMARY KEY)")
    return conn


async def test_calls_answer_like_aiosqlite(tmp_path: Path) -> None:
    conn = await open_table(tmp_path / "w.sqlite")
    try:
        await conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
        assert list(await conn.execute_fetchall("SELECT x FROM t WHERE x > ?", (1,))) == [
            (2,),
            (3,),
        ]
        executed = await conn.execute("SELECT count(*) FROM t")
        assert executed.rows == [(3,)]
        await conn.executescript("BEGIN; INSERT INTO t VALUES (4);")
        assert conn.in_transaction
        await conn.execute("ROLLBACK")
        assert not conn.in_transaction
        with pytest.raises(sqlite3.IntegrityError):
            await conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await conn.execute_fetchall("SELECT * FROM nowhere")
        assert rows(tmp_path / "w.sqlite") == [1, 2, 3]
    finally:
        await conn.close()
    with pytest.raises(WriterGone):
        await conn.execute("SELECT 1")


async def test_posts_run_in_order_and_errors_wait_for_sync(tmp_path: Path) -> None:
    conn = await open_table(tmp_path / "w.sqlite")
    try:
        conn.submit([("begin",), ("many", "INSERT INTO t VALUES (?)", [(1,), (2,)], None, "")])
        conn.submit([("exec", "INSERT INTO t VALUES (?)", (2,))])  # fails: kept for sync
        assert conn.pending == 2
        # A call after the posts sees their effects (same connection, same transaction).
        assert list(await conn.execute_fetchall("SELECT x FROM t")) == [(1,), (2,)]
        with pytest.raises(sqlite3.IntegrityError):
            await conn.collect()
        assert conn.pending == 0
        await conn.collect()  # the error was reported once
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()
    assert rows(tmp_path / "w.sqlite") == []


async def test_a_failed_batch_never_commits_and_nothing_after_it_does(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    conn = await open_table(path)
    try:
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (?)", (1,))])
        assert await conn.commit_queued() is None
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (?)", (2,))])
        conn.submit([("exec", "INSERT INTO t VALUES (?)", (1,))])  # the batch's failed write
        failed = await conn.commit_queued()
        assert isinstance(failed, sqlite3.IntegrityError)
        # Blocks sent on before the store heard of it: skipped, and their commit refused.
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (?)", (3,))])
        again = await conn.commit_queued()
        assert type(again) is type(failed) and str(again) == str(failed)
        assert rows(path) == [1]
        with pytest.raises(sqlite3.IntegrityError):
            await conn.collect()  # the store hears of it (and reloads); the writer runs again
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (?)", (4,))])
        assert await conn.commit_queued() is None
        assert not conn.in_transaction
    finally:
        await conn.close()
    assert rows(path) == [1, 4]


async def test_a_lost_expected_rowcount_fails_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    conn = await open_table(path)
    try:
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (?)", (1,))])
        update = "UPDATE t SET x = x + 10 WHERE x = ?"
        conn.submit([("many", update, [(1,), (5,)], 2, "block 7: spends")])
        failed = await conn.commit_queued()
        assert isinstance(failed, RuntimeError)
        assert str(failed) == "block 7: spends: 1 of 2 lost"
        with pytest.raises(RuntimeError):
            await conn.collect()
    finally:
        await conn.close()
    assert rows(path) == []


async def test_posts_outside_a_transaction_fail_instead_of_autocommitting(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    conn = await open_table(path)
    try:
        conn.submit(
            [("need_tx", "block 3: no open transaction"), ("exec", "INSERT INTO t VALUES (1)", ())]
        )
        with pytest.raises(sqlite3.OperationalError, match="block 3: no open transaction"):
            await conn.collect()
    finally:
        await conn.close()
    assert rows(path) == []


_KILLED = textwrap.dedent(
    """
    import asyncio, sys
    from indexer.store.writer import Writer

    async def main():
        conn = await Writer(sys.argv[1])
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (1)", ())])
        assert await conn.commit_queued() is None
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (2)", ())])
        await conn.execute_fetchall("SELECT 1")  # row 2 written, not committed
        print("ready", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


async def test_sigkill_of_the_indexer_rolls_the_open_batch_back(tmp_path: Path) -> None:
    path = tmp_path / "w.sqlite"
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-c", _KILLED, str(path)),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    assert await asyncio.wait_for(proc.stdout.readline(), 30) == b"ready\n"
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    # The orphaned writer reads end of input, rolls back and lets go of the database: a new
    # writer can take the write lock and sees only the committed row.
    conn = await Writer(path)
    try:
        await conn.execute("PRAGMA busy_timeout = 20000")
        await conn.execute("BEGIN IMMEDIATE")
        assert list(await conn.execute_fetchall("SELECT x FROM t")) == [(1,)]
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()
    assert rows(path) == [1]


async def test_a_dead_writer_fails_every_request_and_the_store_reopens(tmp_path: Path) -> None:
    """If the writer process dies (an OOM kill, say), waiting requests and every later one
    fail with WriterGone instead of hanging, close() returns, and a new writer finds the
    last commit."""
    path = tmp_path / "w.sqlite"
    conn = await open_table(path)
    try:
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (1)", ())])
        assert await conn.commit_queued() is None
        conn.submit([("begin",), ("exec", "INSERT INTO t VALUES (2)", ())])
        assert conn._proc is not None
        conn._proc.kill()  # the child, not this process
        with pytest.raises(WriterGone):
            await conn.execute_fetchall("SELECT x FROM t")
        with pytest.raises(WriterGone):
            conn.submit([("exec", "INSERT INTO t VALUES (3)", ())])
        with pytest.raises(WriterGone):
            await conn.collect()
    finally:
        await asyncio.wait_for(conn.close(), 10)
    assert rows(path) == [1]
