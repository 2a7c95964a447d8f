"""The `ladle` command line, run as a real subprocess (how integrators call it)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from typing import Any

import pytest

from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.cauldron.contract import pool_locking_bytecode, trade_unlocking
from tests.conftest import load_vectors

# The worked vector of ../shared/reference/cauldron.md.
OWNER = "b034dc7821b2b25c38b5825cdc4af9e6ace02be7"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ladle", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_json(*args: str, stdin: str | None = None) -> Any:
    proc = run(*args, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_pool_address_matches_the_reference_vector() -> None:
    out = run_json("pool", "address", OWNER)
    assert out["locking_bytecode"] == (
        "aa20095f68844b48e2ed5c77a622d8371ac02b3e03d59b185df6278c2a3c09aa6e1187"
    )
    assert out["scripthash"] == "95e37f7ec48a47415396bc46ead04e296aa584137449547a4304e6b5a330efac"
    assert out["pool_address"] == (
        "bitcoincash:rvy476yyfdyw9m2uw7nz9kphrtqzk0sr6kd3sh0ky7xz50qf4fhpzw8rgvlmz"
    )
    redeem = bytes.fromhex(out["redeem_script"])
    assert len(redeem) == 68 and bytes.fromhex(OWNER) in redeem
    assert out["owner_p2pkh_addr"].startswith("bitcoincash:z")


@pytest.mark.parametrize("bad", ["zz", OWNER[:-2], OWNER + "00", ""])
def test_pool_address_rejects_bad_pkh(bad: str) -> None:
    proc = run("pool", "address", bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


def test_tx_decode_vector_transactions() -> None:
    vectors = load_vectors("vmb/bch_2025_standard.core.cashtokens.vmb_tests.json")
    for vector in vectors[:5]:
        tx_hex = vector[4]
        out = run_json("tx", "decode", tx_hex)
        raw = bytes.fromhex(tx_hex)
        expected_txid = hashlib.sha256(hashlib.sha256(raw).digest()).digest()[::-1].hex()
        assert out["txid"] == expected_txid
        tx = Transaction.from_bytes(raw)
        assert len(out["inputs"]) == len(tx.inputs)
        assert [o["value"] for o in out["outputs"]] == [o.value for o in tx.outputs]
        for entry, output in zip(out["outputs"], tx.outputs, strict=True):
            if output.token is None:
                assert "token" not in entry
            else:
                assert entry["token"]["category"] == output.token.category_hex


def _trade_tx() -> Transaction:
    category = TokenData.from_hex_category("11" * 32, amount=1000)
    pkh = bytes.fromhex(OWNER)
    pool_in = TxInput(OutPoint(b"\x22" * 32, 0), trade_unlocking(pkh))
    funding = TxInput(OutPoint(b"\x33" * 32, 1), b"\x00")
    pool_out = TxOutput(10_000, pool_locking_bytecode(pkh), category)
    change = TxOutput(5_000, b"\x76\xa9\x14" + b"\x44" * 20 + b"\x88\xac")
    return Transaction.build([pool_in, funding], [pool_out, change])


def test_tx_decode_reports_cauldron_activity_and_reads_stdin() -> None:
    tx = _trade_tx()
    out = run_json("tx", "decode", "-", stdin=tx.hex() + "\n")
    assert out["txid"] == tx.txid_hex
    spends = out["cauldron"]["pool_spends"]
    assert spends == [
        {"input_index": 0, "kind": "trade", "owner_pkh": OWNER, "continuation_output": 0}
    ]
    assert out["outputs"][0]["address"] == (
        "bitcoincash:rvy476yyfdyw9m2uw7nz9kphrtqzk0sr6kd3sh0ky7xz50qf4fhpzw8rgvlmz"
    )
    assert out["outputs"][0]["token"] == {"category": "11" * 32, "amount": "1000"}


@pytest.mark.parametrize(
    "bad",
    [
        "xyz",  # not hex
        "abc",  # odd length
        "0200000001",  # truncated
        _trade_tx().hex() + "00",  # trailing byte
    ],
)
def test_tx_decode_bad_input_is_one_line_and_exit_2(bad: str) -> None:
    proc = run("tx", "decode", bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ladle: error:")
