"""Rostrum capability detection and the Fulcrum fallback: with the extensions disabled on the
devnet, blocks enumerate to exactly the same transactions as `blockchain.block.get` gives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bch.wallet import Wallet
from devnet.service import Devnet
from indexer.electrum import (
    BlockChanged,
    Capabilities,
    ElectrumConnectionError,
    ElectrumProtocolError,
    NotSupported,
)
from indexer.electrum.capabilities import FIRST_POSITIONS, RequestBudget
from indexer.electrum.errors import METHOD_NOT_FOUND
from tests.indexer.electrum_servers import (
    RecordingProxy,
    ScriptedPeer,
    ScriptedServer,
    client,
    running_devnet,
    tcp_url,
)

CAROL = Wallet.from_seed("electrum capabilities carol")


async def busy_chain(net: Devnet) -> None:
    """Blocks of 1, 2, 4 and FIRST_POSITIONS + 9 transactions on top of the premine."""
    node = net.nodes[0]
    for n in (0, 1, 3, FIRST_POSITIONS + 8):
        for i in range(n):
            await net.network.faucet(node, CAROL.locking_bytecode, 5_000 + i)
        node.mine(1)
    await net.network.settle()


def expected(net: Devnet, height: int) -> list[bytes]:
    """What any server yields: the genesis coinbase is never served (nodes refuse it)."""
    txs = [tx.to_bytes() for tx in net.nodes[0].chain.blocks[height].txs]
    return txs[1:] if height == 0 else txs


async def test_detection_and_rostrum_only_calls() -> None:
    async with running_devnet(nodes=2) as net:
        net.servers[1].rostrum = False
        genesis = net.nodes[0].chain.blocks[0].hash_hex
        chain = net.nodes[0].chain
        async with client([tcp_url(net, 0)]) as rostrum, client([tcp_url(net, 1)]) as fulcrum:
            assert await rostrum.capabilities() == Capabilities(True, True, genesis)
            assert (await rostrum.capabilities()).rostrum
            assert await fulcrum.capabilities() == Capabilities(False, False, genesis)
            assert await rostrum.get_block(5) == chain.blocks[5].raw
            assert await rostrum.get_block(chain.blocks[6].hash_hex) == chain.blocks[6].raw
            with pytest.raises(NotSupported):
                await fulcrum.get_block(5)
            with pytest.raises(NotSupported):
                await fulcrum.mempool_txids()
        async with client([tcp_url(net, 0)], extensions=False) as plain:
            assert await plain.capabilities() == Capabilities(False, False, genesis)
            with pytest.raises(NotSupported):
                await plain.get_block(5)


async def test_fallback_enumerates_every_block_identically() -> None:
    async with running_devnet(nodes=2) as net:
        await busy_chain(net)
        net.servers[1].rostrum = False
        tip = net.nodes[0].height
        assert len(net.nodes[0].chain.blocks[tip].txs) == FIRST_POSITIONS + 9
        assert net.nodes[1].chain.tip.hash == net.nodes[0].chain.tip.hash
        heights = [0, 1, 50, *range(tip - 4, tip + 1)]
        async with (
            RecordingProxy.running("127.0.0.1", net.servers[1].tcp_port) as proxy,
            client([tcp_url(net, 0)]) as rostrum,
            client([proxy.url]) as fulcrum,
            client([tcp_url(net, 0)], extensions=False, max_batch=7) as plain,
        ):
            for h in heights:
                want = expected(net, h)
                assert await rostrum.get_block_transactions(h) == want
                assert await fulcrum.get_block_transactions(h) == want
                assert await plain.get_block_transactions(h) == want
        methods = proxy.methods(0)
        assert "blockchain.transaction.id_from_pos" in methods
        assert methods.count("blockchain.block.get") == 1  # the probe, answered "not found"


async def test_a_block_no_longer_at_its_height_is_reported() -> None:
    async with running_devnet(nodes=2) as net:
        await busy_chain(net)
        net.servers[1].rostrum = False
        node = net.nodes[0]
        tip = node.height
        old = node.chain.blocks[tip - 1]
        async with client([tcp_url(net, 0)]) as rostrum, client([tcp_url(net, 1)]) as fulcrum:
            for c in (rostrum, fulcrum):
                got = await c.get_block_transactions(tip - 1, header=old.header_bytes)
                assert got == [tx.to_bytes() for tx in old.txs]
                with pytest.raises(BlockChanged):
                    await c.get_block_transactions(tip - 2, header=old.header_bytes)
            net.network.reorg(node, 2)
            await net.network.settle()
            assert node.chain.blocks[tip - 1].hash != old.hash
            for c in (rostrum, fulcrum):
                with pytest.raises(BlockChanged):
                    await c.get_block_transactions(tip - 1, header=old.header_bytes)
                assert await c.get_block_transactions(tip - 1) == expected(net, tip - 1)


async def test_a_block_that_does_not_match_its_merkle_root_is_refused() -> None:
    async with running_devnet() as net:
        await busy_chain(net)
        raw = bytearray(net.nodes[0].chain.tip.raw)
        raw[-1] ^= 1  # the last transaction's locktime: the header no longer commits to it

    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        if request["method"] == "blockchain.block.get":
            await peer.reply(request, raw.hex())
        elif request["method"] == "mempool.get":
            await peer.reply(request, [])
        else:
            await peer.error(request, METHOD_NOT_FOUND, "unknown method")

    async with ScriptedServer.running(handler) as server, client([server.url]) as c:
        assert (await c.capabilities()).rostrum
        with pytest.raises(ElectrumProtocolError, match="do not match"):
            await c.get_block_transactions(3)


async def test_a_server_on_another_chain_is_refused() -> None:
    async with running_devnet() as net:
        genesis = net.nodes[0].chain.blocks[0].hash_hex
        async with client([tcp_url(net)], genesis_hash=genesis.upper()) as c:
            assert (await c.get_tip())[0] == 110
        other = client([tcp_url(net)], genesis_hash="00" * 32, give_up_after=0.2)
        with pytest.raises(ElectrumConnectionError, match="no Electrum server reachable"):
            await other.get_tip()
        assert other.health[other.servers[0]].failures >= 1
        await other.close()


async def test_the_fallback_budget_queues_fetches_beyond_it() -> None:
    budget = RequestBudget(100)
    order: list[str] = []

    async def fetch(name: str, requests: int, hold: asyncio.Event) -> None:
        async with budget.take(requests):
            order.append(f"{name} in")
            await hold.wait()
        order.append(f"{name} out")

    first, second, third = asyncio.Event(), asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(fetch("a", 60, first))]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(fetch("b", 60, second)))  # 120 > 100: waits for a
    await asyncio.sleep(0)
    assert order == ["a in"] and budget.used == 60
    first.set()
    await asyncio.sleep(0.01)
    assert order == ["a in", "a out", "b in"]
    second.set()
    await asyncio.sleep(0.01)
    tasks.append(asyncio.create_task(fetch("big", 500, third)))  # beyond the limit: alone
    await asyncio.sleep(0.01)
    assert order[-1] == "big in" and budget.used == 500
    third.set()
    await asyncio.gather(*tasks)
    assert budget.used == 0
