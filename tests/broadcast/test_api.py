"""The HTTP API on real transactions: bad input, protection rules, dry runs, diagnoses."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxOutput
from broadcast.app import create_app
from broadcast.service import BroadcastService
from broadcast.spent import SpentOutput
from devnet.service import Devnet
from tests.broadcast.helpers import (
    ALICE,
    BOB,
    Coin,
    config_for,
    fund,
    pay,
    spend,
    token_genesis,
)


def has(net: Devnet, txid: str) -> bool:
    return any(n.find_tx(bytes.fromhex(txid)[::-1]) is not None for n in net.nodes)


async def post(http: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await http.post("/broadcast", json=body)


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    return error


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b"{}", 'missing "tx"'),
        (b'{"tx": 5}', "string"),
        (b'{"tx": ""}', "empty"),
        (b'{"tx": "abc"}', "odd number"),
        (b'{"tx": "zz"}', "not hexadecimal"),
        (b'{"tx": "00ff"}', "not a valid transaction"),
        (b'{"tx": "00", "dryrun": true}', "unknown field"),
        (b'{"tx": "00", "dry_run": "yes"}', "true or false"),
        (b'{"tx": "00", "protection": {"max_fee_per_byte": -2}}', "max_fee_per_byte"),
    ],
)
async def test_bad_bodies_are_400(
    http: httpx.AsyncClient, net: Devnet, body: bytes, fragment: str
) -> None:
    response = await http.post(
        "/broadcast", content=body, headers={"content-type": "application/json"}
    )
    error = error_of(response, 400, "BAD_REQUEST")
    assert fragment in error["message"]


async def test_two_megabyte_body_is_413(http: httpx.AsyncClient) -> None:
    body = b'{"tx": "' + b"00" * 1_000_000 + b'"}'
    response = await http.post(
        "/broadcast", content=body, headers={"content-type": "application/json"}
    )
    error_of(response, 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_wrong_content_type_is_415(http: httpx.AsyncClient, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = await http.post("/broadcast", content=b'{"tx": "00"}', headers=headers)
    error_of(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_json_with_charset_is_fine(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/broadcast",
        content=b'{"tx": "abc"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    error_of(response, 400, "BAD_REQUEST")  # reached the body check


async def test_status_endpoint_errors(http: httpx.AsyncClient) -> None:
    error_of(await http.get("/broadcast/status/xyz"), 400, "BAD_REQUEST")
    error_of(await http.get("/broadcast/status/" + "ab" * 33), 400, "BAD_REQUEST")
    error = error_of(await http.get("/broadcast/status/" + "ab" * 32), 404, "TRANSACTION_NOT_FOUND")
    assert "ab" * 32 in error["message"]
    error_of(await http.get("/broadcast"), 405, "METHOD_NOT_ALLOWED")
    error_of(await http.get("/nowhere"), 404, "NOT_FOUND")


# --- broadcasting over HTTP ---------------------------------------------------------------------


async def test_post_and_status(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    response = await post(http, {"tx": tx.hex().upper()})  # hex case does not matter
    assert response.status_code == 200
    assert response.json()["txid"] == tx.txid_hex
    status = (await http.get(f"/broadcast/status/{tx.txid_hex.upper()}")).json()
    assert status["txid"] == tx.txid_hex
    assert status["status"] == "accepted"
    assert set(status) >= {
        "txid",
        "status",
        "nodes_reached",
        "nodes_total",
        "estimated_network_reach",
        "rejections",
        "timestamp",
    }


# --- protection -------------------------------------------------------------------------------


async def test_fee_too_high(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode, fee=20_000)
    response = await post(http, {"tx": tx.hex(), "protection": {"max_fee_per_byte": 10}})
    error = error_of(response, 422, "PROTECTION_REJECTED")
    details = error["details"]
    assert details["reason"] == "FEE_TOO_HIGH"
    assert details["fee"] == 20_000
    assert details["fee_per_byte"] == pytest.approx(20_000 / tx.size(), abs=1e-6)
    assert details["max_fee_per_byte"] == 10
    assert not has(net, tx.txid_hex)  # nothing was sent
    # the same transaction without the rule goes out
    assert (await post(http, {"tx": tx.hex()})).status_code == 200
    assert has(net, tx.txid_hex)


async def test_token_burn_and_nft_burn(http: httpx.AsyncClient, net: Devnet) -> None:
    ft, nft, change = await token_genesis(net, ALICE)
    category = ft.output.token.category_hex if ft.output.token else ""
    burn_ft = spend([ft, change], [TxOutput(ft.value + change.value - 600, BOB.locking_bytecode)])
    response = await post(http, {"tx": burn_ft.hex(), "protection": {"reject_token_burn": True}})
    details = error_of(response, 422, "PROTECTION_REJECTED")["details"]
    assert details["reason"] == "TOKEN_BURN"
    assert details["tokens_burned"] == [{"category": category, "amount": "1000"}]
    assert "fee_per_byte" in details
    assert not has(net, burn_ft.txid_hex)

    burn_nft = spend(
        [nft, change], [TxOutput(nft.value + change.value - 600, BOB.locking_bytecode)]
    )
    response = await post(http, {"tx": burn_nft.hex(), "protection": {"reject_nft_burn": True}})
    details = error_of(response, 422, "PROTECTION_REJECTED")["details"]
    assert details["reason"] == "NFT_BURN"
    assert details["nfts_burned"] == [{"category": category, "count": 1}]
    assert not has(net, burn_nft.txid_hex)

    # an NFT burn is not a fungible burn: with only that rule, it is broadcast
    response = await post(http, {"tx": burn_nft.hex(), "protection": {"reject_token_burn": True}})
    assert response.status_code == 200
    assert has(net, burn_nft.txid_hex)


async def test_protection_fails_closed_on_unknown_inputs(http: httpx.AsyncClient) -> None:
    ghost = Coin(OutPoint(bytes(range(32)), 0), TxOutput(40_000, ALICE.locking_bytecode), ALICE)
    tx = pay(ghost, BOB.locking_bytecode)
    response = await post(http, {"tx": tx.hex(), "protection": {"max_fee_per_byte": 100}})
    details = error_of(response, 422, "PROTECTION_REJECTED")["details"]
    assert details["reason"] == "INPUTS_UNKNOWN"
    assert details["inputs"] == [0]


# --- dry run ----------------------------------------------------------------------------------


async def dry(http: httpx.AsyncClient, tx: Transaction | str, **extra: Any) -> dict[str, Any]:
    raw = tx if isinstance(tx, str) else tx.hex()
    response = await post(http, {"tx": raw, "dry_run": True, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["dry_run"] is True
    return body


async def test_dry_run_valid_sends_nothing(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    body = await dry(http, tx)
    assert body["txid"] == tx.txid_hex
    validation = body["validation"]
    assert validation["status"] == "valid"
    assert "reason" not in validation
    assert validation["fee"] == 500
    assert validation["checks"]["scripts"] == "skipped"  # this service runs without libauth
    assert {validation["checks"][c] for c in ("standardness", "inputs", "conflicts", "fee")} == {
        "passed"
    }
    assert not has(net, tx.txid_hex)
    await post(http, {"tx": tx.hex()})
    again = await dry(http, tx)
    assert again["validation"]["status"] == "valid"
    assert "already in the mempool" in again["validation"]["message"]


async def rejected(http: httpx.AsyncClient, tx: Transaction | str, reason: str) -> dict[str, Any]:
    body = await dry(http, tx)
    validation: dict[str, Any] = body["validation"]
    assert validation["status"] == "rejected", validation
    assert validation["reason"] == reason, validation
    return validation


async def test_dry_run_rejections(http: httpx.AsyncClient, net: Devnet) -> None:
    coins = [await fund(net, ALICE, 40_000, mine=False) for _ in range(6)]
    net.nodes[0].mine(1)

    validation = await rejected(http, "00ff", "malformed")
    assert validation["checks"]["decoding"] == "failed"

    dust = spend(
        [coins[0]], [TxOutput(100, BOB.locking_bytecode), TxOutput(39_000, BOB.locking_bytecode)]
    )
    assert "dust" in (await rejected(http, dust, "nonstandard"))["message"]

    cheap = pay(coins[1], BOB.locking_bytecode, fee=20)
    validation = await rejected(http, cheap, "fee")
    assert "min relay fee not met" in validation["message"]
    assert validation["checks"]["fee"] == "failed"

    overspend = spend([coins[2]], [TxOutput(40_001, BOB.locking_bytecode)])
    assert "bad-txns-in-belowout" in (await rejected(http, overspend, "invalid"))["message"]

    future = spend(
        [coins[3]], [TxOutput(39_000, BOB.locking_bytecode)], locktime=10_000, sequence=0
    )
    validation = await rejected(http, future, "invalid")
    assert validation["checks"]["finality"] == "failed"

    ex_nihilo = spend(
        [coins[4]],
        [TxOutput(39_000, BOB.locking_bytecode, TokenData(bytes(range(32)), 5))],
    )
    validation = await rejected(http, ex_nihilo, "invalid")
    assert validation["checks"]["tokens"] == "failed"

    ghost = Coin(OutPoint(bytes(range(32)), 0), TxOutput(40_000, ALICE.locking_bytecode), ALICE)
    assert "does not exist" in (await rejected(http, pay(ghost), "missing_inputs"))["message"]

    first = pay(coins[5], BOB.locking_bytecode)
    await net.nodes[0].submit(first)
    double = pay(coins[5], ALICE.locking_bytecode, fee=700)
    validation = await rejected(http, double, "conflict")
    assert first.txid_hex in validation["message"]
    net.nodes[0].mine(1)
    validation = await rejected(http, double, "missing_inputs")  # now spent in the chain
    assert first.txid_hex in validation["message"]

    for tx in (dust, cheap, overspend, future, ex_nihilo, double):
        assert not has(net, tx.txid_hex)


@pytest.mark.node
async def test_dry_run_checks_scripts_with_libauth(net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    good = pay(coin, BOB.locking_bytecode)
    # signed for other outputs: the signature does not cover this transaction
    forged = good.replace(outputs=(TxOutput(39_000, ALICE.locking_bytecode),))
    async with BroadcastService(config_for(net, verify_scripts=True)) as service:
        transport = httpx.ASGITransport(app=create_app(service, manage=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
            valid = (await dry(http, good))["validation"]
            assert valid["status"] == "valid"
            assert valid["checks"]["scripts"] == "passed"
            bad = await rejected(http, forged, "invalid")
            assert bad["checks"]["scripts"] == "failed"
            assert "mandatory-script-verify-flag-failed" in bad["message"]


# --- diagnosis ---------------------------------------------------------------------------------


async def test_diagnosis_of_an_input_spent_in_the_chain(
    http: httpx.AsyncClient, net: Devnet
) -> None:
    coin = await fund(net, ALICE, 40_000)
    first = pay(coin, BOB.locking_bytecode)
    await net.nodes[0].submit(first)
    net.nodes[0].mine(1)
    height = net.nodes[0].height
    late = pay(coin, ALICE.locking_bytecode, fee=700)
    response = await post(http, {"tx": late.hex(), "diagnosis": True})
    error_of(response, 422, "REJECTED")
    diagnosis = response.json()["diagnosis"]
    [entry] = diagnosis["inputs"]
    assert entry["exists"] is True
    assert entry["unspent"] is False
    assert entry["spent_by"] == first.txid_hex
    assert (entry["spent_in"], entry["spent_at_height"]) == ("chain", height)
    [conflict] = diagnosis["conflicts"]
    assert (conflict["txid"], conflict["in"], conflict["height"]) == (
        first.txid_hex,
        "chain",
        height,
    )
    consensus = diagnosis["consensus"]
    assert consensus["status"] == "rejected"
    assert consensus["majority_reason"] == "missing_inputs"
    assert (consensus["rejected"], consensus["agreeing"], consensus["nodes_total"]) == (5, 5, 5)
    assert len(diagnosis["verdicts"]) == 5
    assert first.txid_hex in diagnosis["summary"]
    assert f"confirmed at height {height}" in diagnosis["summary"]


async def test_diagnosis_of_a_split_double_spend(net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    ours = pay(coin, BOB.locking_bytecode)
    theirs = pay(coin, ALICE.locking_bytecode, fee=900)
    for k in (2, 3, 4):
        net.nodes[k].set_faults(partitioned=True)
        await net.nodes[k].submit(theirs)
    async with BroadcastService(config_for(net)) as service:
        transport = httpx.ASGITransport(app=create_app(service, manage=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
            response = await post(http, {"tx": ours.hex(), "diagnosis": True})
    error_of(response, 422, "REJECTED")
    diagnosis = response.json()["diagnosis"]
    [conflict] = diagnosis["conflicts"]
    assert conflict["txid"] == theirs.txid_hex
    assert conflict["in"] == "mempool"
    rejecting = {v["node"] for v in diagnosis["verdicts"] if v["outcome"] == "rejected"}
    assert set(conflict["nodes"]) == rejecting and len(rejecting) == 3
    assert (diagnosis["consensus"]["accepted"], diagnosis["consensus"]["rejected"]) == (2, 3)
    summary = diagnosis["summary"]
    assert "double spend" in summary
    assert theirs.txid_hex in summary
    assert "2 node(s) accepted it" in summary


async def test_diagnosis_of_a_dry_run_with_an_unknown_input(http: httpx.AsyncClient) -> None:
    ghost = Coin(OutPoint(bytes(range(32)), 3), TxOutput(40_000, ALICE.locking_bytecode), ALICE)
    body = await dry(http, pay(ghost), diagnosis=True)
    diagnosis = body["diagnosis"]
    assert diagnosis["inputs"][0]["exists"] is False
    assert "consensus" not in diagnosis  # nothing was sent
    assert "do not know" in diagnosis["summary"]


async def test_diagnosis_when_no_node_answers(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    for k in range(5):
        net.nodes[k].set_faults(down=True)
        await net.servers[k].apply_faults()
    transport = httpx.ASGITransport(app=create_app(service, manage=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        response = await post(http, {"tx": tx.hex(), "diagnosis": True})
    error_of(response, 502, "BROADCAST_FAILED")
    diagnosis = response.json()["diagnosis"]
    assert diagnosis["inputs"] is None
    assert diagnosis["notes"]
    assert "None of the 5 nodes gave a verdict" in diagnosis["summary"]


# --- no 500s ------------------------------------------------------------------------------------


class BrokenSource:
    """A SpentOutputSource with a bug: the API must still answer in JSON, without a 500."""

    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        raise RuntimeError("index corrupted")


async def test_unexpected_errors_are_json_not_500(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    service = BroadcastService(config_for(net), spent_source=BrokenSource())
    async with service:
        transport = httpx.ASGITransport(app=create_app(service, manage=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
            response = await post(http, {"tx": tx.hex(), "protection": {"max_fee_per_byte": 5}})
    error = error_of(response, 502, "BROADCAST_FAILED")
    assert "index corrupted" not in error["message"]  # logged, not leaked
    assert not has(net, tx.txid_hex)


async def test_a_failing_status_lookup_is_503_json(net: Devnet) -> None:
    service = BroadcastService(config_for(net))
    await service.start()
    await service.close()  # its database is closed: every lookup now fails
    transport = httpx.ASGITransport(app=create_app(service, manage=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
        response = await http.get("/broadcast/status/" + "cd" * 32)
    error_of(response, 503, "INTERNAL_ERROR")


class IndexLikeSource:
    """What the indexer will plug in: spent outputs from its own records, not from the nodes."""

    def __init__(self, known: dict[OutPoint, TxOutput]) -> None:
        self.known = known
        self.asked: list[OutPoint] = []

    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        self.asked += outpoints
        return [
            SpentOutput(
                op,
                self.known.get(op),
                1 if op in self.known else None,
                False,
                True if op in self.known else None,
                source="index",
            )
            for op in outpoints
        ]


async def test_a_plugged_in_source_answers_protection_and_dry_runs(net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode, fee=5_000)
    index = IndexLikeSource({coin.outpoint: coin.output})
    async with BroadcastService(config_for(net), spent_source=index) as service:
        transport = httpx.ASGITransport(app=create_app(service, manage=False))
        async with httpx.AsyncClient(transport=transport, base_url="http://b") as http:
            body = await dry(http, tx)
            assert body["validation"]["status"] == "valid"
            assert body["validation"]["fee"] == 5_000
            response = await post(http, {"tx": tx.hex(), "protection": {"max_fee_per_byte": 10}})
    details = error_of(response, 422, "PROTECTION_REJECTED")["details"]
    assert details["fee"] == 5_000  # the value came from the index's record of the coin
    assert index.asked == [coin.outpoint, coin.outpoint]
