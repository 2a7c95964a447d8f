"""A block being applied, as the decoders see it: its transactions by position, decoded lazily
and at most once (a full `Transaction`, or the lean `TxView` most decoders read), and its bytes
for the decoders' selection rules."""

from __future__ import annotations

from collections.abc import Sequence

from bch.block import HEADER_SIZE, Block, BlockHeader, TxView, parse_view
from bch.hashes import hash256
from bch.tx import Transaction
from indexer.store.decoder import AnyDecoder, BlockBytes, BlockTx


class BlockSource:
    """A block's transactions, decoded lazily and at most once."""

    def __init__(
        self,
        header: BlockHeader,
        block: Block | None,
        raws: Sequence[bytes],
        txids: Sequence[bytes],
    ) -> None:
        self.header = header
        self._block = block
        self._raws = raws
        self.txids = tuple(txids)
        self._txs: dict[int, Transaction] = {}
        self._views: dict[int, TxView] = {}
        self._bytes: BlockBytes | None = None
        # The 80 header bytes (the block's own, else encoded): its hash and its `blocks` row.
        self.header_bytes = block.raw[:HEADER_SIZE] if block is not None else header.encode()

    @classmethod
    def from_block(cls, block: Block) -> BlockSource:
        return cls(block.header, block, (), block.txids)

    @classmethod
    def from_transactions(
        cls, header: BlockHeader, txs: Sequence[Transaction | bytes]
    ) -> BlockSource:
        raws = [t.to_bytes() if isinstance(t, Transaction) else bytes(t) for t in txs]
        src = cls(header, None, raws, [hash256(r) for r in raws])
        for i, t in enumerate(txs):
            if isinstance(t, Transaction):
                src._txs[i] = t
        return src

    def __len__(self) -> int:
        return len(self.txids)

    def transaction(self, i: int) -> Transaction:
        tx = self._txs.get(i)
        if tx is None:
            if self._block is not None:
                tx = self._block.transaction(i)
            else:
                tx = Transaction.from_bytes(self._raws[i])
            self._txs[i] = tx
        return tx

    def view(self, i: int) -> TxView:
        """Transaction `i`'s `TxView`: the full decode if one was made, else the lean read."""
        view: TxView | None = self._txs.get(i)
        if view is None:
            view = self._views.get(i)
        if view is None:
            block = self._block
            view = block.view(i) if block is not None else parse_view(self._raws[i])[0]
            self._views[i] = view
        return view

    def holds(self, i: int, pattern: bytes) -> bool:
        """Do transaction `i`'s bytes contain `pattern`?"""
        block = self._block
        if block is not None:
            offsets = block.offsets
            return block.raw.find(pattern, offsets[i], offsets[i + 1]) >= 0
        return pattern in self._raws[i]

    def find(self, pattern: bytes) -> list[int]:
        """Indexes of the transactions whose bytes contain `pattern`."""
        if self._block is not None:
            return self._block.find_transactions(pattern)
        return [i for i, raw in enumerate(self._raws) if pattern in raw]

    def block_bytes(self) -> BlockBytes:
        if self._bytes is None:
            if self._block is not None:
                self._bytes = BlockBytes(self._block.raw, self._block.offsets, self.txids)
            else:
                offsets = [0]
                for raw in self._raws:
                    offsets.append(offsets[-1] + len(raw))
                self._bytes = BlockBytes(b"".join(self._raws), offsets, self.txids)
        return self._bytes

    def candidates(self, decoder: AnyDecoder) -> list[BlockTx]:
        """The decoder's candidates (its `select`), in block order, each decoded on first use
        (`BlockTx.tx` fully, `BlockTx.view` lean)."""
        hits = set(decoder.select(self.block_bytes()))
        if not hits:
            return []
        txids = self.txids
        return [BlockTx(i, txids[i], source=self) for i in sorted(hits)]
