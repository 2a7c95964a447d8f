"""BCHN as a broadcast target beside Fulcrum: `sendrawtransaction`, dry runs by the node's own
`testmempoolaccept`, its reject reasons normalised (raw text kept), re-checks by
`getmempoolentry` / `getrawtransaction`, a node-only service, and a login by cookie file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bch.wallet import Wallet
from broadcast.app import create_app
from broadcast.bitcoind import BitcoindTarget
from broadcast.config import BroadcastConfig, NodeConfig
from broadcast.service import BroadcastService
from broadcast.verdicts import Outcome, Reason
from tests.realnode.cauldron import Coin
from tests.realnode.coins import fund, pay
from tests.realnode.nodes import RPC_PASSWORD, RPC_USER, Bitcoind, RealNodes, find_binaries

CAROL = Wallet.from_seed("ladle real-node tier carol", prefix="bchreg")
DAVE = Wallet.from_seed("ladle real-node tier dave", prefix="bchreg")


def rpc_url(nodes: RealNodes) -> str:
    return f"http://{RPC_USER}:{RPC_PASSWORD}@127.0.0.1:{nodes.bitcoind.rpc_port}"


def public_rpc_url(nodes: RealNodes) -> str:
    return f"http://127.0.0.1:{nodes.bitcoind.rpc_port}"


@pytest.fixture(scope="module")
def coins(nodes: RealNodes) -> list[Coin]:
    return fund(nodes, CAROL, 6, 1_000_000)


def config(nodes: list[NodeConfig], tmp_path: Path) -> BroadcastConfig:
    return BroadcastConfig(
        tuple(nodes),
        db_path=str(tmp_path / "records.sqlite"),
        recheck_interval=3600.0,
        verify_scripts=False,
        missing_inputs_retry=None,
        reconnect_backoff=0.05,
    )


@pytest.fixture
async def both(nodes: RealNodes, tmp_path: Path) -> AsyncIterator[BroadcastService]:
    """The service in front of Fulcrum and of the node's RPC."""
    targets = [NodeConfig(nodes.electrum_url), NodeConfig(rpc_url(nodes))]
    async with BroadcastService(config(targets, tmp_path)) as service:
        yield service


async def post(service: BroadcastService, body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(service, manage=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://broadcast") as http:
        return await http.post("/broadcast", json=body)


def in_mempool(nodes: RealNodes, txid: str) -> bool:
    return txid in nodes.bitcoind.rpc("getrawmempool")


async def test_the_node_is_named_without_its_password(
    nodes: RealNodes, both: BroadcastService, coins: list[Coin]
) -> None:
    tx = pay(CAROL, coins[0], DAVE)
    response = await post(both, {"tx": tx.hex()})
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["nodes_reached"]) == ("accepted", 2)
    record = await both.status(tx.txid_hex)
    names = [n["node"] for n in record["nodes"]]
    assert names == [nodes.electrum_url, public_rpc_url(nodes)]
    assert RPC_PASSWORD not in str(record)


async def test_dry_runs_take_the_nodes_verdict(
    nodes: RealNodes, both: BroadcastService, coins: list[Coin]
) -> None:
    fresh = pay(CAROL, coins[1], DAVE)
    valid = (await post(both, {"tx": fresh.hex(), "dry_run": True})).json()["validation"]
    assert (valid["status"], valid["checks"]["node"]) == ("valid", "passed"), valid
    assert valid["node"] == {"node": public_rpc_url(nodes), "allowed": True, "reject_reason": None}
    assert not in_mempool(nodes, fresh.txid_hex)  # a dry run sends nothing

    sent = pay(CAROL, coins[2], DAVE)
    assert (await post(both, {"tx": sent.hex()})).status_code == 200
    again = (await post(both, {"tx": sent.hex(), "dry_run": True})).json()["validation"]
    assert again["status"] == "valid", again
    assert again["node"]["reject_reason"] == "18: txn-already-in-mempool"

    double = pay(CAROL, coins[2], DAVE, fee=2_000)
    refused = (await post(both, {"tx": double.hex(), "dry_run": True})).json()["validation"]
    assert (refused["status"], refused["reason"]) == ("rejected", "conflict"), refused
    assert refused["node"]["reject_reason"] == "18: txn-mempool-conflict"  # BCHN's, verbatim

    dust = pay(CAROL, coins[3], DAVE, fee=coins[3].output.value - 100)
    low = (await post(both, {"tx": dust.hex(), "dry_run": True})).json()["validation"]
    assert (low["status"], low["reason"]) == ("rejected", "nonstandard"), low
    assert low["node"]["reject_reason"] == "64: dust"


async def test_a_double_spend_is_refused_in_each_nodes_words(
    nodes: RealNodes, both: BroadcastService, coins: list[Coin]
) -> None:
    first = pay(CAROL, coins[4], DAVE)
    assert (await post(both, {"tx": first.hex()})).status_code == 200
    double = pay(CAROL, coins[4], DAVE, fee=3_000)
    response = await post(both, {"tx": double.hex()})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["details"]["reason"]) == ("REJECTED", "conflict")
    raw = {r["node"]: r["message"] for r in error["details"]["rejections"]}
    assert raw[public_rpc_url(nodes)] == "txn-mempool-conflict (code 18)"  # the RPC's -26
    assert raw[nodes.electrum_url] == (  # Fulcrum's wrapper (code 1) around BCHN's words
        "the transaction was rejected by network rules.\n\ntxn-mempool-conflict (code 18)\n"
    )


