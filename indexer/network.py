"""Which network a chain is, from its genesis hash: the CashAddr prefix its addresses use.

The genesis hash is what a server reports (`server.features`) and what a test-network index
holds at height 0, so addresses can follow the chain actually indexed instead of a flag the
user must remember. Hashes as BCHN 28.0.1 reports them (`getblockhash 0` on each chain);
chipnet shares testnet4's genesis. An unknown genesis (e.g. the devnet's own) has no prefix:
callers keep their configured one.
"""

from __future__ import annotations

import aiosqlite

from indexer.follow.chain import MAINNET_GENESIS

REGTEST_GENESIS = "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"
TESTNET3_GENESIS = "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943"
TESTNET4_GENESIS = "000000001dd410c49a788668ce26751718cc797474d3152a5fc073dd44fd9f7b"  # chipnet
SCALENET_GENESIS = "00000000e6453dc2dfe1ffa19023f86002eb11dbb8e87d0291a4599f0430be52"

PREFIXES = {
    MAINNET_GENESIS: "bitcoincash",
    TESTNET3_GENESIS: "bchtest",
    TESTNET4_GENESIS: "bchtest",
    SCALENET_GENESIS: "bchtest",
    REGTEST_GENESIS: "bchreg",
}


def network_prefix(genesis_hash: str | None) -> str | None:
    """The CashAddr prefix of the chain with this genesis (display hex), None if unknown."""
    return None if genesis_hash is None else PREFIXES.get(genesis_hash.lower())


async def index_prefix(conn: aiosqlite.Connection) -> str | None:
    """The prefix of the chain an index holds, None while it holds no block. A fresh index on a
    test network starts at its genesis block; a mainnet one starts at the CashTokens
    activation (no block 0), and a chain of unknown genesis (the devnet's) is `bitcoincash`.
    Once the index holds a block the answer is final: block 0 is never reorganised away."""
    rows = list(
        await conn.execute_fetchall("SELECT height, hash FROM blocks ORDER BY height LIMIT 1")
    )
    if not rows:
        return None
    height, block_hash = rows[0]
    genesis = bytes(block_hash).hex() if height == 0 else None  # stored in display order
    return network_prefix(genesis) or "bitcoincash"
