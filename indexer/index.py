"""The index: the store with the registered decoders, opened in one call."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from indexer.decoders import create_decoders
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from indexer.store.batching import (
    BULK_BATCH_BLOCKS,
    BULK_BATCH_SECONDS,
    DEFAULT_BATCH_BLOCKS,
    DEFAULT_BATCH_SECONDS,
)
from indexer.store.decoder import AnyDecoder


async def open_store(
    path: str | Path,
    *,
    snapshot: PoolSnapshot | None = None,
    decoders: Sequence[AnyDecoder] | None = None,
    batch_blocks: int = DEFAULT_BATCH_BLOCKS,
    batch_seconds: float = DEFAULT_BATCH_SECONDS,
    bulk_batch_blocks: int = BULK_BATCH_BLOCKS,
    bulk_batch_seconds: float = BULK_BATCH_SECONDS,
) -> Store:
    """`Store.open` with every registered decoder sharing `snapshot` unless `decoders` are
    given (those must have been created with the same snapshot: `create_decoders(snapshot=…)`)."""
    snap = snapshot if snapshot is not None else PoolSnapshot()
    return await Store.open(
        path,
        snapshot=snap,
        decoders=create_decoders(snapshot=snap) if decoders is None else decoders,
        batch_blocks=batch_blocks,
        batch_seconds=batch_seconds,
        bulk_batch_blocks=bulk_batch_blocks,
        bulk_batch_seconds=bulk_batch_seconds,
    )
