"""Several nodes: propagation (immediate or delayed), partitions, conflicts settled by blocks."""

from __future__ import annotations

import asyncio

from bch.tx import TxOutput
from bch.wallet import Wallet
from devnet.service import Devnet
from tests.devnet.conftest import config, connect
from tests.devnet.helpers import fund, pay, spend, tx_height

ALICE = Wallet.from_seed("net alice")
BOB = Wallet.from_seed("net bob")


async def test_each_node_has_its_own_endpoint_and_relays() -> None:
    async with Devnet(config(nodes=2)) as net:
        a, b = await connect(net, 0), await connect(net, 1, transport="ws")
        try:
            assert net.servers[0].tcp_port != net.servers[1].tcp_port
            await b.call("blockchain.headers.subscribe")
            coin = await fund(a, ALICE, 40_000)
            tx = pay(coin, BOB.locking_bytecode)
            await a.call("blockchain.transaction.broadcast", tx.hex())
            assert await b.call("mempool.get") == [tx.txid_hex]
            await a.call("devnet.mine", 1)
            tip_a = await a.call("blockchain.headers.get_tip")
            assert await b.call("blockchain.headers.get_tip") == tip_a
            notes = [await b.notification("blockchain.headers.subscribe") for _ in range(2)]
            assert notes[-1]["params"] == [tip_a]
            assert await b.call("mempool.count") == 0
            assert await b.call("blockchain.transaction.get_height", tx.txid_hex) == tip_a["height"]
        finally:
            await a.close()
            await b.close()


async def test_propagation_delay() -> None:
    async with Devnet(config(nodes=2, delay=0.3)) as net:
        a, b = await connect(net, 0), await connect(net, 1)
        try:
            start = (await b.call("blockchain.headers.get_tip"))["height"]
            assert start == (await a.call("blockchain.headers.get_tip"))["height"]
            await a.call("devnet.mine", 1)
            assert (await b.call("blockchain.headers.get_tip"))["height"] == start
            await asyncio.sleep(0.5)
            assert (await b.call("blockchain.headers.get_tip"))["height"] == start + 1
            txid = await a.call("devnet.faucet", ALICE.address, 10_000)
            assert await b.call("mempool.get") == []
            await a.call("devnet.settle")
            assert await b.call("mempool.get") == [txid]
        finally:
            await a.close()
            await b.close()


async def test_partition_then_heal_converges_on_the_longest_chain() -> None:
    async with Devnet(config(nodes=2)) as net:
        a, b = await connect(net, 0), await connect(net, 1)
        try:
            coin = await fund(a, ALICE, 40_000)
            await a.call("devnet.fault", "partition", True, 1)
            to_bob = pay(coin, BOB.locking_bytecode)
            to_alice = spend([coin], [TxOutput(coin.value - 900, ALICE.locking_bytecode)])
            await a.call("blockchain.transaction.broadcast", to_bob.hex())
            await b.call("blockchain.transaction.broadcast", to_alice.hex())
            assert await b.call("mempool.get") == [to_alice.txid_hex]
            await a.call("devnet.mine", 1, None, None, 0, 0)
            await b.call("devnet.mine", 2)
            assert (await a.call("devnet.info"))["nodes"][1]["faults"]["partitioned"] is True
            tip_b = await b.call("blockchain.headers.get_tip")
            assert await a.call("blockchain.headers.get_tip") != tip_b

            await a.call("devnet.fault", "partition", False, 1)
            assert await a.call("blockchain.headers.get_tip") == tip_b
            assert await tx_height(a, to_bob.txid_hex) is None
            height = await a.call("blockchain.transaction.get_height", to_alice.txid_hex)
            assert height == tip_b["height"] - 1
            assert await a.call("mempool.get") == []
        finally:
            await a.close()
            await b.close()


async def test_block_with_a_double_spend_evicts_the_mempool_conflict() -> None:
    async with Devnet(config(nodes=2)) as net:
        a, b = await connect(net, 0), await connect(net, 1)
        try:
            coin = await fund(a, ALICE, 40_000)
            victim = pay(coin, BOB.locking_bytecode)
            await a.call("blockchain.transaction.broadcast", victim.hex())
            thief = spend([coin], [TxOutput(coin.value - 2_000, ALICE.locking_bytecode)])
            mined = await b.call("devnet.mine", 1, None, [thief.hex()])
            for client in (a, b):
                assert await client.call("mempool.get") == []
                assert await tx_height(client, victim.txid_hex) is None
                assert (
                    await client.call("blockchain.transaction.get_height", thief.txid_hex)
                    == mined["height"]
                )
        finally:
            await a.close()
            await b.close()
