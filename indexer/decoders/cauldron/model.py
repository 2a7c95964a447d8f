"""The Cauldron decoder's values: pool UTXOs and the names of pool changes.

Hashes are wire-order bytes here (as in `bch`); the tables store display order (see `schema`).
A pool *lineage* is the chain of UTXOs one pool moves through as it is traded; its id is the
outpoint of its first UTXO the index knows: where it was created, or, for a pool the index
only discovers when it is first spent (created without SUMMON by an owner not yet known), the
spent outpoint. The API's `pool_id` is that outpoint as `<txid display hex>:<vout>`.

A pool UTXO is a named tuple, not a dataclass: the sync makes one per pool move (~110,000 on the
benchmark chain), so construction cost is what counts. The rows themselves are the parameter
tuples of the decoder's statements, built straight from the transaction (`decode.decode_tx`;
the columns are described in `schema`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from bch.tx import OutPoint
from indexer.store.pool_id import format_pool_id

# How a pool UTXO came to be indexed: the three creation rules of `protocols.cauldron.detect`,
# a trade-path continuation of a known pool, or a continuation of a pool the index never saw.
PoolVia = Literal["summon", "known_owner", "withdraw_recreate", "continuation", "discovered"]
# A state change of one pool. buy/sell/deposit/unchanged/drain name a trade-path spend by the
# signs of (Δsats, Δtokens) (`classify_change`); "drain" cannot pass the contract and so never
# occurs in a valid block. "discover": a trade-path spend of a pool the index did not know; its
# state before is known only if the follower could fetch the spent output (`outside` pools).
# "invalidated": a trade-path spend whose output is no longer a pool by our rules (e.g. it
# gained an NFT): the lineage ends without a withdraw.
EventKind = Literal[
    "create",
    "buy",
    "sell",
    "deposit",
    "unchanged",
    "drain",
    "withdraw",
    "discover",
    "invalidated",
]
EVENT_KINDS: tuple[EventKind, ...] = (
    "create",
    "buy",
    "sell",
    "deposit",
    "unchanged",
    "drain",
    "withdraw",
    "discover",
    "invalidated",
)
SpentKind = Literal["trade", "withdraw"]


class PoolUtxo(NamedTuple):
    """One pool state: a UTXO holding sats and one fungible token at its owner's pool address."""

    outpoint: OutPoint
    lineage: OutPoint
    owner_pkh: bytes
    category: bytes  # wire order
    sats: int
    tokens: int
    height: int
    time: int
    position: int  # index of the creating transaction in its block (-1: mempool)
    via: PoolVia

    @property
    def pool_id(self) -> str:
        return format_pool_id(self.lineage)
