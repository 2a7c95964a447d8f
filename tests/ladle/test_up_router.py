"""`ladle up` runs the router with the spec's router fee on: a devnet fee wallet derived from
the scenario seed, announced in LADLE_READY and the printed endpoints, and every built
transaction pays it. Expected values come from the seed and the ledger, not from the router."""

from __future__ import annotations

import signal
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import connect

from bch.cashaddr import Address
from bch.script import electrum_scripthash
from bch.tx import Transaction
from bch.wallet import Wallet
from indexer.electrum.client import ElectrumClient
from tests.ladle.test_up import start
from tests.router.schemas import validator

BCH = "bch"
AMOUNT = 2_000_000  # sats: its 10 bps (2,000) is above the fee output's dust


async def _call(ws: Any, req_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    await ws.send(orjson.dumps({"id": req_id, "method": method, "params": params}).decode())
    reply: dict[str, Any] = orjson.loads(await ws.recv())
    assert reply["id"] == req_id and "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def _fee_outputs(result: dict[str, Any], fee_locking: bytes) -> list[Any]:
    tx = Transaction.from_hex(result["unsigned_tx_hex"])
    return [o for o in tx.outputs if o.locking == fee_locking]


async def test_up_router_charges_the_fee_to_the_announced_wallet() -> None:
    running = await start("up", "--ports", "0", "--preset", "small", "--no-verify")
    try:
        ready = await running.ready()
        seed = ready["devnet"]["seed"]
        fee_wallet = Wallet.from_seed(f"ladle scenario {seed}/router-fee")
        assert ready["router_fee"] == {"address": fee_wallet.token_address, "bps": 10}
        assert any(fee_wallet.token_address in line for line in running.lines)
        fee_locking = Address.decode(ready["router_fee"]["address"]).locking_bytecode()

        async with httpx.AsyncClient(timeout=30) as http:
            ledger = (await http.get(ready["devnet"]["ledger"])).json()
        counts: dict[str, int] = {}
        for pool in ledger["pools"]:
            if pool["live_utxo"] is not None:
                counts[pool["category"]] = counts.get(pool["category"], 0) + 1
        entry = ready["wallets"][0]
        wallet = Wallet.from_seed(f"ladle devnet wallet {0}")
        assert wallet.address == entry["address"]
        electrum = ElectrumClient([ready["electrum"][0]["tcp"]], client_name="test_up_router")
        try:
            coins = await electrum.listunspent(electrum_scripthash(wallet.locking_bytecode))
        finally:
            await electrum.close()
        funding: list[dict[str, Any]] = []
        held: dict[str, int] = {}
        for u in coins:
            item: dict[str, Any] = {
                "txid": u.outpoint.txid_hex,
                "vout": u.outpoint.index,
                "value": str(u.value),
                "script_hex": wallet.locking_bytecode.hex(),
            }
            if u.token is not None:
                item["token"] = u.token.to_json()
                if u.token.nft is None:
                    held[u.token.category_hex] = held.get(u.token.category_hex, 0) + u.token.amount
            funding.append(item)
        traded = sorted((t for t in held if t in counts), key=lambda t: (-counts[t], t))
        assert len(traded) >= 2, "the test wallet holds two tokens with pools"
        a, b = traded[0], traded[1]
        order = {"receive_addr": wallet.token_address, "change_addr": wallet.address}

        async with connect(ready["router"], max_size=None) as ws:
            # BCH → token: the fee is sats, one output to the announced address.
            params = {"sell": BCH, "buy": a, "amount": str(AMOUNT), "funding": funding, **order}
            result = await _call(ws, 1, "tx.build", params)
            validator("tx.build.result.json").validate(result)
            fee = AMOUNT * 10 // 10_000
            assert (result["fee_sats"], result["fee_token_amount"]) == (str(fee), "0")
            assert result["route"]["router_fee"]["bps"] == 10
            [paid] = _fee_outputs(result, fee_locking)
            assert paid.value == int(result["fee_sats"]) and paid.token is None

            # token → token: the fee is the sold token; fee_sats is "0".
            sold = held[b] // 10
            params = {"sell": b, "buy": a, "amount": str(sold), "funding": funding, **order}
            result = await _call(ws, 2, "tx.build", params)
            validator("tx.build.result.json").validate(result)
            assert result["route"]["kind"] == "two_hop"
            fee = sold * 10 // 10_000
            assert fee > 0
            assert (result["fee_sats"], result["fee_token_amount"]) == ("0", str(fee))
            [paid] = _fee_outputs(result, fee_locking)
            assert paid.token is not None and paid.token.category_hex == b
            assert paid.token.amount == fee
        assert await running.stop(signal.SIGINT) == 0
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()
