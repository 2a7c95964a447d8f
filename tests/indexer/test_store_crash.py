"""Crash safety: SIGKILL the applying process at random moments; the database always holds the
state after a whole block (equal to a clean run's state at its tip), and resuming from the tip
ends exactly where a clean run ends.

Run as a module, this file is the worker: `python -m tests.indexer.test_store_crash DB BLOCKS
[BATCH]` applies the blocks in the BLOCKS file from the database's tip onwards; with BATCH, as
the initial sync does (`hold=True`), committing every BATCH blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from indexer import index
from indexer.snapshot import PoolSnapshot
from tests.indexer.test_store_scenario import BuiltBlock, Scenario, build_chain, dump, open_store
from tests.runtime.forks import Forks, first_line, forked

KILLS = 20
BATCH = 7
# The worker's pause after each block: applying the 60 blocks takes ~30 ms on a fast machine,
# less than its start and exit, so without it most kills would land before the first block or
# after the last; with it they land all over the sync, wherever each block's work happens to be.
STEP_S = 0.003


def write_blocks(path: Path, blocks: list[BuiltBlock]) -> None:
    with path.open("wb") as fh:
        for b in blocks:
            fh.write(b.height.to_bytes(4, "little") + len(b.raw).to_bytes(4, "little") + b.raw)


def read_blocks(path: Path) -> list[tuple[int, bytes]]:
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        height = int.from_bytes(data[pos : pos + 4], "little")
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        out.append((height, data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    return out


async def worker(db: str, blocks_file: str, batch: int = 0) -> None:
    blocks = read_blocks(Path(blocks_file))
    if batch:  # commits by count only, so where they land does not depend on speed
        store = await index.open_store(
            db, snapshot=PoolSnapshot(), batch_blocks=batch, batch_seconds=3600.0
        )
    else:
        store = await open_store(db)
    tip = await store.tip()
    print("ready", flush=True)
    first = blocks[0][0]
    start = 0 if tip is None else tip.height - first + 1
    for height, raw in blocks[start:]:
        await store.apply_block(height, raw, hold=batch > 0)
        await asyncio.sleep(STEP_S)
    await store.close()
    print("done", flush=True)


async def start_worker(forks: Forks, db: Path, blocks_file: Path, batch: int = 0) -> int:
    """A worker process (forked: a run is short, an interpreter's start is not), once ready."""
    out = db.with_name(f"{db.name}.out")
    out.unlink(missing_ok=True)  # its first line is this run's
    argv = [str(db), str(blocks_file)] + ([str(batch)] if batch else [])
    pid = await forks.run(argv, out, db.with_name(f"{db.name}.err"))
    assert await first_line(out, 30) == b"ready\n"
    return pid


async def state_at_tip(db: Path) -> tuple[int, dict[str, list[tuple[object, ...]]]]:
    store = await open_store(db)
    try:
        tip = await store.tip()
        return (0 if tip is None else tip.height), await dump(store.conn)
    finally:
        await store.close()


@pytest.mark.parametrize("batch", [0, BATCH])
async def test_sigkill_at_random_moments_never_leaves_half_a_block(
    tmp_path: Path, batch: int
) -> None:
    """Without batching every kill lands after some block; with it (blocks held `BATCH` to a
    transaction), after some whole batch: the tip is always a batch boundary, and a restart
    continues from it."""
    chain, reference = await _reference()
    blocks_file = tmp_path / "blocks.bin"
    write_blocks(blocks_file, chain.blocks)
    async with forked("tests.indexer.test_store_crash") as forks:
        await _kill_and_resume(forks, tmp_path, blocks_file, batch, chain, reference)


_REFERENCE: list[tuple[Scenario, dict[int, dict[str, list[tuple[object, ...]]]]]] = []


async def _reference() -> tuple[Scenario, dict[int, dict[str, list[tuple[object, ...]]]]]:
    """The chain, and a clean, uninterrupted run's full dump after every block (built once
    for the module: both parameters use the same)."""
    if not _REFERENCE:
        chain = build_chain(seed=2024, n_blocks=60, actions=12)
        reference: dict[int, dict[str, list[tuple[object, ...]]]] = {}
        store = await open_store()
        try:
            reference[0] = await dump(store.conn)
            for b in chain.blocks:
                await store.apply_block(b.height, b.raw)
                reference[b.height] = await dump(store.conn)
        finally:
            await store.close()
        _REFERENCE.append((chain, reference))
    return _REFERENCE[0]


async def _kill_and_resume(
    forks: Forks,
    tmp_path: Path,
    blocks_file: Path,
    batch: int,
    chain: Scenario,
    reference: dict[int, dict[str, list[tuple[object, ...]]]],
) -> None:
    # How long a whole run takes here (from "ready" to its exit), so that the kills are drawn
    # across the sync on a fast machine as on a slow one.
    clean = await start_worker(forks, tmp_path / "timing.sqlite", blocks_file, batch)
    ready_at = time.monotonic()
    assert await forks.wait(clean, 60) == 0
    duration = max(time.monotonic() - ready_at, 0.02)

    rng = random.Random(7)
    db = tmp_path / "index.sqlite"
    kills, runs, heights = 0, 0, set()
    deadline = time.monotonic() + 150  # a safety net for a loaded machine, not a target
    wanted = KILLS // 2 if batch else KILLS  # (the batched run re-checks the same guarantee)
    while kills < wanted:
        assert time.monotonic() < deadline, f"only {kills} kills in time"
        runs += 1
        pid = await start_worker(forks, db, blocks_file, batch)
        with contextlib.suppress(TimeoutError):
            await forks.wait(pid, rng.uniform(0.0, duration))
        if forks.returncode(pid) is None:
            os.kill(pid, signal.SIGKILL)
            kills += 1
        assert await forks.wait(pid) in (0, -signal.SIGKILL)
        height, state = await state_at_tip(db)
        assert state == reference[height], f"run {runs}: not the state after block {height}"
        if batch and height != chain.height:
            # Every run starts at a boundary and commits whole batches only.
            assert (height - chain.blocks[0].height + 1) % batch == 0, height
        heights.add(height)
        if height == chain.height:  # finished: start over so the kills keep landing mid-sync
            for f in tmp_path.glob("index.sqlite*"):
                if f.suffix not in (".out", ".err"):
                    f.unlink()
    # The kills landed all over the sync, not just before the first block.
    assert len(heights - {0, chain.height}) >= (3 if batch else 5)
    # And resuming after the last kill reaches exactly the clean final state.
    pid = await start_worker(forks, db, blocks_file, batch)
    assert await forks.wait(pid, 60) == 0
    assert await state_at_tip(db) == (chain.height, reference[chain.height])


if __name__ == "__main__":
    asyncio.run(worker(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0))
