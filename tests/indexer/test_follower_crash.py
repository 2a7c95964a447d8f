"""`ladle index` killed with SIGKILL at random moments of its sync, restarted each time, ends
with exactly the index of a clean run.

The devnet runs in this process (its server answers slowly, so a sync lasts long enough to be
interrupted many times); the indexer runs as a real process (`python -m indexer.cli`, forked
from a process that has imported it, `tests.runtime.forks`) and is killed without warning.
Every restart resumes from the stored tip; the final run, a fresh interpreter, exits at the tip
(`--exit-at-tip`) and its database must equal a fresh index of the same chain, row for row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
from pathlib import Path

import aiosqlite

from tests.indexer.test_follower_support import SMALL, generate, reindex, urls
from tests.indexer.test_store_scenario import dump
from tests.runtime.forks import first_line, forked

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


def indexer_argv(url: str, db: Path, *extra: str) -> list[str]:
    return [
        *("--electrum", url, "--db", str(db), "--start-height", "0", "--no-mempool"),
        *("--no-progress", "--log-format", "json", *extra),
    ]


async def test_sigkill_during_sync_then_restart_equals_a_clean_index(tmp_path: Path) -> None:
    net, _ = await generate(SMALL.replace(seed=6))
    rng = random.Random(20240601)
    db = tmp_path / "index.sqlite"
    url = urls(net)[0]
    try:
        async with forked("indexer.cli") as forks:
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
                log = tmp_path / f"run{len(landed)}.log"
                pid = await forks.run(indexer_argv(url, db, "--window", "1"), Path(os.devnull), log)
                line = await first_line(log, START_TIMEOUT)
                json.loads(line)  # it started: its first log line, JSON as asked
                with contextlib.suppress(TimeoutError):
                    await forks.wait(pid, rng.uniform(0.0, 0.6))
                if forks.returncode(pid) is None:
                    os.kill(pid, signal.SIGKILL)
                    assert await forks.wait(pid) == -signal.SIGKILL
                    kills += 1
                else:
                    assert forks.returncode(pid) == 0  # it reached the tip before the kill
                after = stored_height(db)
                assert after >= before  # a restart never loses a committed block
                landed.append(after)
            # The kills landed all over the sync, not just before the first block.
            assert len({h for h in landed if 0 <= h < final}) >= 8, landed
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "indexer.cli", *indexer_argv(url, db, "--exit-at-tip")),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(proc.communicate(), 120)
            assert proc.returncode == 0, err.decode()
            json.loads(err.splitlines()[0])
            net.nodes[0].clear_faults()
            async with aiosqlite.connect(db) as conn:
                got = await dump(conn)
            assert got == await reindex([url])
    finally:
        await net.stop()
