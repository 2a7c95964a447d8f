"""Reorgs on command: headers, blocks, transactions, UTXOs and the mempool stay consistent."""

from __future__ import annotations

import itertools

from bch.block import Block
from bch.tx import TxOutput
from bch.wallet import Wallet
from tests.devnet.client import Client
from tests.devnet.helpers import (
    Coin,
    double_sha,
    fund,
    pay,
    scripthash,
    spend,
    status_of,
    tx_height,
)

ALICE = Wallet.from_seed("reorg alice")
BOB = Wallet.from_seed("reorg bob")
CAROL = Wallet.from_seed("reorg carol")


async def chain_hashes(client: Client, upto: int) -> list[bytes]:
    result = await client.call("blockchain.block.headers", 0, upto + 1)
    headers = [bytes.fromhex(h) for h in result["headers"]]
    for prev, header in itertools.pairwise(headers):
        assert header[4:36] == double_sha(prev)
    return [double_sha(h) for h in headers]


async def test_reorg_with_double_spend(tcp: Client) -> None:
    coin_a = await fund(tcp, ALICE, 60_000)
    coin_c = await fund(tcp, CAROL, 60_000)
    to_bob = pay(coin_a, BOB.locking_bytecode)
    innocent = pay(coin_c, CAROL.locking_bytecode)
    await tcp.call("blockchain.transaction.broadcast", to_bob.hex())
    await tcp.call("blockchain.transaction.broadcast", innocent.hex())
    mined = await tcp.call("devnet.mine", 1)
    old_height = mined["height"]
    old_hashes = await chain_hashes(tcp, old_height)
    bob_sh = scripthash(BOB.locking_bytecode)
    assert await tcp.call("blockchain.scripthash.subscribe", bob_sh) is not None
    await tcp.call("blockchain.headers.subscribe")

    double_spend = spend([coin_a], [TxOutput(coin_a.value - 700, ALICE.locking_bytecode)])
    result = await tcp.call("devnet.reorg", 1, [double_spend.hex()])
    assert result["height"] == old_height + 1
    assert result["fork_height"] == old_height - 1

    note = await tcp.notification("blockchain.headers.subscribe")
    tip = await tcp.call("blockchain.headers.get_tip")
    assert note["params"] == [tip]
    assert tip["height"] == old_height + 1
    new_hashes = await chain_hashes(tcp, tip["height"])
    assert new_hashes[:old_height] == old_hashes[:old_height]
    assert new_hashes[old_height] != old_hashes[old_height]

    replaced = Block.from_bytes(bytes.fromhex(await tcp.call("blockchain.block.get", old_height)))
    assert replaced.hash == new_hashes[old_height]
    assert double_spend.txid in replaced.txids
    assert await tcp.call("blockchain.transaction.get_height", double_spend.txid_hex) == old_height
    # the victim is gone, the innocent transaction is back in the mempool
    assert await tx_height(tcp, to_bob.txid_hex) is None
    assert await tcp.call("blockchain.transaction.get_height", innocent.txid_hex) == 0
    assert await tcp.call("mempool.get") == [innocent.txid_hex]
    assert await tcp.call("blockchain.scripthash.listunspent", bob_sh) == []
    assert await tcp.call("blockchain.utxo.get_info", to_bob.txid_hex, 0) is None
    bob_note = await tcp.notification("blockchain.scripthash.subscribe")
    assert bob_note["params"] == [bob_sh, None]
    alice_utxos = await tcp.call(
        "blockchain.scripthash.listunspent", scripthash(ALICE.locking_bytecode)
    )
    assert [(u["tx_hash"], u["height"]) for u in alice_utxos] == [
        (double_spend.txid_hex, old_height)
    ]


async def test_deep_reorg_returns_transactions_to_the_mempool(tcp: Client) -> None:
    coin = await fund(tcp, ALICE, 60_000)
    first = pay(coin, BOB.locking_bytecode)
    await tcp.call("blockchain.transaction.broadcast", first.hex())
    await tcp.call("devnet.mine", 1)
    bob_coin = Coin({"tx_hash": first.txid_hex, "tx_pos": 0, "value": first.outputs[0].value}, BOB)
    second = pay(bob_coin, CAROL.locking_bytecode)
    await tcp.call("blockchain.transaction.broadcast", second.hex())
    top = (await tcp.call("devnet.mine", 2))["height"]
    carol_sh = scripthash(CAROL.locking_bytecode)
    before = await tcp.call("blockchain.scripthash.get_history", carol_sh)
    assert before == [{"height": top - 1, "tx_hash": second.txid_hex}]

    result = await tcp.call("devnet.reorg", 3)
    assert result["height"] == top + 1
    assert len(result["blocks"]) == 4
    pool = await tcp.call("mempool.get")
    assert set(pool) == {first.txid_hex, second.txid_hex}  # the coin's own funding block stays
    history = await tcp.call("blockchain.scripthash.get_history", carol_sh)
    assert history == [{"height": -1, "tx_hash": second.txid_hex, "fee": 500}]
    assert await tcp.call("blockchain.scripthash.subscribe", carol_sh) == status_of(history)
    await tcp.call("devnet.mine", 1)
    assert await tcp.call("mempool.count") == 0
    assert await tcp.call("blockchain.transaction.get_height", second.txid_hex) == top + 2
