"""Broadcast interface at `{broadcast_url}` (the address `ladle up` announces as "broadcast"):
POST /broadcast with `{tx}` → `{txid}`; the status record's fields, types and status values;
`TRANSACTION_NOT_FOUND` for an unknown txid; `REJECTED` for a double spend; the error object;
the dry run's shape. Transactions are a test wallet's own payments to itself, signed with the
project's wallet code (test machinery); tx.build's transactions are broadcast in
test_txbuild.py."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from bch.tx import TxOutput
from tests.conformance.client import Ladle, assert_fields, bch_coin, is_hex64, pay_self, wait_status

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

WALLET = 2
STATUSES = {"broadcasting", "accepted", "rejected", "pending"}
# Broadcast status record.
STATUS_RECORD = {
    "txid": "string",
    "status": "string",
    "nodes_reached": "integer",
    "nodes_total": "integer",
    "estimated_network_reach": "number",
    "rejections": "array",
    "timestamp": "integer",
}
REJECTION = {"node": "string", "reason": "string", "message": "string"}
ERROR = {"error.code": "string", "error.message": "string"}


def _check_record(record: dict[str, Any], txid: str) -> None:
    assert_fields(record, STATUS_RECORD, "broadcast status record")
    assert record["txid"] == txid and is_hex64(txid)
    assert record["status"] in STATUSES
    assert 0 <= record["nodes_reached"] <= record["nodes_total"]
    assert 0 <= record["estimated_network_reach"] <= 1
    for rejection in record["rejections"]:
        assert_fields(rejection, REJECTION, "rejection")
    assert abs(record["timestamp"] - time.time()) < 600


async def _post(bcast: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await bcast.post("/broadcast", json=body)


async def test_broadcast_then_status(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    wallet = ladle.wallet(WALLET)
    tx = pay_self(await bch_coin(ladle, wallet), wallet, 1000)
    r = await _post(bcast, {"tx": tx.hex()})
    assert r.status_code == 200, r.text
    assert r.json()["txid"] == tx.txid_hex
    first = await bcast.get(f"/broadcast/status/{tx.txid_hex}")
    assert first.status_code == 200, first.text
    _check_record(first.json(), tx.txid_hex)
    record = await wait_status(bcast, tx.txid_hex)
    _check_record(record, tx.txid_hex)
    assert record["status"] == "accepted", record
    assert record["nodes_reached"] >= 1 and record["rejections"] == []


async def test_status_of_an_unknown_txid(bcast: httpx.AsyncClient) -> None:
    r = await bcast.get(f"/broadcast/status/{'12' * 32}")
    body = r.json()
    assert_fields(body, ERROR, "unknown txid")
    assert body["error"]["code"] == "TRANSACTION_NOT_FOUND"
    assert body["error"]["message"]


async def test_double_spend_is_rejected(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    wallet = ladle.wallet(WALLET)
    coin = await bch_coin(ladle, wallet)
    first, second = pay_self(coin, wallet, 1000), pay_self(coin, wallet, 2000)
    assert first.txid_hex != second.txid_hex
    r = await _post(bcast, {"tx": first.hex()})
    assert r.status_code == 200, r.text
    assert r.json()["txid"] == first.txid_hex
    r = await _post(bcast, {"tx": second.hex()})
    body = r.json()
    assert_fields(body, ERROR, "double spend")
    assert body["error"]["code"] == "REJECTED", body
    # rejected by a majority of nodes (all of them: the devnet's one node)
    record = await wait_status(bcast, second.txid_hex)
    _check_record(record, second.txid_hex)
    assert record["status"] == "rejected", record
    assert record["rejections"], "the rejecting node is named"


async def test_invalid_signature_is_rejected(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    """The node refuses a transaction whose signature does not cover its outputs."""
    wallet = ladle.wallet(WALLET)
    signed = pay_self(await bch_coin(ladle, wallet), wallet, 1000)
    [output] = signed.outputs
    forged = signed.replace(outputs=(TxOutput(output.value - 1, output.locking),))
    r = await _post(bcast, {"tx": forged.hex()})
    body = r.json()
    assert_fields(body, ERROR, "invalid signature")
    assert body["error"]["code"] == "REJECTED", body


async def test_malformed_transaction_is_an_error(bcast: httpx.AsyncClient) -> None:
    r = await _post(bcast, {"tx": "00ff"})
    assert r.status_code != 200
    assert_fields(r.json(), ERROR, "malformed transaction")


async def test_dry_run(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    """Validated and not broadcast: `txid`, `dry_run` (true), `validation` {status, message,
    reason for rejections}."""
    wallet = ladle.wallet(WALLET)
    coin = await bch_coin(ladle, wallet)
    tried, real = pay_self(coin, wallet, 1000), pay_self(coin, wallet, 1500)
    r = await _post(bcast, {"tx": tried.hex(), "dry_run": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert_fields(
        body,
        {"txid": "string", "dry_run": "boolean", "validation.status": "string"},
        "dry run",
    )
    assert body["txid"] == tried.txid_hex and body["dry_run"] is True
    assert body["validation"]["status"] == "valid", body
    assert isinstance(body["validation"]["message"], str)
    # not broadcast: a conflicting spend of the same coin is still accepted
    r = await _post(bcast, {"tx": real.hex()})
    assert r.status_code == 200, r.text
    assert r.json()["txid"] == real.txid_hex
    # and now the tried one conflicts: a rejected validation with a reason
    r = await _post(bcast, {"tx": tried.hex(), "dry_run": True})
    body = r.json()
    assert body["dry_run"] is True and body["txid"] == tried.txid_hex
    assert body["validation"]["status"] == "rejected", body
    assert isinstance(body["validation"]["message"], str)
    assert isinstance(body["validation"]["reason"], str)
