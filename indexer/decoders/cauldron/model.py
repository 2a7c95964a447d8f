"""The Cauldron decoder's values: pool UTXOs and the rows a transaction produces.

Hashes are wire-order bytes here (as in `bch`); the tables store display order (see `schema`).
A pool *lineage* is the chain of UTXOs one pool moves through as it is traded; its id is the
outpoint of its first UTXO the index knows: where it was created, or, for a pool the index
only discovers when it is first spent (created without SUMMON by an owner not yet known), the
spent outpoint. The API's `pool_id` is that outpoint as `<txid display hex>:<vout>`.

The rows are named tuples, not dataclasses: a block produces dozens of them and each is built
once, read once by `write` and once by `committed`, so construction cost is what counts.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from bch.tx import OutPoint

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
Direction = Literal["buy", "sell"]

_POOL_ID = re.compile(r"^([0-9a-f]{64}):(0|[1-9][0-9]{0,9})$")


def format_pool_id(lineage: OutPoint) -> str:
    """`<txid display hex>:<vout>` of the lineage's first outpoint."""
    return f"{lineage.txid_hex}:{lineage.index}"


def parse_pool_id(pool_id: str) -> OutPoint:
    """Inverse of `format_pool_id`; ValueError for anything else (upper case, 63 hex, -1 …)."""
    m = _POOL_ID.match(pool_id)
    if m is None or int(m.group(2)) > 0xFFFFFFFF:
        raise ValueError(f"not a pool id (<64 lowercase hex>:<vout>): {pool_id!r}")
    return OutPoint.from_hex(m.group(1), int(m.group(2)))


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


class PoolSpent(NamedTuple):
    """A known pool UTXO spent by `txid` (its values are kept for the TVL bookkeeping)."""

    outpoint: OutPoint
    category: bytes
    sats: int
    tokens: int
    txid: bytes
    kind: SpentKind


class PoolEvent(NamedTuple):
    """One pool's state change in one transaction; `seq` orders the events of a transaction
    (spends in input order, then creations in output order)."""

    txid: bytes
    seq: int
    position: int
    kind: EventKind
    lineage: OutPoint
    owner_pkh: bytes
    category: bytes
    input_index: int | None
    output_index: int | None
    before: tuple[int, int] | None  # (sats, tokens); None for create (and discover, unless the
    # spent output was fetched)
    after: tuple[int, int] | None  # None for withdraw/invalidated
    lp_fee: int | None  # trade-path changes with both states known
    pools_touched: int  # events in this transaction

    @property
    def d_sats(self) -> int | None:
        if self.before is None or self.after is None:
            return None
        return self.after[0] - self.before[0]

    @property
    def d_tokens(self) -> int | None:
        if self.before is None or self.after is None:
            return None
        return self.after[1] - self.before[1]


class Trade(NamedTuple):
    """One transaction's buys and sells of one token, summed over the pools it traded with.

    `sats`/`tokens` are the net change of those pools (so `sats > 0`: the user paid BCH);
    the volumes sum each pool's |Δ|; the execution price is volume_sats / volume_tokens.
    """

    txid: bytes
    category: bytes
    position: int
    direction: Direction
    sats: int
    tokens: int
    volume_sats: int
    volume_tokens: int
    lp_fee: int
    pools: int  # pools of this token traded with
    pools_touched: int  # pools of any token changed by the transaction


class TokenSeen(NamedTuple):
    """A new (non-continuation) pool of `category`. The token's first pool is the one with the
    least (height, position, out_index), whatever order a block's rows are written in."""

    category: bytes
    lineage: OutPoint
    position: int
    out_index: int


class OwnerSeen(NamedTuple):
    pkh: bytes


class TraderSeen(NamedTuple):
    month: str  # "YYYY-MM" (UTC) of the block time
    pkh: bytes


Row = PoolUtxo | PoolSpent | PoolEvent | Trade | TokenSeen | OwnerSeen | TraderSeen
