"""Status records: one per transaction, with every node's verdict, kept in SQLite.

A record outlives the request that created it (clients poll `GET /broadcast/status/<txid>`
after the POST answered) and the process (restarts keep them), and expires after a configured
time. Writes are group-committed: the writes arriving within `flush_delay` of each other, or
while a commit runs, share one statement and one commit, so the sixteen verdicts of a broadcast
cost one or two commits instead of sixteen. This matters more than the disk: every aiosqlite call
hands the GIL to its thread and back. `put` returns once its record is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiosqlite
import orjson

from broadcast.status import Status, Tally, tally
from broadcast.verdicts import Outcome, Reason, Verdict

SETTLED_CONFIRMATIONS = 6  # confirmations after which a record is no longer re-checked

SCHEMA = """
CREATE TABLE IF NOT EXISTS broadcast_records (
    txid TEXT PRIMARY KEY,
    raw_tx TEXT NOT NULL,
    status TEXT NOT NULL,
    reached INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    expires REAL NOT NULL,
    block_height INTEGER,
    confirmations INTEGER,
    nodes TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS broadcast_records_expires ON broadcast_records (expires);
CREATE INDEX IF NOT EXISTS broadcast_records_status ON broadcast_records (status, updated);
"""

_COLUMNS = (
    "txid, raw_tx, status, reached, created, updated, expires, block_height, confirmations, nodes"
)
_ROW_PLACEHOLDERS = "(" + ",".join("?" * 10) + ")"
MAX_ROWS_PER_STATEMENT = 500  # 5,000 bound values, far below SQLite's limit
DEFAULT_FLUSH_DELAY = 0.005


def _upsert(rows: int) -> str:
    values = ",".join([_ROW_PLACEHOLDERS] * rows)
    return f"INSERT OR REPLACE INTO broadcast_records ({_COLUMNS}) VALUES {values}"


@dataclass(frozen=True, slots=True)
class NodeSlot:
    """A configured node and its verdict (None while outstanding)."""

    node: str
    weight: float
    verdict: Verdict | None = None

    def state(self) -> str:
        return "outstanding" if self.verdict is None else self.verdict.outcome.value


@dataclass(frozen=True, slots=True)
class BroadcastRecord:
    txid: str  # display hex
    raw_hex: str
    created: float  # Unix seconds of the first submission
    updated: float
    expires: float
    slots: tuple[NodeSlot, ...]
    block_height: int | None = None  # set once a node reports the transaction confirmed
    confirmations: int | None = None

    @classmethod
    def new(
        cls, txid: str, raw_hex: str, nodes: Sequence[tuple[str, float]], now: float, ttl: float
    ) -> BroadcastRecord:
        slots = tuple(NodeSlot(name, weight) for name, weight in nodes)
        return cls(txid, raw_hex, now, now, now + ttl, slots)

    @property
    def tally(self) -> Tally:
        return tally([(s.weight, s.verdict) for s in self.slots])

    @property
    def status(self) -> Status:
        """The majority's status; a confirmed transaction is accepted whatever nodes said."""
        return Status.ACCEPTED if self.block_height is not None else self.tally.status

    @property
    def nodes_reached(self) -> int:
        return sum(1 for s in self.slots if s.verdict and s.verdict.outcome is Outcome.ACCEPTED)

    def slot_index(self, node: str) -> int | None:
        return next((i for i, s in enumerate(self.slots) if s.node == node), None)

    def with_verdict(self, index: int, verdict: Verdict, now: float) -> BroadcastRecord:
        slots = list(self.slots)
        slots[index] = replace(slots[index], verdict=verdict)
        return replace(self, slots=tuple(slots), updated=now)

    def with_confirmation(self, height: int, tip: int | None, now: float) -> BroadcastRecord:
        confirmations = None if tip is None else max(1, tip - height + 1)
        return replace(self, block_height=height, confirmations=confirmations, updated=now)

    def unconfirmed(self, now: float) -> BroadcastRecord:
        """A reorganisation took the transaction out of the chain."""
        return replace(self, block_height=None, confirmations=None, updated=now)

    def restarted(self, now: float, ttl: float) -> BroadcastRecord:
        """Every verdict cleared for a new fan-out (the same record, not a second one)."""
        slots = tuple(replace(s, verdict=None) for s in self.slots)
        return replace(self, slots=slots, updated=now, expires=now + ttl)

    def rejections(self) -> list[dict[str, object]]:
        """The nodes that refused the transaction, with the normalised reason and the node's raw
        message. Nodes without a verdict (timeouts, unreachable) are not refusals: they are in
        `nodes` with state `unknown`, so a client counting rejections counts what the majority
        rule counts."""
        out: list[dict[str, object]] = []
        for slot in self.slots:
            v = slot.verdict
            if v is not None and v.outcome is Outcome.REJECTED:
                reason = v.reason or Reason.OTHER
                out.append({"node": slot.node, "reason": reason.value, "message": v.message})
        return out

    def node_states(self) -> list[dict[str, object]]:
        """Every configured node's state, verdict and raw message (outstanding: nulls)."""
        return [
            {
                "node": s.node,
                "weight": s.weight,
                "state": s.state(),
                "reason": None
                if s.verdict is None or s.verdict.reason is None
                else s.verdict.reason.value,
                "message": None if s.verdict is None else s.verdict.message,
                "elapsed_ms": None if s.verdict is None else round(s.verdict.elapsed * 1000, 1),
            }
            for s in self.slots
        ]

    def to_json(self) -> dict[str, object]:
        """The status record as `GET /broadcast/status/<txid>` returns it."""
        t = self.tally
        return {
            "txid": self.txid,
            "status": self.status.value,
            "nodes_reached": self.nodes_reached,
            "nodes_total": t.nodes_total,
            "estimated_network_reach": round(t.estimated_network_reach, 4),
            "rejections": self.rejections(),
            "timestamp": int(self.created),
            "updated": int(self.updated),
            "block_height": self.block_height,
            "confirmations": self.confirmations,
            "nodes": self.node_states(),
        }

    def needs_recheck(self) -> bool:
        status = self.status
        if status in (Status.PENDING, Status.BROADCASTING):
            return True
        if self.block_height is None:
            return status is Status.ACCEPTED or self.nodes_reached > 0
        return self.confirmations is not None and self.confirmations < SETTLED_CONFIRMATIONS


def _row(record: BroadcastRecord) -> tuple[Any, ...]:
    nodes = [
        {
            "node": s.node,
            "weight": s.weight,
            "verdict": None if s.verdict is None else s.verdict.to_json(),
        }
        for s in record.slots
    ]
    return (
        record.txid,
        record.raw_hex,
        record.status.value,
        record.nodes_reached,
        record.created,
        record.updated,
        record.expires,
        record.block_height,
        record.confirmations,
        orjson.dumps(nodes).decode(),
    )


def _record(row: Sequence[Any]) -> BroadcastRecord:
    txid, raw_tx, _status, _reached, created, updated, expires, height, confs, nodes = row
    slots = tuple(
        NodeSlot(
            str(n["node"]),
            float(n["weight"]),
            None if n["verdict"] is None else Verdict.from_json(n["verdict"]),
        )
        for n in orjson.loads(nodes)
    )
    return BroadcastRecord(txid, raw_tx, created, updated, expires, slots, height, confs)


class RecordStore:
    """Use `await RecordStore.open(path)`. `clock` gives Unix seconds (tests pass their own)."""

    def __init__(
        self,
        db: aiosqlite.Connection,
        clock: Callable[[], float],
        flush_delay: float = DEFAULT_FLUSH_DELAY,
    ) -> None:
        self._db = db
        self.clock = clock
        self.flush_delay = flush_delay
        self._pending: dict[str, BroadcastRecord] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._flusher: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        path: str,
        *,
        clock: Callable[[], float] = time.time,
        flush_delay: float = DEFAULT_FLUSH_DELAY,
    ) -> RecordStore:
        # Autocommit: each statement is its own transaction, so a batch is one call.
        db = await aiosqlite.connect(path, isolation_level=None)
        try:
            if path != ":memory:":
                await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            await db.executescript(SCHEMA)
        except BaseException:
            await db.close()
            raise
        return cls(db, clock, flush_delay)

    async def close(self) -> None:
        if self._flusher is not None:
            with contextlib.suppress(Exception):
                await self._flusher
        await self._db.close()

    # --- writes -------------------------------------------------------------------------------

    async def put(self, record: BroadcastRecord) -> None:
        """Insert or replace `record`; returns once it is committed."""
        self._pending[record.txid] = record
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush())
        await asyncio.shield(fut)

    async def _flush(self) -> None:
        while self._pending:
            if self.flush_delay > 0:
                await asyncio.sleep(self.flush_delay)  # let the burst arrive
            batch, self._pending = self._pending, {}
            waiters, self._waiters = self._waiters, []
            rows = [_row(r) for r in batch.values()]
            try:
                for start in range(0, len(rows), MAX_ROWS_PER_STATEMENT):
                    chunk = rows[start : start + MAX_ROWS_PER_STATEMENT]
                    await self._db.execute(_upsert(len(chunk)), [v for r in chunk for v in r])
            except Exception as exc:
                for w in waiters:
                    if not w.done():
                        w.set_exception(exc)
                continue
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    async def flush(self) -> None:
        """Wait until every write made so far is committed (queries see them then)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def purge_expired(self) -> int:
        await self.flush()
        cursor = await self._db.execute(
            "DELETE FROM broadcast_records WHERE expires <= ?", (self.clock(),)
        )
        return cursor.rowcount

    # --- reads --------------------------------------------------------------------------------

    async def get(self, txid: str) -> BroadcastRecord | None:
        """The record of `txid`, unless it has expired."""
        record = self._pending.get(txid)
        if record is None:
            rows = await self._db.execute_fetchall(
                f"SELECT {_COLUMNS} FROM broadcast_records WHERE txid = ?", (txid,)
            )
            record = next((_record(row) for row in rows), None)
        if record is None or record.expires <= self.clock():
            return None
        return record

    async def due(self, limit: int = 500) -> list[BroadcastRecord]:
        """Unexpired records whose fate is still open, least recently updated first."""
        await self.flush()
        async with self._db.execute(
            f"SELECT {_COLUMNS} FROM broadcast_records "
            "WHERE expires > ? AND (status IN ('pending', 'broadcasting') "
            "OR (block_height IS NULL AND (status = 'accepted' OR reached > 0)) "
            "OR (confirmations IS NOT NULL AND confirmations < ?)) "
            "ORDER BY updated LIMIT ?",
            (self.clock(), SETTLED_CONFIRMATIONS, limit),
        ) as cursor:
            rows = await cursor.fetchall()
        return [_record(r) for r in rows]

    async def count(self) -> int:
        await self.flush()
        async with self._db.execute("SELECT COUNT(*) FROM broadcast_records") as cursor:
            row = await cursor.fetchone()
        return 0 if row is None else int(row[0])
