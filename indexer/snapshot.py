"""The router's live pool snapshot: every pool UTXO that can be traded now, per token.

Live = confirmed pools (from the index) with the mempool applied on top: pools spent by an
unconfirmed transaction disappear and its continuations/creations appear (with `height=None`).
The indexer is the only writer (the Cauldron decoder calls the `apply_*`/`*_pending` methods);
the router reads it in-process. Every write that changes anything bumps `version` once and
reports one `SnapshotChange` per token it touched. See docs/snapshot.md.

Pure in-memory and synchronous: callbacks run inside the write, after the state is complete.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from dataclasses import dataclass

from bch.tx import OutPoint


@dataclass(frozen=True, slots=True)
class LivePool:
    """One tradable pool UTXO. `token_id` is the display-order category hex."""

    outpoint: OutPoint
    lineage: OutPoint  # first outpoint of the pool's lineage; `pool_id` is its string form
    owner_pkh: bytes
    token_id: str
    sats: int
    tokens: int
    height: int | None  # block that created this UTXO; None while unconfirmed

    @property
    def txid(self) -> str:
        return self.outpoint.txid_hex

    @property
    def vout(self) -> int:
        return self.outpoint.index

    @property
    def pool_id(self) -> str:
        return f"{self.lineage.txid_hex}:{self.lineage.index}"

    @property
    def category(self) -> bytes:
        """Wire-order category bytes (for building token prefixes)."""
        return bytes.fromhex(self.token_id)[::-1]


@dataclass(frozen=True, slots=True)
class PendingTx:
    """An unconfirmed transaction's effect on the live pools."""

    txid: bytes  # wire order
    spent: tuple[OutPoint, ...]  # live pools it spends
    created: tuple[LivePool, ...]  # pools it creates or continues (height None)


@dataclass(frozen=True, slots=True)
class SnapshotChange:
    """What one write did to one token's live pools. Apply `removed`, then `added`: a pool
    that was confirmed keeps its outpoint and appears in both (height None → h)."""

    token: str
    added: tuple[LivePool, ...]
    removed: tuple[LivePool, ...]
    version: int


Subscriber = Callable[[SnapshotChange], None]
_Delta = tuple[str, tuple[LivePool, ...], tuple[LivePool, ...]]  # token, added, removed


