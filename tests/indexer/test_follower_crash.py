"""`ladle index` killed with SIGKILL at random moments of its sync, restarted each time, ends
with exactly the index of a clean run.

The devnet runs in this process (its server answers slowly, so a sync lasts long enough to be
interrupted many times); the indexer runs as a real process (`python -m indexer.cli`) and is
killed without warning. Every restart resumes from the stored tip; the final run exits at the
tip (`--exit-at-tip`) and its database must equal a fresh index of the same chain, row for row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sqlite3
import sys
from pathlib import Path

import aiosqlite

from tests.indexer.test_follower_support import SMALL, generate, reindex, urls
from tests.indexer.test_store_scenario import dump

KILLS = 20
START_TIMEOUT = 20.0


def stored_height(db: Path) -> int:
    if not db.exists():
        return -1
    with contextlib.closing(sqlite3.connect(db)) as conn:
        try:
            row = conn.execute("SELECT max(height) FROM blocks").fetchone()
        except sqlite3.OperationalError:  # killed before the schema existed
            return -1
    return -1 if row[0] is None else int(row[0])


async def start_indexer(url: str, db: Path, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "indexer.cli", "--electrum", url, "--db", str(db)),
        *("--start-height", "0", "--no-mempool", "--no-progress", "--log-format", "json"),
        *extra,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


async def first_log_line(proc: asyncio.subprocess.Process) -> dict[str, object]:
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), START_TIMEOUT)
    assert line, "the indexer exited before logging anything"
    record: dict[str, object] = json.loads(line)  # JSON lines on a pipe
    return record


async def drain(proc: asyncio.subprocess.Process) -> bytes:
    assert proc.stderr is not None
    return await proc.stderr.read()


async def test_sigkill_during_sync_then_restart_equals_a_clean_index(tmp_path: Path) -> None:
    net, _ = await generate(SMALL.replace(seed=6))
    rng = random.Random(20240601)
    db = tmp_path / "index.sqlite"
    url = urls(net)[0]
    try:
        net.nodes[0].set_faults(slow=0.004)  # every answer waits 4 ms: a sync takes seconds
        final = net.nodes[0].height
        kills, resets = 0, 0
        landed: list[int] = []
        while kills < KILLS:
            before = stored_height(db)
            if before == final:  # synced completely: start over, so kills keep landing mid-sync
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
                resets += 1
                assert resets <= KILLS, "the sync is too fast to be interrupted"
                before = -1
            proc = await start_indexer(url, db, "--window", "1")
            await first_log_line(proc)
            reader = asyncio.create_task(drain(proc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), rng.uniform(0.0, 0.6))
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                assert await proc.wait() == -signal.SIGKILL
                kills += 1
            else:
                assert proc.returncode == 0  # it reached the tip before the kill
            await reader
            after = stored_height(db)
            assert after >= before  # a restart never loses a committed block
            landed.append(after)
        # The kills landed all over the sync, not just before the first block.
        assert len({h for h in landed if 0 <= h < final}) >= 8, landed
        proc = await start_indexer(url, db, "--exit-at-tip")
        await first_log_line(proc)
        err = await drain(proc)
        assert await proc.wait() == 0, err.decode()
        net.nodes[0].clear_faults()
        async with aiosqlite.connect(db) as conn:
            got = await dump(conn)
        assert got == await reindex([url])
    finally:
        await net.stop()
