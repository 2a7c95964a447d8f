"""JSON-RPC framing, negotiation and error codes, over TCP and WebSocket."""

from __future__ import annotations

import json

import pytest

from devnet.service import Devnet
from tests.devnet.client import Client, ServerError
from tests.devnet.conftest import config, connect
from tests.devnet.helpers import double_sha


async def test_parse_error(client: Client) -> None:
    msg = await client.raw('{"jsonrpc": "2.0", "id": 1, "method": ')
    assert msg["error"]["code"] == -32700
    assert msg["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "id": 1.5, "method": "server.ping", "params": []},
        {"jsonrpc": "2.0", "id": 2.0, "method": "server.ping", "params": []},
        {"jsonrpc": "2.0", "id": True, "method": "server.ping", "params": []},
        {"jsonrpc": "2.0", "id": [1], "method": "server.ping", "params": []},
        {"jsonrpc": "2.0", "id": 7, "params": []},
        {"jsonrpc": "2.0", "id": 7, "method": "server.ping", "params": "x"},
        "just a string",
        [],
    ],
)
async def test_invalid_requests(client: Client, body: object) -> None:
    msg = await client.raw(json.dumps(body))
    assert msg["error"]["code"] == -32600


async def test_unknown_method(client: Client) -> None:
    with pytest.raises(ServerError) as err:
        await client.call("blockchain.no_such_thing")
    assert err.value.code == -32601


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("blockchain.block.header", []),
        ("blockchain.block.header", ["1"]),
        ("blockchain.block.header", [1, 0, 5]),
        ("blockchain.scripthash.get_history", ["zz"]),
        ("blockchain.scripthash.listunspent", ["00" * 32, "all_the_tokens"]),
        ("blockchain.transaction.get", [123]),
        ("blockchain.transaction.get", ["00" * 32, "yes"]),
        ("blockchain.utxo.get_info", ["00" * 32, -1]),
    ],
)
async def test_bad_params(client: Client, method: str, params: list[object]) -> None:
    with pytest.raises(ServerError) as err:
        await client.call(method, *params)
    assert err.value.code == -32602


async def test_named_params(client: Client) -> None:
    msg = await client.raw(
        json.dumps({"jsonrpc": "2.0", "id": "n", "method": "blockchain.block.header", "params": {}})
    )
    assert msg["error"]["code"] == -32602
    named = {"jsonrpc": "2.0", "id": 99, "method": "blockchain.block.header", "params": {}}
    named["params"] = {"height": 0}
    msg = await client.raw(json.dumps(named))
    assert msg["result"] == await client.call("blockchain.block.header", 0)


async def test_second_server_version_is_an_error(client: Client) -> None:
    with pytest.raises(ServerError) as err:
        await client.call("server.version", "again", ["1.4", "1.6"])
    assert err.value.code == 1


@pytest.mark.parametrize(
    ("versions", "expected"),
    [(["1.4", "1.6"], "1.6"), (["1.4", "1.5"], "1.5"), ("1.4", "1.4"), (["1.5", "2.0"], "1.6")],
)
async def test_version_negotiation(devnet: Devnet, versions: object, expected: str) -> None:
    c = await connect(devnet, versions=None)
    try:
        software, protocol = await c.call("server.version", "t", versions)
        assert protocol == expected
        assert isinstance(software, str)
    finally:
        await c.close()


async def test_unsupported_version(devnet: Devnet) -> None:
    c = await connect(devnet, versions=None)
    try:
        with pytest.raises(ServerError) as err:
            await c.call("server.version", "t", ["1.0", "1.2"])
        assert err.value.code == 1
    finally:
        await c.close()


async def test_batch(client: Client) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "server.ping", "params": []},
        {"jsonrpc": "2.0", "method": "server.ping", "params": []},  # notification: no answer
        {"jsonrpc": "2.0", "id": 3, "method": "blockchain.block.header", "params": [0]},
        {"jsonrpc": "2.0", "id": 4, "method": "nope", "params": []},
        {"jsonrpc": "2.0", "id": 5.5, "method": "server.ping", "params": []},
    ]
    replies = await client.raw(json.dumps(batch))
    assert isinstance(replies, list)
    assert len(replies) == 4
    by_id = {r["id"]: r for r in replies}
    assert by_id["a"]["result"] is None
    assert len(by_id[3]["result"]) == 160
    assert by_id[4]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32600


async def test_client_notification_gets_no_answer(client: Client) -> None:
    await client.send_text(json.dumps({"jsonrpc": "2.0", "method": "server.ping"}))
    assert await client.call("server.ping") is None
    assert client.other.empty()


async def test_websocket_frame_with_trailing_newline(devnet: Devnet) -> None:
    c = await connect(devnet, transport="ws")
    try:
        await c.send_text(
            json.dumps({"jsonrpc": "2.0", "id": "nl", "method": "server.ping"}) + "\n"
        )
        assert await c.other.get() == {"jsonrpc": "2.0", "id": "nl", "result": None}
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "server.ping"}]
        assert await c.raw(json.dumps(batch) + "\n") == [
            {"jsonrpc": "2.0", "id": 1, "result": None}
        ]
    finally:
        await c.close()


async def test_features_and_simple_methods(client: Client) -> None:
    features = await client.call("server.features")
    genesis_header = bytes.fromhex(await client.call("blockchain.block.header", 0))
    assert features["genesis_hash"] == double_sha(genesis_header)[::-1].hex()
    assert features["hash_function"] == "sha256"
    assert features["protocol_min"] == "1.4"
    assert features["protocol_max"] == "1.6"
    assert await client.call("server.ping") is None
    assert await client.call("blockchain.relayfee") == pytest.approx(0.00001)
    info = await client.call("mempool.get_info")
    assert info["minrelaytxfee"] == pytest.approx(0.00001)
    assert await client.call("blockchain.transaction.dsproof.subscribe", "11" * 32) is None


async def test_rostrum_extensions_can_be_disabled() -> None:
    async with Devnet(config(rostrum=False)) as net:
        c = await connect(net)
        try:
            for method, params in [
                ("blockchain.block.get", [1]),
                ("mempool.get", []),
                ("mempool.count", []),
            ]:
                with pytest.raises(ServerError) as err:
                    await c.call(method, *params)
                assert err.value.code == -32601
            # the Fulcrum way still works
            assert len(await c.call("blockchain.transaction.id_from_pos", 1, 0)) == 64
        finally:
            await c.close()


async def test_control_methods_can_be_disabled() -> None:
    async with Devnet(config(control=False, premine=0)) as net:
        c = await connect(net)
        try:
            with pytest.raises(ServerError) as err:
                await c.call("devnet.mine", 1)
            assert err.value.code == -32601
        finally:
            await c.close()
