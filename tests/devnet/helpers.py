"""Transaction building for the tests, from what the server told us over the socket."""

from __future__ import annotations

import hashlib
from typing import Any

from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from tests.devnet.client import Client, ServerError


def scripthash(locking: bytes) -> str:
    """Electrum's scripthash, computed here independently of the server."""
    return hashlib.sha256(locking).digest()[::-1].hex()


def status_of(history: list[dict[str, Any]]) -> str | None:
    """The Electrum status hash of a history, per the protocol's definition."""
    if not history:
        return None
    text = "".join(f"{h['tx_hash']}:{h['height']}:" for h in history)
    return hashlib.sha256(text.encode()).hexdigest()


def double_sha(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


class Coin:
    """An unspent output as listunspent reported it, with what spending it needs."""

    def __init__(self, utxo: dict[str, Any], wallet: Wallet) -> None:
        self.utxo = utxo
        self.wallet = wallet
        token = utxo.get("token_data")
        self.output = TxOutput(
            utxo["value"],
            wallet.locking_bytecode,
            TokenData.from_json(token) if token else None,
        )
        self.outpoint = OutPoint.from_hex(utxo["tx_hash"], utxo["tx_pos"])

    @property
    def value(self) -> int:
        return int(self.utxo["value"])


async def fund(client: Client, wallet: Wallet, amount: int, *, mine: bool = True) -> Coin:
    """Get `amount` sats to `wallet` from the devnet faucet (over the control interface)."""
    txid = await client.call("devnet.faucet", wallet.address, amount, mine)
    utxos = await client.call(
        "blockchain.scripthash.listunspent", scripthash(wallet.locking_bytecode)
    )
    [utxo] = [u for u in utxos if u["tx_hash"] == txid]
    return Coin(utxo, wallet)


def spend(
    coins: list[Coin], outputs: list[TxOutput], *, sign: bool = True, locktime: int = 0
) -> Transaction:
    unsigned = Transaction.build([TxInput(c.outpoint) for c in coins], outputs, locktime=locktime)
    if not sign:
        return unsigned
    tx = unsigned
    for wallet in {id(c.wallet): c.wallet for c in coins}.values():
        indices = [i for i, c in enumerate(coins) if c.wallet is wallet]
        tx = wallet.sign_transaction(tx, [c.output for c in coins], indices)
    return tx


def pay(coin: Coin, to: bytes, fee: int = 500, token: TokenData | None = None) -> Transaction:
    """Spend one coin to `to`, paying `fee`."""
    return spend([coin], [TxOutput(coin.value - fee, to, token)])


async def tx_height(client: Client, txid: str) -> int | None:
    """`transaction.get_height`, None for a txid the server does not know: the devnet answers
    that as Fulcrum does, with error code 1 "No transaction matching…" (not null)."""
    try:
        height: int = await client.call("blockchain.transaction.get_height", txid)
    except ServerError as exc:
        assert exc.code == 1 and exc.message.startswith("No transaction matching"), exc
        return None
    return height
