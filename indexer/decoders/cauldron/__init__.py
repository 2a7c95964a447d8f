"""Indexing Cauldron pools: tables (`schema`), values (`model`), pure decoding into rows
(`decode`) and the store glue (`decoder`)."""

from indexer.decoders.cauldron.decoder import CauldronDecoder, to_live
from indexer.decoders.cauldron.model import (
    EVENT_KINDS,
    EventKind,
    PoolUtxo,
    PoolVia,
)
from indexer.store.pool_id import format_pool_id, parse_pool_id

__all__ = [
    "EVENT_KINDS",
    "CauldronDecoder",
    "EventKind",
    "PoolUtxo",
    "PoolVia",
    "format_pool_id",
    "parse_pool_id",
    "to_live",
]
