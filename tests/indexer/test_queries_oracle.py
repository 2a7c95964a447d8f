"""`feed_history` with a stepsize buckets in SQL: on random feeds (ties in time and sequence,
metadata rows, a second feed, open and closed windows) it gives exactly what bucketing every
update in Python gives — the last update of each interval, in (time, sequence, txid, vout)
order — and without a stepsize every update in that order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiosqlite
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.decoders.oracle.schema import MIGRATIONS
from indexer.store.queries_oracle import FeedPoint, feed_history
from indexer.store.schema import CORE_MIGRATIONS, migrate

FEED, OTHER = "aa" * 32, "bb" * 32


@dataclass(frozen=True)
class Update:
    category: str
    height: int
    time: int
    sequence: int
    price: int | None
    txid: bytes
    vout: int

    def key(self) -> tuple[bytes, int, bytes]:
        return self.txid, self.vout, bytes.fromhex(self.category)


updates = st.lists(
    st.builds(
        Update,
        category=st.sampled_from((FEED, FEED, FEED, OTHER)),
        height=st.integers(0, 4),
        time=st.integers(0, 400),
        sequence=st.integers(0, 6),
        price=st.one_of(st.none(), st.integers(1, 10_000)),
        txid=st.binary(min_size=32, max_size=32),
        vout=st.integers(0, 2),
    ),
    max_size=40,
    unique_by=lambda u: (u.txid, u.vout),
)


def expected(
    rows: list[Update], start: int, end: int | None, step: int | None
) -> list[tuple[int, int, str, str, int]]:
    """The answer computed from the rows alone: filter, order, keep each interval's last."""
    kept = [
        u
        for u in rows
        if u.category == FEED
        and u.price is not None
        and u.time >= start
        and (end is None or u.time <= end)
    ]
    kept.sort(key=lambda u: (u.time, u.sequence, u.txid, u.vout))
    if step is not None:
        last: dict[int, Update] = {}
        for u in kept:
            last[(u.time - start) // step] = u
        kept = [last[k] for k in sorted(last)]
    return [(u.time, u.price or 0, u.txid.hex(), f"{u.height:064x}", u.sequence) for u in kept]


def shape(points: list[FeedPoint]) -> list[tuple[int, int, str, str, int]]:
    return [(p.time, p.price, p.txid, p.blockhash, p.sequence) for p in points]


async def answers(
    rows: list[Update], start: int, end: int | None, step: int | None
) -> list[FeedPoint]:
    conn = await aiosqlite.connect(":memory:", isolation_level=None)
    try:
        await migrate(conn, [*CORE_MIGRATIONS, *MIGRATIONS])
        for h in range(5):
            await conn.execute(
                "INSERT INTO blocks VALUES (?, ?, ?, 0, 0, 1, ?)",
                (h, h.to_bytes(32, "big"), bytes(32), bytes(80)),
            )
        await conn.executemany(
            "INSERT INTO oracle_updates VALUES (?,?,?,'delphi',?,0,0,?,?,?,0,?)",
            [(*u.key(), u.height, u.time, u.sequence, u.price, bytes(16)) for u in rows],
        )
        return await feed_history(conn, FEED, start, end, step)
    finally:
        await conn.close()


@settings(max_examples=50, deadline=None)
@given(
    updates,
    st.integers(0, 300),
    st.one_of(st.none(), st.integers(0, 300)),
    st.one_of(st.none(), st.integers(1, 150)),
)
def test_sql_bucketing_equals_python_bucketing(
    rows: list[Update], start: int, span: int | None, step: int | None
) -> None:
    end = None if span is None else start + span
    got = asyncio.run(answers(rows, start, end, step))
    assert shape(got) == expected(rows, start, end, step)


def test_each_interval_keeps_its_last_update() -> None:
    """A worked case: intervals of 100 s from 50; the tie at t=120 goes to the higher sequence,
    the empty interval [250, 350) is left out, metadata (no price) is not an update."""
    rows = [
        Update(FEED, 1, 60, 1, 100, b"\x01" * 32, 0),
        Update(FEED, 1, 120, 3, 103, b"\x02" * 32, 0),
        Update(FEED, 1, 120, 2, 102, b"\x03" * 32, 0),
        Update(FEED, 2, 160, 4, None, b"\x04" * 32, 0),
        Update(FEED, 2, 360, 5, 105, b"\x05" * 32, 0),
        Update(OTHER, 2, 130, 9, 999, b"\x06" * 32, 0),
    ]
    got = asyncio.run(answers(rows, 50, None, 100))
    assert [(p.time, p.price, p.sequence) for p in got] == [(120, 103, 3), (360, 105, 5)]
