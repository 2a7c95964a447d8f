"""Cauldron DEX micro pools: the contract (`contract`), its exact trade maths (`formulas`) and
how pools show up in transactions (`detect`). Pure: no I/O anywhere in this package."""

from bch.script import electrum_scripthash
from protocols.cauldron.contract import (
    REDEEM_PREFIX,
    REDEEM_SUFFIX,
    owner_address,
    pool_address,
    pool_locking_bytecode,
    redeem_script,
    trade_unlocking,
)
from protocols.cauldron.detect import (
    CauldronActivity,
    KnownOwners,
    PoolCreation,
    PoolSpend,
    detect,
    is_pool_utxo,
    is_trade_path,
    parse_summon,
    pool_spend_pkh,
    pool_transition,
)
from protocols.cauldron.formulas import (
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    classify_change,
    is_valid_pool_transition,
    lp_fee,
    marginal_price,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)

__all__ = [
    "REDEEM_PREFIX",
    "REDEEM_SUFFIX",
    "CauldronActivity",
    "KnownOwners",
    "PoolCreation",
    "PoolSpend",
    "PoolState",
    "buy_tokens_exact_in",
    "buy_tokens_exact_out",
    "classify_change",
    "detect",
    "electrum_scripthash",
    "is_pool_utxo",
    "is_trade_path",
    "is_valid_pool_transition",
    "lp_fee",
    "marginal_price",
    "owner_address",
    "parse_summon",
    "pool_address",
    "pool_locking_bytecode",
    "pool_spend_pkh",
    "pool_transition",
    "redeem_script",
    "sell_tokens_exact_in",
    "sell_tokens_exact_out",
    "trade_unlocking",
]
