"""The per-client rate limit: a token bucket per client (`per_minute` requests, refilled
continuously, burst of the same size), kept in one table that every worker process of a server
shares, so that a client gets one limit however the kernel spreads its connections.

The table (`BucketTable`) is a file mapped into memory: a header, then sets of `WAYS` buckets.
A keyed hash of the client picks a set; in it the client's bucket is found, or one is taken
over: an unused or refilled one (forgetting a full bucket changes nothing), else the fullest
(whose client loses least). A set is read and written under an fcntl record lock on its bytes:
cheap, and the kernel drops the lock of a process that dies, so a worker killed mid-request
never blocks the others. Bucket times are `time.monotonic()`, one clock for every process of
the machine, read under the lock so that they never go back. The server's parent creates the
file (`shared_table`) before it starts the workers, which open it by path; a process serving
alone keeps a private table in anonymous memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import mmap
import os
import secrets
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Clock = Callable[[], float]

MAGIC = b"ladle-rl"
HEADER = struct.Struct("<8sII16s")  # magic, sets, ways, hash key
HEADER_SIZE = 64
WAYS = 8
SET = struct.Struct(f"<{WAYS}Q{2 * WAYS}d")  # the ways' owners (0: unused), their (tokens, at)
OWNER = struct.Struct("<Q")
BUCKET = struct.Struct("<dd")
SETS = 8192  # 65,536 buckets in 1.5 MiB
SHM = Path("/dev/shm")  # memory, never written back to a disk


def level(tokens: float, at: float, now: float, capacity: float, rate: float) -> float:
    """A bucket's tokens at `now`: those it held at `at`, refilled at `rate` a second."""
    return min(capacity, tokens + max(0.0, now - at) * rate)


def pick(ways: tuple[Any, ...], owner: int, now: float, capacity: float, rate: float) -> int:
    """The way of a set (its fields as `SET` unpacks them) that holds `owner`'s bucket, else
    the one to give it: an unused or full one first, else the fullest."""
    owners = ways[:WAYS]
    if owner in owners:
        return owners.index(owner)
    levels = [
        capacity
        if held == 0
        else level(ways[WAYS + 2 * w], ways[WAYS + 2 * w + 1], now, capacity, rate)
        for w, held in enumerate(owners)
    ]
    return levels.index(max(levels))


class BucketTable:
    """Token buckets in (possibly shared) memory; `spend` takes a client's token."""

    def __init__(self, memory: mmap.mmap, fd: int | None) -> None:
        magic, sets, ways, key = HEADER.unpack_from(memory, 0)
        if magic != MAGIC or ways != WAYS or len(memory) != HEADER_SIZE + sets * SET.size:
            raise ValueError("not a rate-limit bucket table")
        self.memory = memory
        self.fd = fd  # None: private to this process, no locking
        self.sets = int(sets)
        self.key = bytes(key)

    @classmethod
    def private(cls, sets: int = SETS) -> BucketTable:
        """A table of this process alone."""
        memory = mmap.mmap(-1, HEADER_SIZE + sets * SET.size)
        memory[: HEADER.size] = _header(sets)
        return cls(memory, None)

    @classmethod
    def open(cls, path: Path) -> BucketTable:
        """The table `shared_table` created at `path`, shared with every process opening it.
        ValueError if the file holds no table."""
        fd = os.open(path, os.O_RDWR)
        try:
            return cls(mmap.mmap(fd, 0), fd)
        except (ValueError, struct.error):
            os.close(fd)
            raise ValueError(f"{path} is not a rate-limit bucket table") from None

    def close(self) -> None:
        self.memory.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def spend(self, client: str, clock: Clock, capacity: float, rate: float) -> float:
        """The tokens `client`'s bucket holds now; one of them is taken if there is one."""
        digest = hashlib.blake2b(client.encode(), digest_size=8, key=self.key).digest()
        owner = int.from_bytes(digest, "little") | 1  # never 0, the unused mark
        start = HEADER_SIZE + (owner >> 1) % self.sets * SET.size
        if self.fd is not None:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, SET.size, start)
        try:
            now = clock()
            ways = SET.unpack_from(self.memory, start)
            way = pick(ways, owner, now, capacity, rate)
            tokens = capacity
            if ways[way] == owner:
                tokens = level(ways[WAYS + 2 * way], ways[WAYS + 2 * way + 1], now, capacity, rate)
            else:
                OWNER.pack_into(self.memory, start + OWNER.size * way, owner)
            left = tokens - 1.0 if tokens >= 1.0 else tokens
            BUCKET.pack_into(self.memory, start + OWNER.size * WAYS + BUCKET.size * way, left, now)
            return tokens
        finally:
            if self.fd is not None:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, SET.size, start)


@contextlib.contextmanager
def shared_table(sets: int = SETS) -> Iterator[Path]:
    """A new table file (in memory where the system has /dev/shm), for `BucketTable.open` in
    each worker of one server; removed at exit. Create it before the first worker starts."""
    fd, name = tempfile.mkstemp(prefix="ladle-ratelimit-", dir=SHM if SHM.is_dir() else None)
    try:
        os.ftruncate(fd, HEADER_SIZE + sets * SET.size)
        os.pwrite(fd, _header(sets), 0)
        yield Path(name)
    finally:
        os.close(fd)
        os.unlink(name)


def _header(sets: int) -> bytes:
    # A secret hash key: nobody can pick addresses that crowd one set.
    return HEADER.pack(MAGIC, sets, WAYS, secrets.token_bytes(16))


class RateLimiter:
    def __init__(
        self, per_minute: int, table: BucketTable | None = None, clock: Clock = time.monotonic
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be >= 1")
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0  # tokens per second
        self.table = BucketTable.private() if table is None else table
        self.clock = clock
        self.refused = 0  # by this process

    def check(self, client: str) -> int | None:
        """None if the request may go ahead, else the whole seconds to wait (Retry-After)."""
        tokens = self.table.spend(client, self.clock, self.capacity, self.rate)
        if tokens >= 1.0:
            return None
        self.refused += 1
        return max(1, math.ceil((1.0 - tokens) / self.rate))
