"""Fan-out: one transaction to every configured node at once, each verdict recorded as it comes.

`submit` returns as soon as the outcome is known (`Tally.settled`: a majority either way, or a
split no outstanding node can change), not after the slowest node; the remaining verdicts keep
updating the record in the background. Sending to everyone at the same instant is the point:
a pool trade that reaches some mempools long before others invites a conflicting trade to win
the rest.

`recheck` resolves what the fan-out could not: nodes that timed out or could not be reached are
asked `transaction.get_height` (and sent the transaction again if they do not have it), and
accepted transactions are followed until they are confirmed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field

from broadcast.nodes import NodeLink, NodeUnavailable
from broadcast.records import BroadcastRecord, RecordStore
from broadcast.status import Status
from broadcast.verdicts import Classification, Outcome, Reason, Verdict
from runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)


def needs_sending(record: BroadcastRecord | None) -> bool:
    """Whether a POST of this transaction fans it out (again): when it is new, was rejected by
    a majority (the cause may be gone: a parent arrived), or no node is known to hold it.
    Otherwise the POST is answered from the record, and the re-checks follow it up."""
    if record is None or record.status is Status.REJECTED:
        return True
    return record.status is not Status.ACCEPTED and record.nodes_reached == 0


@dataclass(eq=False, slots=True)
class _Flight:
    """A fan-out in progress: the freshest record and who waits for its outcome."""

    record: BroadcastRecord
    settled: asyncio.Event = field(default_factory=asyncio.Event)  # the outcome is known
    done: asyncio.Event = field(default_factory=asyncio.Event)  # every verdict is in
    remaining: int = 0


class Broadcaster:
    def __init__(
        self,
        links: Sequence[NodeLink],
        store: RecordStore,
        *,
        record_ttl: float,
        missing_inputs_retry: float | None = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not links:
            raise ValueError("at least one node is needed")
        self.links = tuple(links)
        self._by_name = {link.name: link for link in self.links}
        self.store = store
        self.record_ttl = record_ttl
        self.missing_inputs_retry = missing_inputs_retry
        self.clock = clock
        self._flights: dict[str, _Flight] = {}
        self._asks: set[asyncio.Task[None]] = set()
        self._saves: set[asyncio.Task[None]] = set()
        self._recheck_lock = asyncio.Lock()

    async def close(self) -> None:
        """Stop outstanding node calls (their verdicts stay outstanding, to be re-checked after
        a restart) and let the writes already started finish."""
        await cancel_and_wait(list(self._asks))
        if self._saves:
            await asyncio.gather(*self._saves, return_exceptions=True)

    # --- submitting ---------------------------------------------------------------------------

    def live(self, txid: str) -> BroadcastRecord | None:
        """The freshest record of a fan-out still in progress."""
        flight = self._flights.get(txid)
        return None if flight is None else flight.record

    async def complete(self, txid: str) -> BroadcastRecord | None:
        """The record once every node of the current fan-out has answered (or timed out)."""
        flight = self._flights.get(txid)
        if flight is not None:
            await flight.done.wait()
            return flight.record
        return await self.record(txid)

    async def record(self, txid: str) -> BroadcastRecord | None:
        """The freshest record of `txid` (in flight or stored), unless expired."""
        record = self.live(txid) or await self.store.get(txid)
        return None if record is None or record.expires <= self.clock() else record

    async def submit(
        self,
        raw_hex: str,
        txid: str,
        *,
        before_sending: Callable[[], Awaitable[None]] | None = None,
    ) -> BroadcastRecord:
        """Broadcast and return the record once the outcome is known. A known transaction is
        not sent again (see `needs_sending`); a second request for one in flight waits for the
        same fan-out. `before_sending` runs only when the transaction is about to be sent (the
        protection rules), and may raise to stop it."""
        flight = self._flights.get(txid)
        if flight is None:
            existing = await self.record(txid)
            flight = self._flights.get(txid)  # another request may have started meanwhile
            if flight is None and not needs_sending(existing):
                assert existing is not None
                return existing
            if flight is None and before_sending is not None:
                await before_sending()
                flight = self._flights.get(txid)
            if flight is None:
                flight = self._start(raw_hex, txid, existing)
        await flight.settled.wait()
        return flight.record

    def _start(self, raw_hex: str, txid: str, existing: BroadcastRecord | None) -> _Flight:
        """Register the fan-out and send to every node at once. Writing the record is not
        awaited first: a crash before it lands loses nothing a re-post would not redo."""
        now = self.clock()
        if existing is None:
            nodes = [(link.name, link.weight) for link in self.links]
            record = BroadcastRecord.new(txid, raw_hex, nodes, now, self.record_ttl)
        else:
            record = existing.restarted(now, self.record_ttl)
        flight = _Flight(record)
        self._flights[txid] = flight
        for index, slot in enumerate(record.slots):
            link = self._by_name.get(slot.node)
            if link is None:  # configured before a restart, gone now
                gone = Verdict(
                    slot.node, Outcome.UNKNOWN, Reason.UNKNOWN, "this node is no longer configured"
                )
                flight.record = flight.record.with_verdict(index, gone, now)
                continue
            flight.remaining += 1
            self._spawn(self._asks, self._ask(flight, index, link, raw_hex, txid))
        self._spawn(self._saves, self._save_latest(flight))
        if flight.remaining == 0:
            self._flights.pop(txid, None)
            flight.settled.set()
            flight.done.set()
        return flight

    @staticmethod
    def _spawn(tasks: set[asyncio.Task[None]], coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _save(self, record: BroadcastRecord) -> None:
        try:
            await self.store.put(record)
        except Exception:
            log.exception("writing the broadcast record of %s failed", record.txid)

    async def _save_latest(self, flight: _Flight) -> None:
        """The first write of a fan-out, as a task: by the time it runs, a node may have
        answered and its verdict been written (an unreachable node answers at once), so it
        writes the flight's freshest record, never the empty one over theirs."""
        await self._save(flight.record)

    async def _ask(
        self, flight: _Flight, index: int, link: NodeLink, raw_hex: str, txid: str
    ) -> None:
        """One node's verdict: recorded in the flight at once (the POST may answer on it), then
        written; the flight ends when every verdict is written."""
        try:
            verdict = await link.send(raw_hex, txid)
            if verdict.reason is Reason.MISSING_INPUTS and self.missing_inputs_retry is not None:
                # The parent may still be travelling to this node: ask once more (the table's
                # "retry once"); a second refusal stands.
                await asyncio.sleep(self.missing_inputs_retry)
                verdict = await link.send(raw_hex, txid)
            flight.record = flight.record.with_verdict(index, verdict, self.clock())
            if flight.record.tally.settled:
                flight.settled.set()
            await self._save(flight.record)
        finally:
            flight.remaining -= 1
            if flight.remaining == 0:
                self._flights.pop(txid, None)
                flight.settled.set()
                flight.done.set()

    # --- re-checking --------------------------------------------------------------------------

    async def recheck(self, limit: int = 500) -> int:
        """One pass over the records whose fate is open; returns how many changed."""
        async with self._recheck_lock:
            await self.store.purge_expired()
            records = [r for r in await self.store.due(limit) if r.txid not in self._flights]
            if not records:
                return 0
            tips = await self._tips()
            changed = 0
            for record in records:
                updated = await self._recheck_one(record, tips)
                if updated is not record:
                    await self.store.put(updated)
                    changed += 1
            return changed

    async def _tips(self) -> dict[str, int]:
        async def one(link: NodeLink) -> tuple[str, int | None]:
            try:
                height, _ = await link.tip()
            except NodeUnavailable:
                return link.name, None
            return link.name, height

        answers = await asyncio.gather(*(one(link) for link in self.links))
        return {name: height for name, height in answers if height is not None}

    async def _recheck_one(self, record: BroadcastRecord, tips: dict[str, int]) -> BroadcastRecord:
        """Ask every node that has not rejected the transaction whether it has it now (all at
        once), then fold the answers into the record."""
        probes = await asyncio.gather(
            *(self._probe(record, slot.node, slot.verdict) for slot in record.slots)
        )
        now = self.clock()
        heights = [h for answered, h, _ in probes if answered and h is not None and h > 0]
        for index, (_, _, new) in enumerate(probes):
            if new is not None and not _same(new, record.slots[index].verdict):
                record = record.with_verdict(index, new, now)
        if heights:
            height = max(sorted(set(heights)), key=heights.count)  # the nodes' majority view
            tip = max(tips.values()) if tips else None
            confirmed = record.with_confirmation(height, tip, now)
            if (confirmed.block_height, confirmed.confirmations) != (
                record.block_height,
                record.confirmations,
            ):
                record = confirmed
        elif any(answered for answered, _, _ in probes) and record.block_height is not None:
            record = record.unconfirmed(now)
        return record

    async def _probe(
        self, record: BroadcastRecord, node: str, old: Verdict | None
    ) -> tuple[bool, int | None, Verdict | None]:
        """(answered, height, new verdict or None) for one node."""
        link = self._by_name.get(node)
        if link is None or (old is not None and old.outcome is Outcome.REJECTED):
            return False, None, None  # a rejection stands; so does a node no longer configured
        try:
            height = await link.transaction_height(record.txid)
        except NodeUnavailable:
            return False, None, None
        if height is not None and (old is None or old.outcome is not Outcome.ACCEPTED):
            found = Classification(Outcome.ACCEPTED, None, confirmed=height > 0)
            return True, height, Verdict.of(link.name, found, "found by transaction.get_height")
        if height is None and (old is None or old.outcome is Outcome.UNKNOWN):
            return True, None, await link.send(record.raw_hex, record.txid)  # never arrived
        if height is None and old is not None and old.outcome is Outcome.ACCEPTED:
            lost = "accepted earlier, no longer known to this node (evicted or reorganised)"
            return True, None, Verdict(link.name, Outcome.UNKNOWN, Reason.UNKNOWN, lost)
        return True, height, None


def _same(a: Verdict, b: Verdict | None) -> bool:
    """Equal but for timing: re-checks that learn nothing new do not touch the record."""
    return b is not None and (a.outcome, a.reason, a.message, a.confirmed) == (
        b.outcome,
        b.reason,
        b.message,
        b.confirmed,
    )
