"""Swap building, `tx.build` over the router's WebSocket (the address `ladle up` announces as
"router"): the request in the spec's names exactly, a test wallet's real coins as `funding`, the
result's fields and types, the router fee output (10 basis points), signing and the broadcast
interface, `side` and `min_output`, the 1 to 500 funding inputs, and each error code."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest

from bch.tx import Transaction
from tests.conformance.client import (
    Ladle,
    assert_fields,
    coins_of,
    error_code,
    funding_input,
    fungible_holdings,
    p2pkh_script,
    rpc,
    sign,
    wait_status,
)

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

BCH = "bch"
FEE_BPS = 10  # "currently 10 basis points (0.1%) of the trade"
NO_POOLS = "ee" * 32  # a token ID no pool trades

# Swap build result.
BUILD_RESULT = {
    "unsigned_tx_hex": "string",
    "source_outputs": "array",
    "inputs_to_sign": "array",
    "expected_output": "string",
    "fee_sats": "string",
    "fee_token_amount": "string",
    "miner_fee_sats": "string",
    "route": "object",
}
SOURCE_OUTPUT = {"value": "string", "locking_script_hex": "string"}


async def _wallet_params(
    ladle: Ladle, index: int, sell: str, buy: str, amount: int, **extra: Any
) -> dict[str, Any]:
    wallet = ladle.wallet(index)
    coins = await coins_of(ladle, wallet)
    params: dict[str, Any] = {
        "sell": sell,
        "buy": buy,
        "amount": str(amount),
        "side": "sell",
        "funding": [funding_input(c, wallet["pkh"]) for c in coins],
        "receive_addr": wallet["token_address"],
        "change_addr": wallet["address"],
    }
    params.update(extra)
    return params


async def _build(ladle: Ladle, params: dict[str, Any]) -> dict[str, Any]:
    reply = await rpc(ladle, "tx.build", params, req_id=7)
    assert reply["id"] == 7, "a response object has the same id"
    assert "result" in reply, f"tx.build failed: {reply.get('error')}"
    result: dict[str, Any] = reply["result"]
    return result


async def _error(ladle: Ladle, params: dict[str, Any]) -> str | None:
    return error_code(await rpc(ladle, "tx.build", params))


def _is_uint_string(value: str) -> bool:
    return value.isdigit()


def _check_result(result: dict[str, Any], params: dict[str, Any], pkh: str) -> Transaction:
    """The result's fields and types, and what they say about the unsigned transaction."""
    assert_fields(result, BUILD_RESULT, "tx.build result")
    for name in ("expected_output", "fee_sats", "fee_token_amount", "miner_fee_sats"):
        assert _is_uint_string(result[name]), f"{name} = {result[name]!r}"
    assert isinstance(result["route"]["kind"], str), "route: kind (string)"
    tx = Transaction.from_hex(result["unsigned_tx_hex"])
    sources = result["source_outputs"]
    assert len(sources) == len(tx.inputs), "prevouts index-aligned to all inputs"
    for entry in sources:
        assert_fields(entry, SOURCE_OUTPUT, "source output")
        assert _is_uint_string(entry["value"])
        bytes.fromhex(entry["locking_script_hex"])
    mine = {(f["txid"], f["vout"]): f for f in params["funding"]}
    spent_mine = [
        i
        for i, txin in enumerate(tx.inputs)
        if (txin.outpoint.txid_hex, txin.outpoint.index) in mine
    ]
    assert sorted(result["inputs_to_sign"]) == spent_mine, "indices of the client's own inputs"
    for i in spent_mine:
        txin = tx.inputs[i]
        funding = mine[(txin.outpoint.txid_hex, txin.outpoint.index)]
        assert sources[i]["value"] == funding["value"]
        assert sources[i]["locking_script_hex"] == p2pkh_script(pkh)
    total_in = sum(int(s["value"]) for s in sources)
    total_out = sum(out.value for out in tx.outputs)
    assert int(result["miner_fee_sats"]) == total_in - total_out
    return tx