async def test_node_only_service_with_a_cookie_file_follows_the_confirmation(
    nodes: RealNodes, coins: list[Coin], tmp_path: Path
) -> None:
    """No Electrum server: protection and dry runs read the node (gettxout,
    getrawtransaction); the login comes from a cookie file; a re-check finds the block."""
    cookie = tmp_path / ".cookie"
    cookie.write_text(f"{RPC_USER}:{RPC_PASSWORD}")
    target = NodeConfig(public_rpc_url(nodes), cookie=str(cookie))
    async with BroadcastService(config([target], tmp_path)) as service:
        tx = pay(CAROL, coins[5], DAVE)
        body = {"tx": tx.hex(), "protection": {"max_fee_per_byte": 10}}
        dry = (await post(service, {**body, "dry_run": True})).json()["validation"]
        assert (dry["status"], dry["fee"], dry["checks"]["inputs"]) == ("valid", 1_000, "passed")
        assert (await post(service, body)).json()["status"] == "accepted"
        assert in_mempool(nodes, tx.txid_hex)
        nodes.mine(1)
        await service.recheck()
        record = await service.status(tx.txid_hex)
        assert record["block_height"] == nodes.bitcoind.rpc("getblockcount")
        assert record["confirmations"] == 1
        # /health: the node's tip, asked of it (a node has no header subscription).
        tip = nodes.bitcoind.rpc("getblockcount")
        health = service.health()
        for _ in range(50):
            if health["best_height"] == tip:
                break
            await asyncio.sleep(0.1)
            health = service.health()
        assert (health["status"], health["connected"], health["best_height"]) == ("ok", 1, tip)
        assert health["nodes"] == [
            {"name": target.name, "connected": True, "height": tip, "lag_blocks": 0}
        ]
        greedy = pay(CAROL, coins[5], DAVE, fee=500_000)
        response = await post(service, {"tx": greedy.hex(), "protection": {"max_fee_per_byte": 10}})
        assert response.json()["error"]["code"] == "PROTECTION_REJECTED", response.text
        spent = (await post(service, {"tx": greedy.hex(), "dry_run": True})).json()["validation"]
        assert (spent["reason"], spent["node"]["reject_reason"]) == (
            "missing_inputs",
            "missing-inputs",
        ), spent


async def test_a_connection_the_node_closed_when_idle_is_opened_again(
    nodes: RealNodes, tmp_path: Path
) -> None:
    """BCHN closes a keep-alive connection idle for -rpcservertimeout (30 s by default; 1 s
    here), and the client finds out only when its next request fails: the broadcast after a
    quiet spell must still reach the node."""
    binaries, _ = find_binaries()
    assert binaries is not None  # the session fixture found them
    quiet = Bitcoind(binaries.bitcoind, tmp_path / "quiet")
    quiet.datadir.mkdir(parents=True)
    (quiet.datadir / "bitcoin.conf").write_text("rpcservertimeout=1\n")
    quiet.start()
    url = f"http://{RPC_USER}:{RPC_PASSWORD}@127.0.0.1:{quiet.rpc_port}"
    target = BitcoindTarget(NodeConfig(url))
    try:
        assert await target.connect()
        await asyncio.sleep(2)  # past the node's idle limit: it has closed the connection
        verdict = await target.send("00", "00" * 32)
        assert (verdict.outcome, verdict.reason) == (Outcome.REJECTED, Reason.MALFORMED), verdict
        assert verdict.message == "TX decode failed"
    finally:
        await target.close()
        quiet.stop()
