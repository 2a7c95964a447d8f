"""The specification's names and shapes, exactly, over a real uvicorn server and real devnet
Electrum servers: error codes, the status record, the dry-run answer and protection details."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bch.tx import OutPoint, TxOutput
from broadcast import errors
from devnet.service import Devnet
from tests.broadcast.helpers import ALICE, BOB, Coin, devnet, fund, pay, served

# shared/reference/service-spec.md, "Broadcast status record" and "Broadcast error codes"
RECORD_FIELDS = {
    "txid",
    "status",
    "nodes_reached",
    "nodes_total",
    "estimated_network_reach",
    "rejections",
    "timestamp",
}
RECORD_EXTRAS = {"updated", "block_height", "confirmations", "nodes"}  # docs/broadcast.md
SPEC_CODES = {"REJECTED", "BROADCAST_FAILED", "TRANSACTION_NOT_FOUND", "PROTECTION_REJECTED"}


@pytest.fixture
async def net() -> AsyncIterator[Devnet]:
    network = devnet(3)
    await network.start()
    yield network
    await network.stop()


@pytest.fixture
async def http(net: Devnet, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with served(net, tmp_path / "r.sqlite") as client:
        yield client


def check_record(record: dict[str, Any], txid: str) -> None:
    assert RECORD_FIELDS <= set(record) <= RECORD_FIELDS | RECORD_EXTRAS
    assert record["txid"] == txid
    assert record["status"] in {"broadcasting", "accepted", "rejected", "pending"}
    for key in ("nodes_reached", "nodes_total", "timestamp"):
        assert type(record[key]) is int
    assert isinstance(record["estimated_network_reach"], float | int)
    assert 0 <= record["estimated_network_reach"] <= 1
    for rejection in record["rejections"]:
        assert set(rejection) == {"node", "reason", "message"}
        assert all(isinstance(v, str) for v in rejection.values())


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body["error"]) <= {"code", "message", "details"}
    assert body["error"]["code"] == code and isinstance(body["error"]["message"], str)
    return body


def test_the_spec_codes_are_spelt_as_the_spec_spells_them() -> None:
    defined = {v for k, v in vars(errors).items() if k.isupper() and isinstance(v, str)}
    assert defined >= SPEC_CODES
    assert errors.HTTP_STATUS[errors.TRANSACTION_NOT_FOUND] == 404
    assert all(errors.HTTP_STATUS[c] < 500 or c == "BROADCAST_FAILED" for c in SPEC_CODES)


async def test_accepted_post_and_status_record(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    response = await http.post("/broadcast", json={"tx": tx.hex()})
    assert response.status_code == 200
    assert set(response.json()) == {
        "txid",
        "status",
        "nodes_reached",
        "nodes_total",
        "estimated_network_reach",
    }
    assert response.json()["txid"] == tx.txid_hex
    record = (await http.get(f"/broadcast/status/{tx.txid_hex}")).json()
    check_record(record, tx.txid_hex)
    assert record["rejections"] == []


async def test_rejected_post_and_status_record(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    first = pay(coin, BOB.locking_bytecode)
    assert (await http.post("/broadcast", json={"tx": first.hex()})).status_code == 200
    double = pay(coin, ALICE.locking_bytecode, fee=900)
    body = error(await http.post("/broadcast", json={"tx": double.hex()}), 422, "REJECTED")
    assert body["txid"] == double.txid_hex
    record = (await http.get(f"/broadcast/status/{double.txid_hex}")).json()
    check_record(record, double.txid_hex)
    assert record["status"] == "rejected"
    assert {r["reason"] for r in record["rejections"]} == {"conflict"}
    assert all("txn-mempool-conflict" in r["message"] for r in record["rejections"])


async def test_unknown_txid_is_transaction_not_found(http: httpx.AsyncClient) -> None:
    error(await http.get("/broadcast/status/" + "cd" * 32), 404, "TRANSACTION_NOT_FOUND")


async def test_all_nodes_unreachable_is_broadcast_failed(
    http: httpx.AsyncClient, net: Devnet
) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    for k in range(3):
        net.nodes[k].set_faults(down=True)
        await net.servers[k].apply_faults()
    body = error(await http.post("/broadcast", json={"tx": tx.hex()}), 502, "BROADCAST_FAILED")
    details = body["error"]["details"]
    assert details["rejections"] == []  # nobody refused it: nobody was reached
    assert [n["state"] for n in details["nodes"]] == ["unknown"] * 3
    assert all(n["message"].startswith("unreachable") for n in details["nodes"])


async def test_dry_run_answers(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    valid = (await http.post("/broadcast", json={"tx": tx.hex(), "dry_run": True})).json()
    assert {"txid", "dry_run", "validation"} <= set(valid)
    assert (valid["txid"], valid["dry_run"]) == (tx.txid_hex, True)
    assert valid["validation"]["status"] == "valid"
    assert isinstance(valid["validation"]["message"], str)
    assert "reason" not in valid["validation"]  # only rejections carry one

    ghost = Coin(OutPoint(bytes(range(32)), 0), TxOutput(40_000, ALICE.locking_bytecode), ALICE)
    orphan = pay(ghost, BOB.locking_bytecode)
    rejected = (await http.post("/broadcast", json={"tx": orphan.hex(), "dry_run": True})).json()
    assert rejected["dry_run"] is True
    assert rejected["validation"]["status"] == "rejected"
    assert rejected["validation"]["reason"] == "missing_inputs"
    assert isinstance(rejected["validation"]["message"], str)


async def test_protection_details(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode, fee=20_000)
    body = {"tx": tx.hex(), "protection": {"max_fee_per_byte": 10}}
    details = error(await http.post("/broadcast", json=body), 422, "PROTECTION_REJECTED")["error"][
        "details"
    ]
    assert details["reason"] == "FEE_TOO_HIGH"
    assert details["max_fee_per_byte"] == 10
    assert details["fee_per_byte"] == pytest.approx(20_000 / tx.size(), abs=1e-6)

    ghost = Coin(OutPoint(bytes(range(32)), 0), TxOutput(40_000, ALICE.locking_bytecode), ALICE)
    body = {"tx": pay(ghost, BOB.locking_bytecode).hex(), "protection": {"max_fee_per_byte": 5}}
    details = error(await http.post("/broadcast", json=body), 422, "PROTECTION_REJECTED")["error"][
        "details"
    ]
    assert details["reason"] == "INPUTS_UNKNOWN"
    assert (details["fee_per_byte"], details["max_fee_per_byte"]) == (None, 5)
