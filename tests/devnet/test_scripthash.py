"""Scripthash status, history, unspent outputs with tokens, and their notifications."""

from __future__ import annotations

import pytest

from bch.token import NFT, Capability, TokenData
from bch.tx import TxOutput
from bch.wallet import Wallet
from devnet.service import Devnet
from tests.devnet.client import Client
from tests.devnet.conftest import connect
from tests.devnet.helpers import Coin, fund, pay, scripthash, spend, status_of


async def test_status_follows_mempool_and_blocks(tcp: Client) -> None:
    wallet = Wallet.from_seed("status")
    sh = scripthash(wallet.locking_bytecode)
    assert await tcp.call("blockchain.scripthash.subscribe", sh) is None

    txid = await tcp.call("devnet.faucet", wallet.address, 30_000)
    note = await tcp.notification("blockchain.scripthash.subscribe")
    history = await tcp.call("blockchain.scripthash.get_history", sh)
    assert history == [{"height": 0, "tx_hash": txid, "fee": history[0]["fee"]}]
    assert history[0]["fee"] > 0
    assert note["params"] == [sh, status_of(history)]

    await tcp.call("devnet.mine", 1)
    note = await tcp.notification("blockchain.scripthash.subscribe")
    height = (await tcp.call("blockchain.headers.get_tip"))["height"]
    history = await tcp.call("blockchain.scripthash.get_history", sh)
    assert history == [{"height": height, "tx_hash": txid}]
    assert note["params"] == [sh, status_of(history)]
    assert await tcp.call("blockchain.scripthash.subscribe", sh) == status_of(history)


async def test_unconfirmed_parent_is_height_minus_one(tcp: Client) -> None:
    wallet = Wallet.from_seed("chain of two")
    parent_coin = await fund(tcp, wallet, 40_000, mine=False)
    child = pay(parent_coin, wallet.locking_bytecode)
    child_id = await tcp.call("blockchain.transaction.broadcast", child.hex())
    sh = scripthash(wallet.locking_bytecode)
    history = await tcp.call("blockchain.scripthash.get_history", sh)
    heights = {h["tx_hash"]: h["height"] for h in history}
    assert heights == {parent_coin.utxo["tx_hash"]: 0, child_id: -1}
    assert [h["height"] for h in history] == [0, -1]
    mempool = await tcp.call("blockchain.scripthash.get_mempool", sh)
    assert mempool == history
    utxos = await tcp.call("blockchain.scripthash.listunspent", sh)
    assert [(u["tx_hash"], u["height"]) for u in utxos] == [(child_id, 0)]
    balance = await tcp.call("blockchain.scripthash.get_balance", sh)
    assert balance == {"confirmed": 0, "unconfirmed": 40_000 - 500}


async def test_history_range(tcp: Client) -> None:
    wallet = Wallet.from_seed("range")
    sh = scripthash(wallet.locking_bytecode)
    first = await fund(tcp, wallet, 10_000)
    second = await fund(tcp, wallet, 10_000)
    pending = await tcp.call("devnet.faucet", wallet.address, 10_000)
    h1, h2 = first.utxo["height"], second.utxo["height"]
    assert h2 == h1 + 1
    everything = await tcp.call("blockchain.scripthash.get_history", sh)
    assert [h["tx_hash"] for h in everything] == [
        first.utxo["tx_hash"],
        second.utxo["tx_hash"],
        pending,
    ]
    only_second = await tcp.call("blockchain.scripthash.get_history", sh, h2, h2 + 1)
    assert [h["tx_hash"] for h in only_second] == [second.utxo["tx_hash"]]
    from_second = await tcp.call("blockchain.scripthash.get_history", sh, h2)
    assert [h["tx_hash"] for h in from_second] == [second.utxo["tx_hash"], pending]


