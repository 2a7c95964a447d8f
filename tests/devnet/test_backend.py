"""The devnet's chain backend seam and the real-node options, without a real node (the
real-node tier, tests/realnode/test_devnet.py, runs them against BCHN and Fulcrum)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bch.script import push_data
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from devnet.backend import EmbeddedBackend
from devnet.blocks import (
    COIN,
    HALVING_INTERVAL,
    assemble_block,
    block_record,
    block_subsidy,
    coinbase_transaction,
    genesis_block,
)
from devnet.chain import Chain
from devnet.cli import LaunchConfig
from devnet.realnode.backend import REGTEST_HALVING_INTERVAL
from devnet.realnode.bitcoind import vm_year


def _tx(n: int) -> Transaction:
    return Transaction.build(
        [TxInput(OutPoint(n.to_bytes(32, "little"), 0))], [TxOutput(1_000, push_data(b"x"))]
    )


def test_blocks_order_transactions_by_txid_as_a_number() -> None:
    """Bitcoin Cash Node compares txids as numbers (most significant byte first: hex order)."""
    txs = [_tx(n) for n in range(12)]
    coinbase = coinbase_transaction(1, 50 * COIN, push_data(b"miner"))
    block = assemble_block(genesis_block().hash, 1_800_000_000, coinbase, txs)
    ids = [t.txid_hex for t in block.txs[1:]]
    assert ids == sorted(ids)
    assert [t.txid for t in block.txs[1:]] != sorted(t.txid for t in txs)  # not wire order


def test_block_record_reads_back_a_serialized_block() -> None:
    coinbase = coinbase_transaction(1, 50 * COIN, push_data(b"miner"))
    block = assemble_block(genesis_block().hash, 1_800_000_000, coinbase, [_tx(1), _tx(2)])
    again = block_record(block.raw)
    assert again == block


def test_subsidy_follows_the_backends_halving_interval() -> None:
    assert EmbeddedBackend().halving_interval == HALVING_INTERVAL
    assert block_subsidy(REGTEST_HALVING_INTERVAL - 1, REGTEST_HALVING_INTERVAL) == 50 * COIN
    assert block_subsidy(REGTEST_HALVING_INTERVAL, REGTEST_HALVING_INTERVAL) == 25 * COIN
    chain = Chain(genesis_block(), halving_interval=REGTEST_HALVING_INTERVAL)
    assert chain.halving_interval == REGTEST_HALVING_INTERVAL


@pytest.mark.parametrize(
    ("subversion", "year"),
    [
        ("Bitcoin Cash Node:28.0.1(EB32.0)", 2025),
        ("Bitcoin Cash Node:29.0.0(EB32.0)", 2026),
        ("Bitcoin Cash Node:30.1.0", 2026),
        ("something else", 2025),
    ],
)
def test_vm_rules_from_the_nodes_version(subversion: str, year: int) -> None:
    assert vm_year(subversion) == year


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fulcrum": sys.executable}, "--fulcrum needs --bitcoind"),
        ({"bitcoind": sys.executable, "nodes": 2}, "--bitcoind runs one node"),
        ({"bitcoind": "/nonexistent/bitcoind"}, "--bitcoind: no executable"),
        ({"bitcoind": sys.executable, "fulcrum": "no-such-fulcrum"}, "--fulcrum: no executable"),
    ],
)
def test_real_node_options_are_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LaunchConfig(**options)  # type: ignore[arg-type]


def test_a_missing_bitcoind_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ladle", "devnet", "--bitcoind", "/nonexistent/bitcoind"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "LADLE_READY" not in proc.stdout
    assert proc.stderr.strip().startswith(
        "ladle: error: --bitcoind: no executable '/nonexistent/bitcoind'"
    )
