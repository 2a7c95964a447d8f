"""Which unconfirmed transactions the index applies to live state, and what they spend.

The decoders hold each transaction's *effects*; this holds its inputs, so that when a block
arrives the store can tell which pending transactions lost a double-spend race (a block
transaction spends one of their inputs) and which depend on a loser (spend its outputs). Only
transactions some decoder applied are tracked; nothing here is persisted (after a restart the
follower re-reads the node's mempool).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from bch.tx import OutPoint, Transaction


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