def _fee_output_values(tx: Transaction, pkh: str) -> list[int]:
    """Values of the BCH outputs that pay neither the wallet nor a pool's token."""
    own = bytes.fromhex(p2pkh_script(pkh))
    return [out.value for out in tx.outputs if out.locking != own and out.token is None]


async def _broadcast(bcast: httpx.AsyncClient, signed: Transaction) -> None:
    r = await bcast.post("/broadcast", json={"tx": signed.hex()})
    assert r.status_code == 200, r.text
    assert r.json()["txid"] == signed.txid_hex
    record = await wait_status(bcast, signed.txid_hex)
    assert record["status"] == "accepted", record


async def test_bch_to_token(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    amount = 2_000_000
    wallet = ladle.wallet(0)
    params = await _wallet_params(ladle, 0, BCH, token, amount)
    result = await _build(ladle, params)
    tx = _check_result(result, params, wallet["pkh"])
    # the bought tokens go to receive_addr
    own = bytes.fromhex(p2pkh_script(wallet["pkh"]))
    bought = [
        out.token.amount
        for out in tx.outputs
        if out.locking == own and out.token is not None and out.token.category_hex == token
    ]
    assert int(result["expected_output"]) in bought
    # router fee: one output, 10 bps of the trade, reported in fee_sats
    fee = int(result["fee_sats"])
    assert abs(fee - amount * FEE_BPS / 10_000) <= 1, fee
    assert fee in _fee_output_values(tx, wallet["pkh"]), "the fee is one output"
    assert result["fee_token_amount"] == "0"
    await _broadcast(bcast, sign(result, wallet["wif"]))


async def test_token_to_bch(ladle: Ladle, bcast: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    wallet = ladle.wallet(1)
    held = fungible_holdings(await coins_of(ladle, wallet))
    amount = held[token] // 10
    params = await _wallet_params(ladle, 1, token, BCH, amount)
    result = await _build(ladle, params)
    tx = _check_result(result, params, wallet["pkh"])
    got = int(result["expected_output"])
    fee = int(result["fee_sats"])
    gross = got + fee  # what the pools pay for the tokens
    assert gross >= 1_000_000, "a trade large enough to carry a fee"
    assert abs(fee - gross * FEE_BPS / 10_000) <= 1, (fee, gross)
    assert fee in _fee_output_values(tx, wallet["pkh"]), "the fee is one output"
    assert result["fee_token_amount"] == "0"
    await _broadcast(bcast, sign(result, wallet["wif"]))


async def test_token_to_token(ladle: Ladle) -> None:
    """The fee is in the sold token: fee_token_amount; fee_sats is "0"."""
    wallet = ladle.wallet(2)
    held = fungible_holdings(await coins_of(ladle, wallet))
    sell = ladle.busiest_token
    counts: dict[str, int] = {}
    for trade in ladle.ledger["trades"]:
        if trade["category"] != sell and trade["category"] in held:
            counts[trade["category"]] = counts.get(trade["category"], 0) + 1
    buy = max(counts, key=lambda c: counts[c])
    amount = held[sell] // 10
    params = await _wallet_params(ladle, 2, sell, buy, amount)
    result = await _build(ladle, params)
    tx = _check_result(result, params, wallet["pkh"])
    fee_tokens = int(result["fee_token_amount"])
    assert abs(fee_tokens - amount * FEE_BPS / 10_000) <= 1, fee_tokens
    assert result["fee_sats"] == "0"
    fee_outputs = [
        out.token.amount
        for out in tx.outputs
        if out.token is not None
        and out.token.category_hex == sell
        and out.locking != bytes.fromhex(p2pkh_script(wallet["pkh"]))
        and out.token.amount == fee_tokens
    ]
    assert fee_outputs, "the token fee is one output"


async def test_side_buy_receives_the_amount_and_ignores_min_output(ladle: Ladle) -> None:
    token = ladle.busiest_token
    wanted = 1_000_000
    params = await _wallet_params(
        ladle, 0, BCH, token, wanted, side="buy", min_output=str(10 * wanted)
    )
    result = await _build(ladle, params)
    _check_result(result, params, ladle.wallet(0)["pkh"])
    assert result["expected_output"] == str(wanted)


async def test_min_output_is_a_floor_in_sell_mode(ladle: Ladle) -> None:
    token = ladle.busiest_token
    params = await _wallet_params(ladle, 0, BCH, token, 1_500_000)
    expected = int((await _build(ladle, params))["expected_output"])
    at_floor = await _build(ladle, {**params, "min_output": str(expected)})
    assert int(at_floor["expected_output"]) >= expected
    assert await _error(ladle, {**params, "min_output": str(expected * 2)}) == "slippage"


async def test_one_funding_input_is_enough(ladle: Ladle) -> None:
    wallet = ladle.wallet(0)
    coins = await coins_of(ladle, wallet)
    big = max((c for c in coins if "token_data" not in c), key=lambda c: c["value"])
    params = await _wallet_params(ladle, 0, BCH, ladle.busiest_token, 1_000_000)
    params["funding"] = [funding_input(big, wallet["pkh"])]
    result = await _build(ladle, params)
    _check_result(result, params, wallet["pkh"])


def _made_up_inputs(n: int, pkh: str) -> list[dict[str, Any]]:
    return [
        {
            "txid": hashlib.sha256(f"conformance {i}".encode()).hexdigest(),
            "vout": 0,
            "value": "100000",
            "script_hex": p2pkh_script(pkh),
        }
        for i in range(n)
    ]


async def test_500_funding_inputs_are_accepted(ladle: Ladle) -> None:
    params = await _wallet_params(ladle, 0, BCH, ladle.busiest_token, 1_000_000)
    params["funding"] = _made_up_inputs(500, ladle.wallet(0)["pkh"])
    assert await _error(ladle, params) != "bad_request"


# tx.build error `bad_request`: "malformed params, invalid asset, more than 500 funding inputs".
BAD_REQUESTS: list[tuple[dict[str, Any], str]] = [
    ({"funding": []}, "0 funding inputs"),
    ({"funding": 501}, "501 funding inputs"),
    ({"sell": "btc"}, "invalid sold asset"),
    ({"buy": "12" * 31}, "invalid bought asset"),
    ({"amount": "ten"}, "malformed amount"),
    ({"side": "both"}, "side is buy or sell"),
    ({"receive_addr": None}, "receive_addr is required"),
    ({"change_addr": "nowhere"}, "change_addr is a CashAddr"),
]


@pytest.mark.parametrize(("change", "why"), BAD_REQUESTS, ids=[why for _, why in BAD_REQUESTS])
async def test_bad_request(ladle: Ladle, change: dict[str, Any], why: str) -> None:
    params = await _wallet_params(ladle, 0, BCH, ladle.busiest_token, 1_000_000)
    if change.get("funding") == 501:
        change = {"funding": _made_up_inputs(501, ladle.wallet(0)["pkh"])}
    params.update(change)
    params = {k: v for k, v in params.items() if v is not None}
    assert await _error(ladle, params) == "bad_request", why


async def test_route_failed_without_pools(ladle: Ladle) -> None:
    params = await _wallet_params(ladle, 0, BCH, NO_POOLS, 1_000_000)
    assert await _error(ladle, params) == "route_failed"


async def test_insufficient_funds(ladle: Ladle) -> None:
    """Funding that cannot cover the sold sats plus the miner fee."""
    wallet = ladle.wallet(0)
    coins = await coins_of(ladle, wallet)
    small = min((c for c in coins if "token_data" in c), key=lambda c: c["value"])
    params = await _wallet_params(ladle, 0, BCH, ladle.busiest_token, 1_000_000)
    params["funding"] = [funding_input(small, wallet["pkh"])]
    assert await _error(ladle, params) == "insufficient_funds"
