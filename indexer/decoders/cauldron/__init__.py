"""Indexing Cauldron pools: tables (`schema`), rows (`model`), pure decoding (`decode`) and the
store glue (`decoder`)."""

from indexer.decoders.cauldron.decoder import CauldronDecoder, to_live
from indexer.decoders.cauldron.model import (
    EVENT_KINDS,
    EventKind,
    OwnerSeen,
    PoolEvent,
    PoolSpent,
    PoolUtxo,
    PoolVia,
    Row,
    TokenSeen,
    Trade,
    TraderSeen,
    format_pool_id,
    parse_pool_id,
)

__all__ = [
    "EVENT_KINDS",
    "CauldronDecoder",
    "EventKind",
    "OwnerSeen",
    "PoolEvent",
    "PoolSpent",
    "PoolUtxo",
    "PoolVia",
    "Row",
    "TokenSeen",
    "Trade",
    "TraderSeen",
    "format_pool_id",
    "parse_pool_id",
    "to_live",
]
