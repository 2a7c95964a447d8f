"""The mempool's side of the store: which unconfirmed transactions the index applies to live
state (`Mempool`: offered to the decoders, evicted, settled by blocks), and what they spend
(`MempoolTracker`).

The decoders hold each transaction's *effects*; the tracker holds its inputs, so that when a
block arrives the store can tell which pending transactions lost a double-spend race (a block
transaction spends one of their inputs) and which depend on a loser (spend its outputs). Only
transactions some decoder applied are tracked; nothing here is persisted (after a restart the
follower re-reads the node's mempool). Live state only: the tables never see a mempool
transaction (the overlay beside them is `indexer.store.overlay`).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence

from bch.tx import OutPoint, Transaction
from indexer.store.decoder import AnyDecoder, BlockContext, BlockTx, matches
from indexer.store.source import BlockSource
from indexer.store.writer import Writer

# Up to this many pending outpoints, conflicts are found by searching the raw block for each
# outpoint; beyond it every block transaction is decoded once instead.
_SEARCH_LIMIT = 256


class MempoolTracker:
    def __init__(self) -> None:
        self._inputs: dict[bytes, tuple[OutPoint, ...]] = {}  # txid → inputs, arrival order
        self._spender: dict[OutPoint, bytes] = {}

    def __contains__(self, txid: object) -> bool:
        return txid in self._inputs

    def __len__(self) -> int:
        return len(self._inputs)

    def txids(self) -> set[bytes]:
        return set(self._inputs)

    def spenders(self) -> dict[OutPoint, bytes]:
        """Every outpoint a tracked transaction spends → that transaction."""
        return dict(self._spender)

    def add(self, txid: bytes, tx: Transaction) -> None:
        if txid in self._inputs:
            return
        ops = tuple(i.outpoint for i in tx.inputs)
        self._inputs[txid] = ops
        for op in ops:
            self._spender.setdefault(op, txid)

    def discard(self, txids: Iterable[bytes]) -> None:
        for txid in txids:
            for op in self._inputs.pop(txid, ()):
                if self._spender.get(op) == txid:
                    del self._spender[op]

    def retain(self, keep: Collection[bytes]) -> None:
        """Forget every transaction not in `keep` (the decoders dropped them themselves)."""
        self.discard([t for t in self._inputs if t not in keep])

    def descendants(self, txids: Collection[bytes]) -> set[bytes]:
        """Tracked transactions spending outputs of `txids`, transitively (excluding them).

        One pass in arrival order suffices: a child arrives after its parent.
        """
        doomed = set(txids)
        found: set[bytes] = set()
        for txid, ops in self._inputs.items():
            if txid not in doomed and any(op.txid in doomed for op in ops):
                doomed.add(txid)
                found.add(txid)
        return found


class Mempool:
    """The unconfirmed transactions the decoders apply, kept consistent with the blocks."""

    def __init__(self, decoders: Sequence[AnyDecoder]) -> None:
        self.decoders = decoders
        self.tracker = MempoolTracker()

    def __contains__(self, txid: object) -> bool:
        return txid in self.tracker

    def __len__(self) -> int:
        return len(self.tracker)

    async def add(self, db: Writer, height: int, txid: bytes, tx: Transaction, raw: bytes) -> bool:
        """Offer a transaction that could enter the block at `height` to every decoder whose
        selection rule it passes; True if one applied it."""
        ctx = BlockContext(height, int(time.time()), b"")
        btx = BlockTx(-1, txid, tx)
        used = False
        for d in self.decoders:
            if matches(d.patterns, raw) and await d.mempool_add(db, ctx, btx):
                used = True
        if used:
            self.tracker.add(txid, tx)
        return used

    def evict(self, txids: Iterable[bytes]) -> set[bytes]:
        """Drop these (and their descendants) from live state; the ones that were there."""
        gone = {t for t in txids if t in self.tracker}
        gone |= self.tracker.descendants(gone)
        if gone:
            for d in self.decoders:
                d.mempool_evict(gone)
            self.retain()
        return gone

    def conflicts(self, src: BlockSource) -> set[bytes]:
        """Pending txs that a block transaction double-spends, plus their descendants."""
        in_block = set(src.txids)
        pending = {op: t for op, t in self.tracker.spenders().items() if t not in in_block}
        if not pending:
            return set()
        losers: set[bytes] = set()
        if len(pending) <= _SEARCH_LIMIT:
            for op, txid in pending.items():
                for i in src.find(op.encode()):
                    if any(inp.outpoint == op for inp in src.transaction(i).inputs):
                        losers.add(txid)
        else:
            for i in range(len(src)):
                for inp in src.transaction(i).inputs:
                    loser = pending.get(inp.outpoint)
                    if loser is not None:
                        losers.add(loser)
        return losers | self.tracker.descendants(losers)

    def settled(self, txids: Iterable[bytes]) -> None:
        """A block confirmed `txids`; forget them and whatever the decoders dropped."""
        self.tracker.discard(txids)
        self.retain()

    def retain(self) -> None:
        """Keep tracking only what some decoder still applies."""
        keep: set[bytes] = set()
        for d in self.decoders:
            keep.update(d.mempool_txids())
        self.tracker.retain(keep)
