"""The network of a chain from its genesis hash (hashes as BCHN 28.0.1 reports them)."""

from __future__ import annotations

import aiosqlite
import pytest

from indexer.follow import MAINNET_GENESIS
from indexer.network import (
    REGTEST_GENESIS,
    SCALENET_GENESIS,
    TESTNET3_GENESIS,
    TESTNET4_GENESIS,
    index_prefix,
    network_prefix,
)


@pytest.mark.parametrize(
    ("genesis", "prefix"),
    [
        (MAINNET_GENESIS, "bitcoincash"),
        (TESTNET3_GENESIS, "bchtest"),
        (TESTNET4_GENESIS, "bchtest"),  # chipnet too
        (SCALENET_GENESIS, "bchtest"),
        (REGTEST_GENESIS, "bchreg"),
        (REGTEST_GENESIS.upper(), "bchreg"),
        ("11" * 32, None),  # e.g. the devnet's own genesis: callers keep their default
        (None, None),
    ],
)
def test_network_prefix(genesis: str | None, prefix: str | None) -> None:
    assert network_prefix(genesis) == prefix


@pytest.mark.parametrize(
    ("blocks", "prefix"),
    [
        ([], None),  # nothing indexed yet: not known
        ([(0, REGTEST_GENESIS), (1, "22" * 32)], "bchreg"),
        ([(0, "11" * 32)], "bitcoincash"),  # a genesis of no known network (the devnet's)
        ([(792_772, "33" * 32)], "bitcoincash"),  # mainnet: from the CashTokens activation
    ],
)
async def test_index_prefix(blocks: list[tuple[int, str]], prefix: str | None) -> None:
    async with aiosqlite.connect(":memory:") as conn:
        await conn.execute("CREATE TABLE blocks (height INTEGER PRIMARY KEY, hash BLOB)")
        await conn.executemany(
            "INSERT INTO blocks VALUES (?, ?)", [(h, bytes.fromhex(x)) for h, x in blocks]
        )
        assert await index_prefix(conn) == prefix
