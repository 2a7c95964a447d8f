"""Status records in SQLite: persistence, expiry, idempotent writes, group commit."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broadcast.records import BroadcastRecord, RecordStore
from broadcast.status import Status
from broadcast.verdicts import Outcome, Reason, Verdict

NODES = [("a", 1.0), ("b", 1.0), ("c", 2.0)]


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def txid(i: int) -> str:
    return f"{i:064x}"


def accepted(node: str) -> Verdict:
    return Verdict(node, Outcome.ACCEPTED, elapsed=0.01)


async def test_records_survive_reopening(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite")
    clock = Clock()
    store = await RecordStore.open(path, clock=clock)
    record = BroadcastRecord.new(txid(1), "00ff", NODES, clock.now, ttl=100)
    record = record.with_verdict(0, accepted("a"), clock.now)
    rejection = Verdict("b", Outcome.REJECTED, Reason.CONFLICT, "txn-mempool-conflict")
    record = record.with_verdict(1, rejection, clock.now)
    await store.put(record)
    await store.close()

    again = await RecordStore.open(path, clock=clock)
    try:
        loaded = await again.get(txid(1))
        assert loaded == record
        assert loaded is not None and loaded.status is Status.BROADCASTING
        body = loaded.to_json()
        assert body["rejections"] == [
            {"node": "b", "reason": "conflict", "message": "txn-mempool-conflict"}
        ]
        assert body["nodes_reached"] == 1 and body["nodes_total"] == 3
        assert body["estimated_network_reach"] == 0.25
        assert body["timestamp"] == int(clock.now)
    finally:
        await again.close()


async def test_records_expire(tmp_path: Path) -> None:
    clock = Clock()
    store = await RecordStore.open(str(tmp_path / "r.sqlite"), clock=clock)
    try:
        await store.put(BroadcastRecord.new(txid(1), "00", NODES, clock.now, ttl=60))
        await store.put(BroadcastRecord.new(txid(2), "00", NODES, clock.now, ttl=600))
        clock.now += 61
        assert await store.get(txid(1)) is None
        assert await store.get(txid(2)) is not None
        assert await store.purge_expired() == 1
        assert await store.count() == 1
    finally:
        await store.close()


async def test_putting_the_same_transaction_again_replaces_it(tmp_path: Path) -> None:
    clock = Clock()
    store = await RecordStore.open(str(tmp_path / "r.sqlite"), clock=clock)
    try:
        first = BroadcastRecord.new(txid(7), "00", NODES, clock.now, ttl=60)
        await store.put(first)
        await store.put(first.with_verdict(2, accepted("c"), clock.now + 1))
        assert await store.count() == 1
        got = await store.get(txid(7))
        assert got is not None and got.nodes_reached == 1
    finally:
        await store.close()


async def test_concurrent_puts_are_all_committed(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite")
    clock = Clock()
    store = await RecordStore.open(path, clock=clock)
    records = [BroadcastRecord.new(txid(i), "00", NODES, clock.now, ttl=60) for i in range(300)]
    await asyncio.gather(*(store.put(r) for r in records))
    await store.close()
    again = await RecordStore.open(path, clock=clock)
    try:
        assert await again.count() == 300
        assert await again.get(txid(299)) == records[299]
    finally:
        await again.close()


async def test_due_lists_open_records_only(tmp_path: Path) -> None:
    clock = Clock()
    store = await RecordStore.open(":memory:", clock=clock)
    try:
        done = BroadcastRecord.new(txid(1), "00", NODES, clock.now, ttl=60)
        for i, (name, _) in enumerate(NODES):
            done = done.with_verdict(i, accepted(name), clock.now)
        confirmed = done.with_confirmation(100, 110, clock.now)  # 11 confirmations
        fresh = done.with_confirmation(100, 101, clock.now)  # 2 confirmations
        unknown = Verdict("a", Outcome.UNKNOWN, Reason.UNKNOWN, "timeout")
        pending = BroadcastRecord.new(txid(2), "00", NODES, clock.now, ttl=60)
        for i in range(3):
            pending = pending.with_verdict(i, unknown, clock.now)
        rejection = Verdict("a", Outcome.REJECTED, Reason.FEE, "min relay fee not met")
        rejected = BroadcastRecord.new(txid(3), "00", NODES, clock.now, ttl=60)
        for i in range(3):
            rejected = rejected.with_verdict(i, rejection, clock.now)
        await store.put(confirmed)
        await store.put(pending)
        await store.put(rejected)
        await store.put(BroadcastRecord.new(txid(4), "00", NODES, clock.now, ttl=60))
        assert pending.status is Status.PENDING
        assert sorted(r.txid for r in await store.due()) == [txid(2), txid(4)]
        await store.put(fresh)
        assert sorted(r.txid for r in await store.due()) == [txid(1), txid(2), txid(4)]
    finally:
        await store.close()