async def _token_coin(tcp: Client, wallet: Wallet) -> tuple[Coin, TokenData, str]:
    """A fungible+NFT token genesis to `wallet`, confirmed; returns the plain change coin."""
    coin = await fund(tcp, wallet, 100_000)
    token = TokenData(coin.outpoint.txid, 1_000, NFT(Capability.MUTABLE, b"\x01\x02"))
    genesis = spend(
        [coin],
        [
            TxOutput(1_000, wallet.locking_bytecode, token),
            TxOutput(coin.value - 1_000 - 600, wallet.locking_bytecode),
        ],
    )
    txid = await tcp.call("blockchain.transaction.broadcast", genesis.hex())
    await tcp.call("devnet.mine", 1)
    return coin, token, txid


async def test_listunspent_token_filters(devnet: Devnet, tcp: Client) -> None:
    wallet = Wallet.from_seed("tokens")
    sh = scripthash(wallet.locking_bytecode)
    _, token, txid = await _token_coin(tcp, wallet)
    everything = await tcp.call("blockchain.scripthash.listunspent", sh)
    assert {(u["tx_hash"], u["tx_pos"]) for u in everything} == {(txid, 0), (txid, 1)}
    [with_token] = [u for u in everything if "token_data" in u]
    assert with_token["tx_pos"] == 0
    assert with_token["token_data"] == {
        "amount": "1000",
        "category": token.category[::-1].hex(),
        "nft": {"capability": "mutable", "commitment": "0102"},
    }
    only = await tcp.call("blockchain.scripthash.listunspent", sh, "tokens_only")
    assert only == [with_token]
    without = await tcp.call("blockchain.scripthash.listunspent", sh, "exclude_tokens")
    assert [u["tx_pos"] for u in without] == [1]
    info = await tcp.call("blockchain.utxo.get_info", txid, 0)
    assert info == {
        "confirmed_height": with_token["height"],
        "scripthash": sh,
        "value": 1_000,
        "token_data": with_token["token_data"],
    }
    # protocol 1.4 clients never see token outputs
    old = await connect(devnet, versions=("1.4", "1.4"))
    try:
        assert [u["tx_pos"] for u in await old.call("blockchain.scripthash.listunspent", sh)] == [1]
    finally:
        await old.close()


async def test_utxo_get_info_spent_and_unknown(tcp: Client) -> None:
    wallet = Wallet.from_seed("utxo info")
    coin = await fund(tcp, wallet, 20_000)
    txid, vout = coin.utxo["tx_hash"], coin.utxo["tx_pos"]
    info = await tcp.call("blockchain.utxo.get_info", txid, vout)
    assert info["value"] == 20_000
    assert "token_data" not in info
    spender = await tcp.call(
        "blockchain.transaction.broadcast", pay(coin, wallet.locking_bytecode).hex()
    )
    assert await tcp.call("blockchain.utxo.get_info", txid, vout) is None  # spent in mempool
    unconfirmed = await tcp.call("blockchain.utxo.get_info", spender, 0)
    assert "confirmed_height" not in unconfirmed
    assert await tcp.call("blockchain.utxo.get_info", "cd" * 32, 0) is None


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_notifications_reach_every_subscriber(devnet: Devnet, transport: str) -> None:
    wallet = Wallet.from_seed("two watchers")
    sh = scripthash(wallet.locking_bytecode)
    watcher = await connect(devnet, transport=transport)
    actor = await connect(devnet)
    try:
        await watcher.call("blockchain.scripthash.subscribe", sh)
        await watcher.call("blockchain.headers.subscribe")
        await actor.call("devnet.faucet", wallet.address, 5_000, True)
        tip = await actor.call("blockchain.headers.get_tip")
        header_note = await watcher.notification("blockchain.headers.subscribe")
        assert header_note["params"] == [tip]
        statuses: list[object] = []
        while len(statuses) < 2:
            note = await watcher.notification("blockchain.scripthash.subscribe")
            statuses.append(note["params"])
        history = await watcher.call("blockchain.scripthash.get_history", sh)
        assert statuses[-1] == [sh, status_of(history)]
        assert await watcher.call("blockchain.scripthash.unsubscribe", sh) is True
        await actor.call("devnet.faucet", wallet.address, 5_000)
        await actor.call("server.ping")
        assert watcher.drain_notifications() == []
    finally:
        await watcher.close()
        await actor.close()
