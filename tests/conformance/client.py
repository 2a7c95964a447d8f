"""What a client that has read only the specification (shared/reference/service-spec.md)
needs to talk to a running `ladle up`: the addresses of LADLE_READY, the
devnet's ledger (to find ids of real tokens, pools, loans and the oracle feed), a test wallet's
coins over the devnet's Electrum server, a `tx.build` exchange over the router's WebSocket, and
signing (test machinery: the project's own wallet code, as the router end-to-end tests use)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import connect

from bch.keys import PrivateKey
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from tests.devnet.client import TcpClient

# The spec's words for a hex token ID / txid / 32-byte hash.
HEX64 = frozenset("0123456789abcdef")


def is_hex64(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= HEX64


# The spec's JSON type words, as Python's json module decodes them.
def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    assert isinstance(value, dict), type(value)
    return "object"


def has_type(value: object, word: str) -> bool:
    """`word` is the spec's: "integer", "number" (an integer is a number too), "string", …"""
    got = json_type(value)
    return got == word or (word == "number" and got == "integer")


def assert_fields(obj: object, fields: dict[str, str], where: str = "") -> None:
    """Every field the spec names is present with the spec's JSON type (dotted names reach into
    nested objects, as the spec's tables write them)."""
    assert isinstance(obj, dict), f"{where}: not an object: {obj!r}"
    for name, word in fields.items():
        value: object = obj
        for part in name.split("."):
            assert isinstance(value, dict) and part in value, f"{where}: no field {name}: {obj}"
            value = value[part]
        assert has_type(value, word), f"{where}: {name} is {json_type(value)}, not {word}"


def p2pkh_script(pkh: str) -> str:
    """Locking script of a P2PKH address (what a wallet knows of its own coins)."""
    return f"76a914{pkh}88ac"


@dataclass
class Ladle:
    """What `ladle up` announced, and the scenario's ledger its devnet serves."""

    ready: dict[str, Any]
    ledger: dict[str, Any]

    @property
    def rest(self) -> str:
        return str(self.ready["rest"])

    @property
    def router(self) -> str:
        return str(self.ready["router"])

    @property
    def broadcast(self) -> str:
        return str(self.ready["broadcast"])

    def wallet(self, index: int) -> dict[str, Any]:
        wallet: dict[str, Any] = self.ready["wallets"][index]
        return wallet

    # --- ids of real things of the devnet, from its ledger -------------------------------------

    @property
    def busiest_token(self) -> str:
        """The token with the most trades in the history (candles and volume have data)."""
        counts: dict[str, int] = {}
        for trade in self.ledger["trades"]:
            counts[trade["category"]] = counts.get(trade["category"], 0) + 1
        return max(counts, key=lambda c: counts[c])

    def symbol_of(self, category: str) -> str:
        (symbol,) = [t["symbol"] for t in self.ledger["tokens"] if t["category"] == category]
        return str(symbol)

    @property
    def token_ids(self) -> list[str]:
        return [str(t["category"]) for t in self.ledger["tokens"]]

    @property
    def oracle_feed(self) -> str:
        return str(self.ledger["oracle"]["category"])

    @property
    def oracle_updates(self) -> list[dict[str, Any]]:
        updates: list[dict[str, Any]] = self.ledger["oracle_updates"]
        return sorted(updates, key=lambda u: int(u["sequence"]))

    def loans(self, version: str) -> dict[str, str]:
        """Every loan of a lending deployment version ("v1", "v11"): name → borrower hash."""
        records = self.ledger["extensions"]["lending"]["records"]
        return {
            r["loan"]: r["borrower_hash"]
            for r in records
            if "loan" in r and r.get("version") == version and r.get("borrower_hash")
        }

    def active_loans(self, version: str) -> list[str]:
        active = set(self.ledger["extensions"]["lending"]["active"])
        return sorted(h for name, h in self.loans(version).items() if name in active)


# --- a wallet's coins, over the devnet's Electrum server ---------------------------------------


