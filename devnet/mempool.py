"""A node's mempool: accepted transactions, the outpoints they spend, a scripthash index.

First seen wins: nothing here replaces an entry. Entries are kept in acceptance order, which
is a topological order (a child is only accepted after its parents).
"""

from __future__ import annotations

from dataclasses import dataclass

from bch.script import scripthash
from bch.tx import OutPoint, Transaction, TxOutput
from devnet.chain import is_unspendable


@dataclass(frozen=True, slots=True)
class MempoolEntry:
    tx: Transaction
    txid: bytes
    fee: int
    size: int
    time: int
    source_outputs: tuple[TxOutput, ...]

    def scripthashes(self) -> set[bytes]:
        shs = {scripthash(o.locking) for o in self.tx.outputs if not is_unspendable(o.locking)}
        shs.update(scripthash(o.locking) for o in self.source_outputs)
        return shs


class Mempool:
    def __init__(self) -> None:
        self.entries: dict[bytes, MempoolEntry] = {}
        self.spends: dict[OutPoint, bytes] = {}
        self.sh_index: dict[bytes, set[bytes]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, txid: bytes) -> bool:
        return txid in self.entries

    def output(self, op: OutPoint) -> TxOutput | None:
        """An output created by a mempool transaction (spent or not)."""
        entry = self.entries.get(op.txid)
        if entry is None or op.index >= len(entry.tx.outputs):
            return None
        return entry.tx.outputs[op.index]

    def has_unconfirmed_parent(self, entry: MempoolEntry) -> bool:
        return any(i.outpoint.txid in self.entries for i in entry.tx.inputs)

    def electrum_height(self, entry: MempoolEntry) -> int:
        """0 when every input is confirmed, -1 when a parent is still in the mempool."""
        return -1 if self.has_unconfirmed_parent(entry) else 0

    def add(self, entry: MempoolEntry) -> set[bytes]:
        self.entries[entry.txid] = entry
        for inp in entry.tx.inputs:
            self.spends[inp.outpoint] = entry.txid
        touched = entry.scripthashes()
        for sh in touched:
            self.sh_index.setdefault(sh, set()).add(entry.txid)
        return touched

    def descendants(self, txid: bytes) -> list[bytes]:
        """`txid` and every mempool transaction depending on it, parents first."""
        order: list[bytes] = []
        stack = [txid]
        seen: set[bytes] = set()
        while stack:
            current = stack.pop()
            if current in seen or current not in self.entries:
                continue
            seen.add(current)
            order.append(current)
            entry = self.entries[current]
            for i in range(len(entry.tx.outputs)):
                child = self.spends.get(OutPoint(current, i))
                if child is not None:
                    stack.append(child)
        return order

    def remove(self, txid: bytes) -> tuple[list[MempoolEntry], set[bytes]]:
        """Remove `txid` and its descendants; return them and the scripthashes touched."""
        removed: list[MempoolEntry] = []
        touched: set[bytes] = set()
        for current in self.descendants(txid):
            entry = self.entries.pop(current)
            for inp in entry.tx.inputs:
                if self.spends.get(inp.outpoint) == current:
                    del self.spends[inp.outpoint]
            shs = entry.scripthashes()
            for sh in shs:
                ids = self.sh_index.get(sh)
                if ids is not None:
                    ids.discard(current)
                    if not ids:
                        del self.sh_index[sh]
            touched |= shs
            removed.append(entry)
        return removed, touched

    def remove_confirmed(self, tx: Transaction) -> set[bytes]:
        """A block confirmed `tx`: drop it (not its children) and evict its conflicts."""
        txid = tx.txid
        touched: set[bytes] = set()
        if txid in self.entries:
            entry = self.entries.pop(txid)
            for inp in entry.tx.inputs:
                if self.spends.get(inp.outpoint) == txid:
                    del self.spends[inp.outpoint]
            for sh in entry.scripthashes():
                ids = self.sh_index.get(sh)
                if ids is not None:
                    ids.discard(txid)
                    if not ids:
                        del self.sh_index[sh]
                touched.add(sh)
        for inp in tx.inputs:
            rival = self.spends.get(inp.outpoint)
            if rival is not None and rival != txid:
                _, shs = self.remove(rival)
                touched |= shs
        return touched

    def clear(self) -> list[MempoolEntry]:
        entries = list(self.entries.values())
        self.entries.clear()
        self.spends.clear()
        self.sh_index.clear()
        return entries
