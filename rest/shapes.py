"""Rows → the JSON objects clients parse (field names from the specification and
`api-shapes.md`). Values beyond 2^53 (k = sats × tokens) are decimal strings."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from indexer.store.queries import PoolRow, TradeRow
from protocols.cauldron.contract import owner_address


@lru_cache(maxsize=65_536)
def owner_p2pkh_addr(pkh_hex: str, prefix: str) -> str:
    """The owner's token-aware P2PKH CashAddr (`z…`)."""
    return owner_address(bytes.fromhex(pkh_hex), prefix)


def pool(p: PoolRow, prefix: str) -> dict[str, Any]:
    return {
        "owner_p2pkh_addr": owner_p2pkh_addr(p.owner_pkh, prefix),
        "owner_pkh": p.owner_pkh,
        "sats": p.sats,
        "token_id": p.token_id,
        "tokens": p.tokens,
        "tx_pos": p.vout,
        "txid": p.txid,
        "pool_id": p.pool_id,
    }


def pool_state(p: PoolRow) -> dict[str, Any]:
    return {
        "k": str(p.sats * p.tokens),
        "sats": p.sats,
        "tokens": p.tokens,
        "timestamp": p.time,
        "txid": p.txid,
        "height": p.height,
    }


def trade(t: TradeRow) -> dict[str, Any]:
    """A trade feed entry: `sats`/`tokens` are what the trader paid or received (the pools' net
    change, as magnitudes); `direction` "buy" means the trader bought tokens with BCH."""
    return {
        "txid": t.txid,
        "blockhash": t.block_hash,
        "height": t.height,
        "timestamp_guess": t.time,
        "token_id": t.token_id,
        "direction": t.direction,
        "sats": abs(t.sats),
        "tokens": abs(t.tokens),
        "volume_sats": t.volume_sats,
        "volume_tokens": t.volume_tokens,
        "price": t.price,
        "lp_fee": t.lp_fee,
        "pools": t.pools,
        "pools_touched": t.pools_touched,
    }