class PoolSnapshot:
    """Confirmed + mempool pools per token, with a change feed."""

    def __init__(self) -> None:
        self._confirmed: dict[str, dict[OutPoint, LivePool]] = {}
        self._confirmed_at: dict[OutPoint, LivePool] = {}
        self._pending: dict[bytes, PendingTx] = {}  # arrival order
        self._spent_by: dict[OutPoint, bytes] = {}  # live pools spent by a pending tx
        self._spent_pools: dict[OutPoint, LivePool] = {}  # … and what they were
        self._created_at: dict[OutPoint, LivePool] = {}  # pools pending txs create
        self._live: dict[str, dict[OutPoint, LivePool]] = {}
        self._live_at: dict[OutPoint, LivePool] = {}
        self._subscribers: list[Subscriber] = []
        self.version = 0
        self.height: int | None = None  # confirmed tip the snapshot reflects

    # --- reading -------------------------------------------------------------------------------

    def pools(self, token: str) -> list[LivePool]:
        """Live pools of a token (display-hex category), in no particular order."""
        return list(self._live.get(token, {}).values())

    def pool(self, outpoint: OutPoint) -> LivePool | None:
        return self._live_at.get(outpoint)

    def tokens(self) -> list[str]:
        return [t for t, pools in self._live.items() if pools]

    def all_pools(self) -> list[LivePool]:
        return list(self._live_at.values())

    def __len__(self) -> int:
        return len(self._live_at)

    def pending(self) -> list[PendingTx]:
        """Unconfirmed transactions currently applied, in arrival order."""
        return list(self._pending.values())

    @property
    def has_pending(self) -> bool:
        """Whether any unconfirmed transaction is applied."""
        return bool(self._pending)

    def is_pending(self, txid: bytes) -> bool:
        return txid in self._pending

    def pending_txids(self) -> set[bytes]:
        return set(self._pending)

    def spent_by_pending(self, outpoint: OutPoint) -> bytes | None:
        """The unconfirmed transaction spending this pool, if any."""
        return self._spent_by.get(outpoint)

    def is_confirmed_pool(self, outpoint: OutPoint) -> bool:
        return outpoint in self._confirmed_at

    def confirmed_pool(self, outpoint: OutPoint) -> LivePool | None:
        """The confirmed pool at this outpoint, whatever the mempool does with it (the
        indexer's decoder reads the pools a block spends here instead of from SQLite)."""
        return self._confirmed_at.get(outpoint)

    # --- change feed ---------------------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback` with every change, synchronously, in order; returns unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def watch(self) -> SnapshotWatcher:
        """An async, coalescing view of the feed for consumers that may fall behind."""
        return SnapshotWatcher(self)

    # --- writing (the indexer) -----------------------------------------------------------------

    def replace_confirmed(self, pools: Iterable[LivePool], height: int | None) -> None:
        """Load (or reload after a reorg) the confirmed pools; pending txs are re-validated."""
        touched = set(self._confirmed)
        self._confirmed = {}
        self._confirmed_at = {}
        for p in pools:
            self._confirmed.setdefault(p.token_id, {})[p.outpoint] = p
            self._confirmed_at[p.outpoint] = p
        touched.update(self._confirmed)
        self.height = height
        self._settle(touched)

    def apply_block(
        self,
        removed: Iterable[OutPoint],
        added: Iterable[LivePool],
        confirmed_txids: Collection[bytes],
        evicted: Collection[bytes] = (),
        height: int | None = None,
    ) -> None:
        """A block was committed: confirmed pools it spent and created; its txids leave the
        mempool, `evicted` too, and pending txs that no longer fit are dropped."""
        if not self._pending:
            self._apply_block_alone(removed, added, height)
            return
        touched: set[str] = set()
        for op in removed:
            p = self._confirmed_at.pop(op, None)
            if p is not None:
                del self._confirmed[p.token_id][op]
                touched.add(p.token_id)
        for p in added:
            self._confirmed.setdefault(p.token_id, {})[p.outpoint] = p
            self._confirmed_at[p.outpoint] = p
            touched.add(p.token_id)
        gone = set(confirmed_txids) | set(evicted)
        for txid in [t for t in self._pending if t in gone]:
            del self._pending[txid]
        if height is not None:
            self.height = height
        self._settle(touched)

    def _apply_block_alone(
        self, removed: Iterable[OutPoint], added: Iterable[LivePool], height: int | None
    ) -> None:
        """`apply_block` with no pending transaction (e.g. the whole initial sync): the live
        set *is* the confirmed set, so only the block's pools change — no rebuild of its
        tokens' live sets, which costs O(pools of the token) per block (thousands for the
        busiest token)."""
        if self._subscribers:
            self._apply_block_alone_feed(removed, added)
        else:  # (the initial sync's case: the same moves, with no change feed to build)
            confirmed, confirmed_at = self._confirmed, self._confirmed_at
            live, live_at = self._live, self._live_at
            pop_confirmed = confirmed_at.pop
            tokens: set[str] = set()
            for op in removed:
                p = pop_confirmed(op, None)
                if p is not None:
                    token = p.token_id
                    del confirmed[token][op]
                    del live[token][op]
                    del live_at[op]
                    tokens.add(token)
            for p in added:
                op, token = p.outpoint, p.token_id
                old = confirmed_at.get(op)
                if old is not None:  # (an outpoint is created once; kept exact all the same)
                    if old == p:
                        continue
                    del confirmed[old.token_id][op]
                    del live[old.token_id][op]
                    tokens.add(old.token_id)
                by_op = confirmed.get(token)
                if by_op is None:
                    by_op = confirmed[token] = {}
                by_op[op] = p
                confirmed_at[op] = p
                by_op = live.get(token)
                if by_op is None:
                    by_op = live[token] = {}
                by_op[op] = p
                live_at[op] = p
                tokens.add(token)
            for token in tokens:
                if not live.get(token):
                    live.pop(token, None)
            if tokens:
                self.version += 1
        if height is not None:
            self.height = height

    def _apply_block_alone_feed(
        self, removed: Iterable[OutPoint], added: Iterable[LivePool]
    ) -> None:
        """`_apply_block_alone`'s moves, publishing the changes."""
        changes: dict[str, tuple[list[LivePool], list[LivePool]]] = {}

        def drop(op: OutPoint) -> None:
            p = self._confirmed_at.pop(op, None)
            if p is not None:
                del self._confirmed[p.token_id][op]
                del self._live[p.token_id][op]
                del self._live_at[op]
                changes.setdefault(p.token_id, ([], []))[1].append(p)

        for op in removed:
            drop(op)
        for p in added:
            old = self._confirmed_at.get(p.outpoint)
            if old is not None:  # (an outpoint is created once; kept exact all the same)
                if old == p:
                    continue
                drop(p.outpoint)
            self._confirmed.setdefault(p.token_id, {})[p.outpoint] = p
            self._confirmed_at[p.outpoint] = p
            self._live.setdefault(p.token_id, {})[p.outpoint] = p
            self._live_at[p.outpoint] = p
            changes.setdefault(p.token_id, ([], []))[0].append(p)
        for token in changes:
            if not self._live.get(token):
                self._live.pop(token, None)
        self._publish([(t, tuple(a), tuple(r)) for t, (a, r) in changes.items()])

    def add_pending(self, ptx: PendingTx) -> bool:
        """Apply an unconfirmed transaction; False (and no change) if it spends a pool that is
        not live (already spent by another pending tx, or unknown) or is already applied."""
        if ptx.txid in self._pending or len(set(ptx.spent)) != len(ptx.spent):
            return False
        if any(op not in self._live_at for op in ptx.spent):
            return False
        if any(
            p.outpoint in self._live_at or p.outpoint in self._confirmed_at for p in ptx.created
        ):
            return False
        self._pending[ptx.txid] = ptx
        removed: dict[str, list[LivePool]] = {}
        added: dict[str, list[LivePool]] = {}
        for op in ptx.spent:
            p = self._live_at.pop(op)
            self._spent_by[op] = ptx.txid
            self._spent_pools[op] = p
            del self._live[p.token_id][op]
            removed.setdefault(p.token_id, []).append(p)
        for p in ptx.created:
            self._created_at[p.outpoint] = p
            self._live.setdefault(p.token_id, {})[p.outpoint] = p
            self._live_at[p.outpoint] = p
            added.setdefault(p.token_id, []).append(p)
        self._publish(
            [(t, tuple(added.get(t, ())), tuple(removed.get(t, ()))) for t in {*removed, *added}]
        )
        return True

    def evict(self, txids: Iterable[bytes]) -> set[bytes]:
        """Drop unconfirmed transactions and those depending on them; returns all dropped."""
        gone = set(txids) & set(self._pending)
        if not gone:
            return set()
        for txid in gone:
            del self._pending[txid]
        dropped = self._settle(set())
        return gone | dropped

    # --- internals -----------------------------------------------------------------------------

    def _settle(self, touched: set[str]) -> set[bytes]:
        """Re-validate pending txs in arrival order against the confirmed pools, rebuild the
        tokens whose live set may differ, publish. Returns the pending txids dropped."""
        spent_by: dict[OutPoint, bytes] = {}
        created_at: dict[OutPoint, LivePool] = {}
        dropped: set[bytes] = set()
        confirmed = self._confirmed_at
        for txid, ptx in list(self._pending.items()):
            fits = all(
                op not in spent_by and (op in confirmed or op in created_at) for op in ptx.spent
            ) and not any(p.outpoint in confirmed or p.outpoint in created_at for p in ptx.created)
            if not fits:
                del self._pending[txid]
                dropped.add(txid)
                continue
            for op in ptx.spent:
                spent_by[op] = txid
            for p in ptx.created:
                created_at[p.outpoint] = p
        for op in self._spent_by.keys() ^ spent_by.keys():
            was = self._spent_pools.get(op) or confirmed.get(op) or created_at.get(op)
            if was is not None:
                touched.add(was.token_id)
        for op in self._created_at.keys() ^ created_at.keys():
            touched.add((self._created_at.get(op) or created_at[op]).token_id)
        self._spent_by = spent_by
        self._created_at = created_at
        self._spent_pools = {}
        for op in spent_by:
            was = confirmed.get(op) or created_at.get(op)
            if was is not None:
                self._spent_pools[op] = was
        changes: list[_Delta] = []
        for token in touched:
            fresh = {
                op: p for op, p in self._confirmed.get(token, {}).items() if op not in spent_by
            }
            for op, p in created_at.items():
                if p.token_id == token and op not in spent_by:
                    fresh[op] = p
            old = self._live.get(token, {})
            added = tuple(p for op, p in fresh.items() if old.get(op) != p)
            removed = tuple(p for op, p in old.items() if fresh.get(op) != p)
            for p in removed:
                del self._live_at[p.outpoint]
            for p in added:
                self._live_at[p.outpoint] = p
            if fresh:
                self._live[token] = fresh
            else:
                self._live.pop(token, None)
            if added or removed:
                changes.append((token, added, removed))
        self._publish(changes)
        return dropped

    def _publish(
        self, changes: list[tuple[str, tuple[LivePool, ...], tuple[LivePool, ...]]]
    ) -> None:
        if not changes:
            return
        self.version += 1
        if not self._subscribers:
            return
        out = [SnapshotChange(t, a, r, self.version) for t, a, r in sorted(changes)]
        for callback in list(self._subscribers):
            for change in out:
                callback(change)


