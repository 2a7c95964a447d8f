"""One connection, against the devnet (through a recording proxy where the client's side of the
exchange matters) or a scripted server for misbehaviour: negotiation, ids, batches, timeouts,
notifications, errors, keep-alive."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from indexer.electrum import (
    ElectrumConnection,
    ElectrumConnectionError,
    ElectrumError,
    ElectrumTimeout,
)
from indexer.electrum.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from tests.indexer.electrum_servers import (
    RecordingProxy,
    ScriptedPeer,
    ScriptedServer,
    eventually,
    running_devnet,
    tcp_url,
)


async def test_version_is_the_first_and_only_version_call() -> None:
    async with (
        running_devnet() as net,
        RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
    ):
        conn = await ElectrumConnection.open(proxy.url, client_name="ladle-test")
        try:
            assert conn.protocol == (1, 6) and conn.protocol_version == "1.6"
            assert conn.server_software == "ladle-devnet 0.1"
            with pytest.raises(ValueError):
                await conn.request("server.version", "again", ["1.5", "1.6"])
            with pytest.raises(ValueError):
                await conn.batch([("server.ping", []), ("server.version", [])])
            await conn.request("server.ping")
            await conn.batch([("blockchain.block.header", [h]) for h in range(5)])
            await conn.request("blockchain.headers.get_tip")
        finally:
            await conn.close()
    calls = proxy.calls(0)
    assert calls[0]["method"] == "server.version"
    assert calls[0]["params"] == ["ladle-test", ["1.5", "1.6"]]
    assert [c["method"] for c in calls].count("server.version") == 1
    ids = [c["id"] for c in calls]
    assert all(type(i) is int for i in ids)  # never floats (nor bools)
    assert len(set(ids)) == len(ids)
    assert all(c["jsonrpc"] == "2.0" and isinstance(c["params"], list) for c in calls)


@pytest.mark.parametrize("protocol", ["1.4", "1.7", "one.five"])
async def test_a_protocol_outside_1_5_to_1_6_is_refused(protocol: str) -> None:
    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        await peer.reply(request, None)

    async with ScriptedServer.running(handler, protocol=protocol) as server:
        with pytest.raises(ElectrumConnectionError, match="protocol"):
            await ElectrumConnection.open(server.url)


async def test_version_refused_by_the_server() -> None:
    async with running_devnet() as net:
        with pytest.raises(ElectrumConnectionError, match=r"server\.version refused"):
            await ElectrumConnection.open(tcp_url(net), versions=("1.7", "1.8"))


async def test_batches_match_single_requests_and_are_chunked() -> None:
    calls: list[tuple[str, list[Any]]] = [("blockchain.block.header", [h]) for h in range(6)] + [
        ("blockchain.transaction.id_from_pos", [1, 5]),  # past the end: an error in place
        ("no.such.method", []),
    ]
    async with (
        running_devnet() as net,
        RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
    ):
        conn = await ElectrumConnection.open(proxy.url, max_batch=3)
        try:
            results = await conn.batch(calls)
            singles: list[Any] = []
            for method, params in calls:
                try:
                    singles.append(await conn.request(method, *params))
                except ElectrumError as exc:
                    singles.append(exc)
            assert await conn.batch([]) == []
        finally:
            await conn.close()
    assert results[:6] == singles[:6]
    assert results[:6] == [b.header_bytes.hex() for b in net.nodes[0].chain.blocks[:6]]
    for got, single in zip(results[6:], singles[6:], strict=True):
        assert isinstance(got, ElectrumError) and isinstance(single, ElectrumError)
        assert (got.code, got.message) == (single.code, single.message)
    assert results[7].code == METHOD_NOT_FOUND
    sizes = [len(m) for m in proxy.sessions[0] if isinstance(m, list)]
    assert sizes == [3, 3, 2]


async def test_errors_carry_code_and_message_unchanged() -> None:
    odd = "the transaction was rejected by network rules.\n\ntxn-mempool-conflict\n ✓"

    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        await peer.error(request, 1, odd)

    async with ScriptedServer.running(handler) as server:
        conn = await ElectrumConnection.open(server.url)
        with pytest.raises(ElectrumError) as err:
            await conn.request("blockchain.transaction.broadcast", "00")
        await conn.close()
    assert (err.value.code, err.value.message) == (1, odd)
    assert err.value.method == "blockchain.transaction.broadcast"

    async with running_devnet() as net:
        conn = await ElectrumConnection.open(tcp_url(net))
        try:
            with pytest.raises(ElectrumError) as err:
                await conn.request("blockchain.block.header", "ten")
            assert err.value.code == INVALID_PARAMS
            with pytest.raises(ElectrumError) as err:
                await conn.request("blockchain.transaction.broadcast", "00")
            assert err.value.code == 1
            assert err.value.message == (
                "the transaction was rejected by network rules.\n\nTX decode failed\n"
            )
        finally:
            await conn.close()


async def test_timeout_then_late_answer_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    async with running_devnet() as net:
        conn = await ElectrumConnection.open(tcp_url(net))
        try:
            net.nodes[0].set_faults(slow=0.3)
            with pytest.raises(ElectrumTimeout, match="get_tip"):
                await conn.request("blockchain.headers.get_tip", timeout=0.05)
            with pytest.raises(ElectrumTimeout):
                await conn.batch([("server.ping", [])] * 3, timeout=0.05)
            with caplog.at_level(logging.WARNING, "indexer.electrum.connection"):
                await eventually(lambda: conn.late_responses == 4)
            assert "unknown id" not in caplog.text  # expected answers, not a server fault
            net.nodes[0].clear_faults()
            assert not conn.closed
            assert (await conn.request("blockchain.headers.get_tip"))["height"] == 110
        finally:
            await conn.close()


async def test_unknown_ids_notifications_and_array_replies() -> None:
    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        await peer.send({"jsonrpc": "2.0", "id": 9999, "result": "stray"})
        await peer.send({"jsonrpc": "2.0", "id": True, "result": "bool id"})
        await peer.send(
            {"jsonrpc": "2.0", "method": "blockchain.headers.subscribe", "params": [{"h": 1}]}
        )
        await peer.send([{"jsonrpc": "2.0", "id": request["id"], "result": "mine"}])

    notes: list[tuple[str, list[Any]]] = []
    async with ScriptedServer.running(handler) as server:
        conn = await ElectrumConnection.open(
            server.url, on_notification=lambda m, p: notes.append((m, p))
        )
        assert await conn.request("anything") == "mine"
        await conn.close()
    assert notes == [("blockchain.headers.subscribe", [{"h": 1}])]


async def test_stray_ids_are_warned_about_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        for stray in range(5000, 5050):
            await peer.send({"jsonrpc": "2.0", "id": stray, "result": "stray"})
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": "mine"})

    async with ScriptedServer.running(handler) as server:
        conn = await ElectrumConnection.open(server.url)
        with caplog.at_level(logging.WARNING, "indexer.electrum.connection"):
            assert await conn.request("anything") == "mine"
            assert await conn.request("anything") == "mine"
        await conn.close()
    warnings = [r.getMessage() for r in caplog.records if "unknown ids" in r.getMessage()]
    assert len(warnings) == 1 and "dropped 1 response(s)" in warnings[0]


async def test_garbage_closes_the_connection() -> None:
    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        await peer.send_raw(b"this is not json")

    async with ScriptedServer.running(handler) as server:
        conn = await ElectrumConnection.open(server.url)
        with pytest.raises(ElectrumConnectionError, match="not JSON"):
            await conn.request("anything")
        await asyncio.wait_for(conn.wait_closed(), 2)
        with pytest.raises(ElectrumConnectionError):
            await conn.request("anything")


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_server_drops_connection_mid_request(transport: str) -> None:
    async with running_devnet() as net:
        port = net.servers[0].tcp_port if transport == "tcp" else net.servers[0].ws_port
        conn = await ElectrumConnection.open(f"{transport}://127.0.0.1:{port}")
        net.nodes[0].set_faults(drop=1)
        with pytest.raises(ElectrumConnectionError):
            await conn.request("blockchain.headers.get_tip")
        await asyncio.wait_for(conn.wait_closed(), 2)
        assert conn.closed
        await conn.close()


async def test_close_fails_requests_in_flight() -> None:
    async with running_devnet() as net:
        conn = await ElectrumConnection.open(tcp_url(net))
        net.nodes[0].set_faults(slow=5)
        pending = asyncio.create_task(conn.request("server.ping"))
        await asyncio.sleep(0.05)
        await conn.close()
        with pytest.raises(ElectrumConnectionError, match="closed by client"):
            await pending


async def test_keepalive_pings_when_idle() -> None:
    async with (
        running_devnet() as net,
        RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
    ):
        conn = await ElectrumConnection.open(proxy.url, ping_interval=0.05)
        await eventually(lambda: proxy.methods(0).count("server.ping") >= 3)
        assert not conn.closed
        await conn.close()
    assert proxy.methods(0)[0] == "server.version"


async def test_keepalive_without_answer_closes_the_connection() -> None:
    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        return  # never answers

    async with ScriptedServer.running(handler) as server:
        conn = await ElectrumConnection.open(server.url, ping_interval=0.05, timeout=0.1)
        await asyncio.wait_for(conn.wait_closed(), 2)
        assert conn.close_reason is not None
        assert "keep-alive" in str(conn.close_reason)
        assert [r["method"] for r in server.peers[0].received] == ["server.version", "server.ping"]
