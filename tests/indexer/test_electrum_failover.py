"""Reconnection and failover over real sockets: a dropped connection, the first of three servers
going down mid-sync, health ordering, subscriptions renewed on the new connection, backoff."""

from __future__ import annotations

import asyncio
import time

import pytest

from bch.wallet import Wallet
from devnet.service import Devnet
from indexer.electrum import (
    ElectrumConnection,
    ElectrumConnectionError,
    HeaderNotice,
    ServerAddress,
    scripthash,
)
from tests.indexer.electrum_servers import (
    RecordingProxy,
    client,
    connected,
    eventually,
    running_devnet,
    set_down,
    tcp_url,
)

DAVE = Wallet.from_seed("electrum failover dave")


def addr(net: Devnet, node: int) -> ServerAddress:
    return ServerAddress.parse(tcp_url(net, node))


async def test_reconnect_after_a_drop_negotiates_once_per_connection() -> None:
    async with (
        running_devnet() as net,
        RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
    ):
        async with client([proxy.url]) as c:
            connections: list[ElectrumConnection] = []
            c.add_connect_listener(connections.append)
            await c.get_tip()
            for _ in range(2):
                net.nodes[0].set_faults(drop=1)
                assert await c.get_tip() == (110, net.nodes[0].chain.tip.header_bytes)
            assert c.health[c.servers[0]].failures == 2
            await eventually(lambda: len(connections) == 2)  # each reconnection is announced
            assert connections[0] is not connections[1]
            assert connections[0].closed and not connections[1].closed
        assert len(proxy.sessions) == 3
        for session in range(3):
            methods = proxy.methods(session)
            assert methods[0] == "server.version"
            assert methods.count("server.version") == 1


async def test_first_of_three_goes_down_mid_sync() -> None:
    async with running_devnet(nodes=3) as net:
        chain = net.nodes[0].chain
        urls = [tcp_url(net, k) for k in range(3)]
        async with connected(urls) as c:
            assert c.current_server == addr(net, 0)
            synced: list[list[bytes]] = []
            for height in range(111):
                if height == 40:
                    await set_down(net, 0, True)
                synced.append(await c.get_block_transactions(height))
            want = [[tx.to_bytes() for tx in b.txs] for b in chain.blocks]
            assert synced == [want[0][1:], *want[1:]]  # the genesis coinbase is never served
            assert c.current_server == addr(net, 1)
            assert c.health[addr(net, 0)].failures >= 1
            assert c.ranking()[-1] == addr(net, 0)


async def test_health_orders_the_servers() -> None:
    async with running_devnet(nodes=3) as net:
        net.nodes[0].set_faults(slow=0.15)
        await set_down(net, 1, True)
        c = client([tcp_url(net, k) for k in range(3)])
        await c.start()
        try:
            assert c.ranking() == [addr(net, 2), addr(net, 0), addr(net, 1)]
            assert c.current_server == addr(net, 2)
            status = c.status()
            assert [s["server"] for s in status] == [a.url for a in c.ranking()]
            assert status[0]["active"] is True and status[2]["failures"] == 1
            await set_down(net, 1, False)
            await set_down(net, 2, True)  # the best one fails: the slow one beats the failed one
            assert (await c.get_tip())[0] == 110
            assert c.current_server == addr(net, 0)
        finally:
            await c.close()


async def test_timeouts_move_to_another_server() -> None:
    async with (
        running_devnet(nodes=2) as net,
        connected([tcp_url(net, 0), tcp_url(net, 1)], timeout=0.2, max_timeouts=1) as c,
    ):
        assert c.current_server == addr(net, 0)
        net.nodes[0].set_faults(slow=1.0)
        assert (await c.get_tip())[0] == 110
        assert c.current_server == addr(net, 1)
        assert c.health[addr(net, 0)].timeouts == 1
        assert c.ranking()[0] == addr(net, 1)


async def test_subscriptions_follow_the_failover() -> None:
    async with running_devnet(nodes=2) as net:
        sh = scripthash(DAVE.locking_bytecode)
        tips: list[HeaderNotice] = []
        statuses: list[str | None] = []
        async with connected([tcp_url(net, 0), tcp_url(net, 1)]) as c:
            await c.subscribe_headers(tips.append)
            await c.subscribe_scripthash(sh, lambda _, status: statuses.append(status))
            await set_down(net, 0, True)
            # Nobody calls the client: it reconnects by itself because of the subscriptions.
            await eventually(lambda: c.current_server == addr(net, 1))
            net.nodes[1].mine(1)
            await eventually(lambda: len(tips) == 1)
            assert tips[0] == HeaderNotice(111, net.nodes[1].chain.tip.header_bytes)
            await net.network.faucet(net.nodes[1], DAVE.locking_bytecode, 7_000)
            await eventually(lambda: len(statuses) == 1)
            assert statuses[0] is not None


async def test_what_changed_while_disconnected_is_delivered() -> None:
    async with running_devnet() as net:
        sh = scripthash(DAVE.locking_bytecode)
        tips: list[int] = []
        statuses: list[str | None] = []
        async with (
            RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
            client([proxy.url], give_up_after=None) as c,
        ):
            await c.subscribe_headers(lambda tip: tips.append(tip.height))
            await c.subscribe_scripthash(sh, lambda _, status: statuses.append(status))
            await set_down(net, 0, True)
            await eventually(lambda: c.current_server is None)
            net.nodes[0].mine(2)
            await net.network.faucet(net.nodes[0], DAVE.locking_bytecode, 7_000)
            await asyncio.sleep(0.1)  # a few failed reconnection attempts
            assert tips == [] and statuses == []
            await set_down(net, 0, False)
            await eventually(lambda: tips == [112] and len(statuses) == 1)
            renewed = proxy.methods(len(proxy.sessions) - 1)
            assert renewed[0] == "server.version"
            assert "blockchain.headers.subscribe" in renewed
            assert "blockchain.scripthash.subscribe" in renewed
            net.nodes[0].mine(1)
            await eventually(lambda: tips == [112, 113])


async def test_backoff_then_give_up_then_recover() -> None:
    async with running_devnet() as net:
        await set_down(net, 0, True)
        c = client([tcp_url(net)], give_up_after=0.3)
        try:
            started = time.monotonic()
            with pytest.raises(ElectrumConnectionError, match="no Electrum server reachable"):
                await c.get_tip()
            assert time.monotonic() - started < 2
            failures = c.health[c.servers[0]].failures
            assert failures >= 3  # retried, spaced by the backoff, until the deadline
            await set_down(net, 0, False)
            assert (await c.get_tip())[0] == 110
            assert c.health[c.servers[0]].consecutive_failures == 0
        finally:
            await c.close()
        with pytest.raises(ElectrumConnectionError, match="closed"):
            await c.get_tip()