async def coins_of(ladle: Ladle, wallet: dict[str, Any]) -> list[dict[str, Any]]:
    """The wallet's unspent outputs (tokens included), as Electrum lists them."""
    [node, *_] = ladle.ready["electrum"]
    client = await TcpClient.open(node["host"], node["tcp_port"])
    try:
        await client.call("server.version", "conformance", ["1.4", "1.6"])
        script = bytes.fromhex(p2pkh_script(wallet["pkh"]))
        scripthash = hashlib.sha256(script).digest()[::-1].hex()
        coins: list[dict[str, Any]] = await client.call(
            "blockchain.scripthash.listunspent", scripthash
        )
        return coins
    finally:
        await client.close()


def funding_input(coin: dict[str, Any], pkh: str) -> dict[str, Any]:
    """A `tx.build` funding input in the spec's words: txid, vout, value, script_hex, token?"""
    entry: dict[str, Any] = {
        "txid": coin["tx_hash"],
        "vout": coin["tx_pos"],
        "value": str(coin["value"]),
        "script_hex": p2pkh_script(pkh),
    }
    token = coin.get("token_data")
    if token is not None:
        entry["token"] = {"category": token["category"], "amount": str(token["amount"])}
    return entry


def fungible_holdings(coins: list[dict[str, Any]]) -> dict[str, int]:
    held: dict[str, int] = {}
    for coin in coins:
        token = coin.get("token_data")
        if token is not None and token.get("nft") is None:
            held[token["category"]] = held.get(token["category"], 0) + int(token["amount"])
    return held


# --- tx.build over the router's WebSocket ------------------------------------------------------


async def rpc(ladle: Ladle, method: str, params: dict[str, Any], req_id: int = 1) -> dict[str, Any]:
    """Send `{id, method, params}`; return the response object with the same `id`."""
    async with connect(ladle.router, max_size=None) as ws:
        await ws.send(json.dumps({"id": req_id, "method": method, "params": params}))
        while True:
            reply: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if reply.get("id") == req_id:
                return reply


def error_code(reply: dict[str, Any]) -> str | None:
    """The error code of a failed `tx.build` (None when it has a result)."""
    if "result" in reply:
        return None
    error = reply.get("error")
    assert isinstance(error, dict), reply
    return str(error["code"])


def sign(result: dict[str, Any], wif: str) -> Transaction:
    """Sign `unsigned_tx_hex`'s `inputs_to_sign` against `source_outputs` (all inputs)."""
    tx = Transaction.from_hex(result["unsigned_tx_hex"])
    sources = [
        TxOutput(
            int(entry["value"]),
            bytes.fromhex(entry["locking_script_hex"]),
            TokenData.from_json(entry["token"]) if entry.get("token") else None,
        )
        for entry in result["source_outputs"]
    ]
    wallet = Wallet(PrivateKey.from_wif(wif))
    return wallet.sign_transaction(tx, sources, result["inputs_to_sign"])


async def wait_status(
    bcast: httpx.AsyncClient, txid: str, *, settled: tuple[str, ...] = ("accepted", "rejected")
) -> dict[str, Any]:
    """GET /broadcast/status/<txid> until the status is one of `settled` (10 s at most)."""
    record: dict[str, Any] = {}
    for _ in range(100):
        r = await bcast.get(f"/broadcast/status/{txid}")
        assert r.status_code == 200, r.text
        record = r.json()
        if record.get("status") in settled:
            break
        await asyncio.sleep(0.1)
    return record


def pay_self(coin: dict[str, Any], wallet: dict[str, Any], fee: int) -> Transaction:
    """A signed transaction spending one of the wallet's BCH coins back to the wallet, less
    `fee` (different fees give different transactions spending the same coin)."""
    assert "token_data" not in coin
    script = bytes.fromhex(p2pkh_script(wallet["pkh"]))
    source = TxOutput(int(coin["value"]), script)
    tx = Transaction.build(
        [TxInput(OutPoint.from_hex(coin["tx_hash"], coin["tx_pos"]))],
        [TxOutput(source.value - fee, script)],
    )
    return Wallet(PrivateKey.from_wif(wallet["wif"])).sign_transaction(tx, [source])


async def bch_coin(ladle: Ladle, wallet: dict[str, Any]) -> dict[str, Any]:
    """The wallet's largest coin without tokens."""
    coins = [c for c in await coins_of(ladle, wallet) if "token_data" not in c]
    assert coins, "the test wallet holds BCH"
    return max(coins, key=lambda c: int(c["value"]))
