"""Where the follower reads the chain from: the `ChainSource` protocol.

The follower (`chain`, `mempool`, `follower`) asks only this of a source, so an Electrum server
(`source_electrum.ElectrumSource`) and a BCHN node (`source_bitcoind.BitcoindSource`) feed the
store through the same walk, the same reorg handling and the same crash safety. A source
checks what it returns (headers hash to what was asked, blocks match their header and merkle
root, transactions their txid) and raises one of `SOURCE_ERRORS` when it cannot answer: the
round fails and the follower backs off. `BlockChanged` means the source's chain moved under the
request; the walk starts again from the stored tip.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from bch.tx import OutPoint, TxOutput
from indexer.bitcoind import BitcoindClientError
from indexer.electrum import ElectrumClientError
from indexer.follow.fetch import FetchedBlock

# What a source raises when it cannot answer now (the follower's round fails and backs off).
SOURCE_ERRORS: tuple[type[Exception], ...] = (ElectrumClientError, BitcoindClientError)

TipPushed = Callable[[int | None], None]  # a new tip (its height, when the push says)
MempoolPushed = Callable[[], None]


class ChainSource(Protocol):
    async def genesis_hash(self) -> str | None:
        """The chain's genesis hash (display hex); None when the source does not say."""
        ...

    async def tip(self) -> tuple[int, bytes]:
        """(height, 80-byte header) of the source's best chain."""
        ...

    async def header(self, height: int) -> bytes:
        """The best chain's header at `height` (BlockChanged when above the tip)."""
        ...

    async def headers(self, start: int, count: int) -> list[bytes]:
        """Up to `count` consecutive headers of the best chain from `start`: fewer at the tip,
        none above it. The follower links them itself (a reorg between calls is its to find)."""
        ...

    async def block(self, height: int, header: bytes) -> FetchedBlock:
        """The block whose header is `header` (linked at `height`), checked against it."""
        ...

    async def prevouts(self, outpoints: Sequence[OutPoint]) -> dict[OutPoint, TxOutput]:
        """The outputs at `outpoints` (for a decoder that meets one never indexed); those the
        source cannot find are left out."""
        ...

    async def subscribe(self, on_tip: TipPushed, on_mempool: MempoolPushed) -> None:
        """Call `on_tip` on every new tip, and `on_mempool` when the mempool changed, as far as
        the source can push them (the follower also polls)."""
        ...

    async def mempool_txids(self) -> set[bytes] | None:
        """Every txid (wire order) in the source's mempool; None when it cannot list it."""
        ...

    async def mempool_transactions(self, txids: Sequence[bytes]) -> dict[bytes, bytes]:
        """The raw transactions of `txids` the source still has: one it does not know (it left
        the mempool) is left out; any other failure raises."""
        ...

    async def confirmed(self, txids: Sequence[bytes], stored_tip: bytes | None) -> set[bytes]:
        """Those of `txids` (gone from the mempool) that a block the store does not hold yet
        confirms; `stored_tip` is the store's tip hash (wire order)."""
        ...

    async def close(self) -> None: ...