class SnapshotWatcher:
    """Coalesces the feed per token until the consumer asks: `await next()` returns, for each
    token changed since the previous call, the net added/removed pools and the latest version.
    A slow consumer therefore holds at most one entry per token, never an unbounded queue."""

    def __init__(self, snapshot: PoolSnapshot) -> None:
        self._added: dict[str, dict[OutPoint, LivePool]] = {}
        self._removed: dict[str, dict[OutPoint, LivePool]] = {}
        self._version = 0
        self._ready = asyncio.Event()
        self._unsubscribe = snapshot.subscribe(self._on_change)

    def _on_change(self, change: SnapshotChange) -> None:
        added = self._added.setdefault(change.token, {})
        removed = self._removed.setdefault(change.token, {})
        for p in change.removed:
            if added.get(p.outpoint) == p:
                del added[p.outpoint]  # appeared and vanished since the last read
            else:
                removed[p.outpoint] = p
        for p in change.added:
            if removed.get(p.outpoint) == p:
                del removed[p.outpoint]  # vanished and came back unchanged
            else:
                added[p.outpoint] = p
        self._version = change.version
        self._ready.set()

    def drain(self) -> list[SnapshotChange]:
        """Whatever has accumulated (possibly nothing), without waiting."""
        out = []
        for token in sorted(set(self._added) | set(self._removed)):
            added = tuple(self._added.get(token, {}).values())
            removed = tuple(self._removed.get(token, {}).values())
            if added or removed:
                out.append(SnapshotChange(token, added, removed, self._version))
        self._added.clear()
        self._removed.clear()
        self._ready.clear()
        return out

    async def next(self) -> list[SnapshotChange]:
        """Wait until something changed, then return the coalesced changes."""
        while True:
            await self._ready.wait()
            out = self.drain()
            if out:
                return out

    def __aiter__(self) -> AsyncIterator[list[SnapshotChange]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[list[SnapshotChange]]:
        while True:
            yield await self.next()

    def close(self) -> None:
        self._unsubscribe()
