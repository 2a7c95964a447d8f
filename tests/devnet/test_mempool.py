"""Mempool acceptance: each reject class produced by a real transaction, answered as Fulcrum
wraps a node's reject message."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bch.script import OP_RETURN, push_data
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from devnet.service import Devnet
from tests.devnet.client import Client, ServerError
from tests.devnet.conftest import config, connect
from tests.devnet.helpers import Coin, fund, pay, scripthash, spend
from verify.libauth import AsyncLibauthVerifier

PREFIX = "the transaction was rejected by network rules.\n\n"
ALICE = Wallet.from_seed("alice")
BOB = Wallet.from_seed("bob")


async def rejection(client: Client, tx: Transaction | str) -> str:
    """Broadcast and return the node message of the (expected) rejection."""
    raw = tx if isinstance(tx, str) else tx.hex()
    with pytest.raises(ServerError) as err:
        await client.call("blockchain.transaction.broadcast", raw)
    assert err.value.code == 1
    assert err.value.message.startswith(PREFIX)
    assert err.value.message.endswith("\n")
    return err.value.message[len(PREFIX) : -1]


async def test_conflict_first_seen_wins(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    first = pay(coin, ALICE.locking_bytecode, fee=300)
    second = pay(coin, BOB.locking_bytecode, fee=3_000)  # a higher fee replaces nothing
    txid = await tcp.call("blockchain.transaction.broadcast", first.hex())
    assert await rejection(tcp, second) == "txn-mempool-conflict"
    assert await tcp.call("mempool.get") == [txid]


async def test_rebroadcast_returns_txid_and_confirmed_is_reported(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    txid = await tcp.call("blockchain.transaction.broadcast", tx.hex())
    assert txid == tx.txid_hex
    assert await tcp.call("blockchain.transaction.broadcast", tx.hex()) == txid
    await tcp.call("devnet.mine", 1)
    assert await rejection(tcp, tx) == "transaction already in block chain"


async def test_missing_and_spent_inputs(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    ghost = Coin({**coin.utxo, "tx_hash": "ee" * 32}, ALICE)
    assert await rejection(tcp, pay(ghost, BOB.locking_bytecode)) == (
        "bad-txns-inputs-missingorspent"
    )
    await tcp.call("blockchain.transaction.broadcast", pay(coin, BOB.locking_bytecode).hex())
    await tcp.call("devnet.mine", 1)
    again = pay(coin, ALICE.locking_bytecode, fee=800)
    assert await rejection(tcp, again) == "bad-txns-inputs-missingorspent"


async def test_fee_below_one_sat_per_byte(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode, fee=100)
    message = await rejection(tcp, tx)
    assert message == f"min relay fee not met, 100 < {tx.size()}"
    exact = pay(coin, BOB.locking_bytecode, fee=tx.size())  # same size: exactly 1 sat/byte
    assert await tcp.call("blockchain.transaction.broadcast", exact.hex()) == exact.txid_hex


async def test_value_out_above_value_in(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    tx = spend([coin], [TxOutput(50_001, BOB.locking_bytecode)])
    assert (await rejection(tcp, tx)).startswith("bad-txns-in-belowout")


async def test_dust(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    tx = spend(
        [coin],
        [TxOutput(545, BOB.locking_bytecode), TxOutput(49_000, ALICE.locking_bytecode)],
    )
    assert (await rejection(tcp, tx)).startswith("dust")
    ok = spend(
        [coin], [TxOutput(546, BOB.locking_bytecode), TxOutput(49_000, ALICE.locking_bytecode)]
    )
    assert await tcp.call("blockchain.transaction.broadcast", ok.hex()) == ok.txid_hex


async def test_non_standard_output(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    too_long = b"\x51" + push_data(b"\x00" * 200) + b"\x75"  # 203 bytes of bytecode
    tx = spend([coin], [TxOutput(49_000, too_long)])
    assert (await rejection(tcp, tx)).startswith("scriptpubkey")
    data = bytes((OP_RETURN,)) + push_data(b"x" * 300)
    tx = spend([coin], [TxOutput(0, data), TxOutput(49_000, ALICE.locking_bytecode)])
    assert (await rejection(tcp, tx)).startswith(("oversize-op-return", "scriptpubkey"))


async def test_oversized_transaction(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 5_000_000)
    outputs = [TxOutput(1_000, BOB.locking_bytecode)] * 3_000  # 3000 × 34 bytes > 100 kB
    tx = spend([coin], outputs)
    assert tx.size() > 100_000
    assert (await rejection(tcp, tx)).startswith("tx-size")


async def test_token_conservation(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 100_000)
    category = coin.outpoint.txid  # genesis: the category is the spent outpoint's txid
    genesis = spend(
        [coin],
        [
            TxOutput(1_000, ALICE.locking_bytecode, TokenData(category, 500)),
            TxOutput(98_000, ALICE.locking_bytecode),
        ],
    )
    await tcp.call("blockchain.transaction.broadcast", genesis.hex())
    utxos = await tcp.call(
        "blockchain.scripthash.listunspent", scripthash(ALICE.locking_bytecode), "tokens_only"
    )
    token_coin = Coin(utxos[0], ALICE)
    change = Coin({"tx_hash": genesis.txid_hex, "tx_pos": 1, "value": 98_000}, ALICE)
    inflate = spend(
        [token_coin], [TxOutput(1_000, ALICE.locking_bytecode, TokenData(category, 501))]
    )
    assert (await rejection(tcp, inflate)).startswith("bad-txns-token-")
    forged = TokenData(b"\x42" * 32, 1)  # not a genesis: the category does not match
    fake = spend(
        [token_coin, change],
        [
            TxOutput(1_000, ALICE.locking_bytecode, TokenData(category, 500)),
            TxOutput(1_000, BOB.locking_bytecode, forged),
            TxOutput(96_000, ALICE.locking_bytecode),
        ],
    )
    assert (await rejection(tcp, fake)).startswith("bad-txns-token-")


async def test_premature_coinbase_spend(tcp: Client) -> None:
    await tcp.call("devnet.mine", 1, ALICE.address)
    utxos = await tcp.call("blockchain.scripthash.listunspent", scripthash(ALICE.locking_bytecode))
    coinbase = Coin(utxos[0], ALICE)
    tx = pay(coinbase, BOB.locking_bytecode)
    assert (await rejection(tcp, tx)).startswith("bad-txns-premature-spend-of-coinbase")
    await tcp.call("devnet.mine", 99)
    assert await tcp.call("blockchain.transaction.broadcast", tx.hex()) == tx.txid_hex


async def test_nonfinal(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000)
    height = (await tcp.call("blockchain.headers.get_tip"))["height"]
    unsigned = Transaction.build(
        [TxInput(coin.outpoint, sequence=0)],
        [TxOutput(49_000, BOB.locking_bytecode)],
        locktime=height + 5,
    )
    tx = ALICE.sign_transaction(unsigned, [coin.output])
    assert (await rejection(tcp, tx)).startswith("bad-txns-nonfinal")
    await tcp.call("devnet.mine", 4)  # the next block is height + 5: still not final
    assert (await rejection(tcp, tx)).startswith("bad-txns-nonfinal")
    await tcp.call("devnet.mine", 1)
    assert await tcp.call("blockchain.transaction.broadcast", tx.hex()) == tx.txid_hex


async def test_malformed(tcp: Client) -> None:
    assert await rejection(tcp, "0200000001") == "TX decode failed"
    assert await rejection(tcp, "not hex") == "TX decode failed"


async def test_unconfirmed_chain(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 50_000, mine=False)
    txids = []
    for _ in range(5):
        tx = pay(coin, ALICE.locking_bytecode)
        txids.append(await tcp.call("blockchain.transaction.broadcast", tx.hex()))
        coin = Coin(
            {"tx_hash": tx.txid_hex, "tx_pos": 0, "value": tx.outputs[0].value, "height": 0},
            ALICE,
        )
    assert set(txids) <= set(await tcp.call("mempool.get"))
    await tcp.call("devnet.mine", 1)
    for txid in txids:
        assert await tcp.call("blockchain.transaction.get_height", txid) > 0


# --- with the libauth verifier -----------------------------------------------------------------


@pytest.fixture
async def verified() -> AsyncIterator[Devnet]:
    async with Devnet(config(verify=True)) as net:
        yield net


@pytest.mark.node
async def test_script_validity_by_libauth(verified: Devnet) -> None:
    c = await connect(verified)
    try:
        coin = await fund(c, ALICE, 50_000)
        good = pay(coin, BOB.locking_bytecode)
        unlocking = good.inputs[0].unlocking
        forged_sig = unlocking[:5] + bytes((unlocking[5] ^ 1,)) + unlocking[6:]
        bad = Transaction.build([TxInput(coin.outpoint, forged_sig)], good.outputs)
        assert (await rejection(c, bad)).startswith("mandatory-script-verify-flag-failed (")
        wrong_key = spend([Coin(coin.utxo, BOB)], list(good.outputs), sign=False)
        wrong_key = Transaction.build(
            [
                TxInput(
                    coin.outpoint,
                    BOB.sign_p2pkh_input(
                        wrong_key, 0, [TxOutput(coin.value, BOB.locking_bytecode)]
                    ),
                )
            ],
            good.outputs,
        )
        assert (await rejection(c, wrong_key)).startswith("mandatory-script-verify-flag-failed")
        assert await c.call("blockchain.transaction.broadcast", good.hex()) == good.txid_hex
    finally:
        await c.close()


async def test_fails_closed_without_verifier() -> None:
    broken = AsyncLibauthVerifier(node="/nonexistent/node")
    async with Devnet(config(verify=True), verifier=broken) as net:
        c = await connect(net)
        try:
            with pytest.raises(ServerError) as err:
                await c.call("devnet.faucet", ALICE.address, 10_000)
            assert err.value.code == 2
            assert await c.call("mempool.count") == 0
            dummy = Transaction.build(
                [TxInput(OutPoint(b"\x01" * 32, 0), b"\x51")], [TxOutput(1_000, b"\x51" * 30)]
            )
            assert "missingorspent" in await rejection(c, dummy)  # cheap checks still run first
        finally:
            await c.close()
