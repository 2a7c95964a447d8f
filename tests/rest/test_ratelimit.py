"""The rate limit: its token bucket's arithmetic; the bucket table, where processes spending
from one bucket at once lose no update, a client keeps its bucket among others that share its
set, and a file that holds no table is refused."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from rest.ratelimit import WAYS, BucketTable, RateLimiter, shared_table

PROCESSES = 4
SPENDS = 3000  # per process


def frozen() -> float:
    return 1000.0  # no refill: every token granted is one spent


def spend_many(path: Path, start: Barrier, granted: multiprocessing.SimpleQueue[int]) -> None:
    table = BucketTable.open(path)
    start.wait()
    capacity = float(PROCESSES * SPENDS)
    granted.put(sum(table.spend("client", frozen, capacity, 1.0) >= 1.0 for _ in range(SPENDS)))


def test_processes_spending_from_one_bucket_lose_no_update() -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(PROCESSES + 1)
    granted: multiprocessing.SimpleQueue[int] = ctx.SimpleQueue()
    with shared_table() as path:
        procs = [
            ctx.Process(target=spend_many, args=(path, start, granted)) for _ in range(PROCESSES)
        ]
        for proc in procs:
            proc.start()
        start.wait(timeout=60)
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0
        assert sum(granted.get() for _ in procs) == PROCESSES * SPENDS
        table = BucketTable.open(path)
        try:
            # Every spend was counted: the bucket is exactly empty.
            assert table.spend("client", frozen, float(PROCESSES * SPENDS), 1.0) == 0.0
        finally:
            table.close()


def test_a_worker_opens_the_table_its_parent_made() -> None:
    with shared_table() as path:
        one, two = BucketTable.open(path), BucketTable.open(path)
        try:
            first, second = RateLimiter(2, one, frozen), RateLimiter(2, two, frozen)
            assert first.check("a") is None and second.check("a") is None
            assert first.check("a") == second.check("a") == 30  # 2 a minute: one in 30 s
            assert second.check("b") is None  # another client, another bucket
            assert (first.refused, second.refused) == (1, 1)
        finally:
            one.close()
            two.close()
    assert not path.exists()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_refills_continuously() -> None:
    clock = Clock()
    limiter = RateLimiter(60, clock=clock)  # one a second, burst 60
    assert all(limiter.check("a") is None for _ in range(60))
    assert limiter.check("a") == 1
    assert limiter.check("b") is None  # another client has its own bucket
    clock.now += 0.5
    assert limiter.check("a") == 1  # half a token: wait the other half, rounded up
    clock.now += 0.5
    assert limiter.check("a") is None
    clock.now += 3600
    assert all(limiter.check("a") is None for _ in range(60))  # the burst never exceeds 60
    assert limiter.check("a") is not None
    slow = RateLimiter(2, clock=clock)  # one per 30 s
    assert slow.check("c") is None and slow.check("c") is None
    assert slow.check("c") == 30


def test_a_client_keeps_its_bucket_among_the_others_of_its_set() -> None:
    clock = Clock()
    limiter = RateLimiter(2, BucketTable.private(sets=1), clock)  # every client in one set
    busy = [f"198.51.100.{i}" for i in range(WAYS - 1)]
    for client in busy:
        assert limiter.check(client) is None and limiter.check(client) is None
    assert limiter.check("idle") is None  # the last way; one token left
    # A new client takes the fullest way (the idle client's); the busy ones keep theirs.
    assert limiter.check("new") is None
    assert all(limiter.check(client) == 30 for client in busy)
    clock.now += 60  # every bucket refilled: any of them may be taken over, none is lost
    for i in range(WAYS):
        assert limiter.check(f"203.0.113.{i}") is None
    assert limiter.check("203.0.113.0") is None
    assert limiter.check("203.0.113.0") == 30


def test_a_file_without_a_table_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_bytes(b"\0" * 4096)
    with pytest.raises(ValueError, match="not a rate-limit bucket table"):
        BucketTable.open(other)
