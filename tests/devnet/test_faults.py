"""Injected faults, observed from the outside: down, slow, reject, drop."""

from __future__ import annotations

import asyncio
import time

import pytest
from websockets.asyncio.client import connect as ws_connect

from bch.wallet import Wallet
from devnet.service import Devnet
from tests.devnet.client import ServerError
from tests.devnet.conftest import config, connect
from tests.devnet.helpers import fund, pay

ALICE = Wallet.from_seed("fault alice")


async def test_down_refuses_connections_until_cleared() -> None:
    async with Devnet(config(nodes=2)) as net:
        control = await connect(net, 0)
        victim = await connect(net, 1)
        port, ws_port = net.servers[1].tcp_port, net.servers[1].ws_port
        try:
            await control.call("devnet.fault", "down", True, 1)
            await asyncio.wait_for(victim.closed.wait(), 5)  # existing connection closed
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", port)
            with pytest.raises(OSError):
                await ws_connect(f"ws://127.0.0.1:{ws_port}")
            await control.call("devnet.clear_faults", 1)
            again = await connect(net, 1)
            assert (net.servers[1].tcp_port, net.servers[1].ws_port) == (port, ws_port)
            assert await again.call("server.ping") is None
            await again.close()
        finally:
            await control.close()
            await victim.close()


async def test_down_on_own_node_answers_then_closes(devnet: Devnet) -> None:
    c = await connect(devnet)
    faults = await c.call("devnet.fault", "down", True)
    assert faults["down"] is True
    await asyncio.wait_for(c.closed.wait(), 5)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", devnet.servers[0].tcp_port)
    devnet.nodes[0].clear_faults()  # the Python API does the same as the control method
    await asyncio.sleep(0.05)
    again = await connect(devnet)
    assert await again.call("server.ping") is None
    await again.close()


async def test_slow(devnet: Devnet) -> None:
    c = await connect(devnet)
    try:
        await c.call("devnet.fault", "slow", 0.3)
        started = time.monotonic()
        assert await c.call("server.ping") is None
        assert time.monotonic() - started >= 0.3
        await c.call("devnet.clear_faults")
        started = time.monotonic()
        await c.call("server.ping")
        assert time.monotonic() - started < 0.3
    finally:
        await c.close()


async def test_reject_everything(devnet: Devnet) -> None:
    c = await connect(devnet)
    try:
        coin = await fund(c, ALICE, 30_000)
        tx = pay(coin, ALICE.locking_bytecode)
        await c.call("devnet.fault", "reject", "txn-mempool-conflict")
        with pytest.raises(ServerError) as err:
            await c.call("blockchain.transaction.broadcast", tx.hex())
        assert err.value.code == 1
        assert err.value.message == (
            "the transaction was rejected by network rules.\n\ntxn-mempool-conflict\n"
        )
        await c.call("devnet.fault", "reject", True)
        with pytest.raises(ServerError) as err:
            await c.call("blockchain.transaction.broadcast", tx.hex())
        assert err.value.code == 1
        await c.call("devnet.fault", "reject", False)
        assert await c.call("blockchain.transaction.broadcast", tx.hex()) == tx.txid_hex
    finally:
        await c.close()


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_drop_connection_mid_request(devnet: Devnet, transport: str) -> None:
    c = await connect(devnet, transport=transport)
    coin = await fund(c, ALICE, 30_000)
    tx = pay(coin, ALICE.locking_bytecode)
    await c.call("devnet.fault", "drop", 1)
    with pytest.raises(ConnectionError):
        await c.call("blockchain.transaction.broadcast", tx.hex())
    assert c.closed.is_set()
    await c.close()
    again = await connect(devnet, transport=transport)  # only that one request was dropped
    try:
        # the broadcast took effect although its answer was lost
        assert await again.call("blockchain.transaction.get_height", tx.txid_hex) == 0
        await again.call("devnet.fault", "drop", True)
        with pytest.raises(ConnectionError):
            await again.call("server.ping")
    finally:
        await again.close()
    devnet.nodes[0].clear_faults()
    last = await connect(devnet, transport=transport)
    assert await last.call("server.ping") is None
    await last.close()
