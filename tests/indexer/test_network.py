"""The network of a chain from its genesis hash (hashes as BCHN 28.0.1 reports them)."""

from __future__ import annotations

import pytest

from indexer.follow import MAINNET_GENESIS
from indexer.network import (
    REGTEST_GENESIS,
    SCALENET_GENESIS,
    TESTNET3_GENESIS,
    TESTNET4_GENESIS,
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
