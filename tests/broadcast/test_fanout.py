"""Fan-out against a real five-node devnet over loopback sockets: verdicts, the majority rule,
faults, re-checks, idempotency and restarts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from broadcast.request import BroadcastRequest
from broadcast.service import BroadcastService
from devnet.service import Devnet
from runtime.errors import ApiError
from tests.broadcast.helpers import ALICE, BOB, config_for, fund, outputs_of, pay


async def down(net: Devnet, *nodes: int, value: bool = True) -> None:
    for k in nodes:
        net.nodes[k].set_faults(down=value)
        await net.servers[k].apply_faults()
    if not value:
        await asyncio.sleep(0.1)  # past the service's reconnect backoff (0.02 s in the tests)


def node_has(net: Devnet, k: int, txid: str) -> bool:
    return net.nodes[k].find_tx(bytes.fromhex(txid)[::-1]) is not None


async def wait_for(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def settle(service: BroadcastService, txid: str) -> dict[str, Any]:
    """The status record once every node has answered."""
    await service.broadcaster.complete(txid)
    return await service.status(txid)


async def test_accepted_everywhere(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    answer = await service.broadcast(BroadcastRequest(tx.hex()))
    assert (answer["txid"], answer["status"], answer["nodes_total"]) == (tx.txid_hex, "accepted", 5)
    assert answer["nodes_reached"] >= 3  # the POST answers at the majority

    record = await settle(service, tx.txid_hex)
    assert all(node_has(net, k, tx.txid_hex) for k in range(5))
    assert (record["nodes_reached"], record["estimated_network_reach"]) == (5, 1.0)
    assert record["status"] == "accepted"
    assert record["rejections"] == []
    assert [n["state"] for n in record["nodes"]] == ["accepted"] * 5


async def test_rejected_everywhere_when_the_input_is_spent(
    net: Devnet, service: BroadcastService
) -> None:
    coin = await fund(net, ALICE, 50_000)
    first = pay(coin, BOB.locking_bytecode)
    await net.nodes[0].submit(first)
    net.nodes[0].mine(1)
    second = pay(coin, ALICE.locking_bytecode, fee=800)  # the same coin, already spent
    with pytest.raises(ApiError) as caught:
        await service.broadcast(BroadcastRequest(second.hex()))
    error = caught.value
    assert (error.status, error.code) == (422, "REJECTED")
    assert "details" in error.fields
    details = error.fields["details"]
    assert details["reason"] == "missing_inputs"
    assert len(details["rejections"]) == 5
    assert all("bad-txns-inputs-missingorspent" in r["message"] for r in details["rejections"])
    record = await settle(service, second.txid_hex)
    assert record["status"] == "rejected"
    assert record["nodes_reached"] == 0
    assert {r["reason"] for r in record["rejections"]} == {"missing_inputs"}


async def test_split_verdicts_majority_accepts(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 50_000)
    ours = pay(coin, BOB.locking_bytecode)
    theirs = pay(coin, ALICE.locking_bytecode, fee=900)
    net.nodes[4].set_faults(partitioned=True)
    await net.nodes[4].submit(theirs)  # node 4 saw the conflicting spend first
    weights = [1.0, 1.0, 1.0, 1.0, 4.0]
    async with BroadcastService(config_for(net, weights=weights)) as service:
        answer = await service.broadcast(BroadcastRequest(ours.hex()))
        assert answer["status"] == "accepted"
        record = await settle(service, ours.txid_hex)
    assert record["status"] == "accepted"
    assert record["nodes_reached"] == 4
    # the majority counts nodes; the reach weighs them: node 4 alone is half the weight
    assert record["estimated_network_reach"] == 0.5
    [rejection] = record["rejections"]
    assert rejection["node"] == record["nodes"][4]["node"]
    assert rejection["reason"] == "conflict"
    assert "txn-mempool-conflict" in rejection["message"]


async def test_split_verdicts_majority_rejects(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 50_000)
    ours = pay(coin, BOB.locking_bytecode)
    theirs = pay(coin, ALICE.locking_bytecode, fee=900)
    for k in (2, 3, 4):  # each isolated, each holding the other spend
        net.nodes[k].set_faults(partitioned=True)
        await net.nodes[k].submit(theirs)
    with pytest.raises(ApiError) as caught:
        await service.broadcast(BroadcastRequest(ours.hex()))
    assert caught.value.code == "REJECTED"
    assert "rejected by 3 of 5 nodes" in caught.value.message
    record = await settle(service, ours.txid_hex)
    assert record["status"] == "rejected"
    assert record["nodes_reached"] == 2
    assert [n["state"] for n in record["nodes"]] == ["accepted"] * 2 + ["rejected"] * 3


async def test_nodes_down_then_pending_then_resolved(
    net: Devnet, service: BroadcastService
) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    await down(net, 2, 3, 4)
    answer = await service.broadcast(BroadcastRequest(tx.hex()))
    # sent (two nodes hold it) but no majority: the POST says so, without an error
    assert (answer["status"], answer["nodes_reached"]) == ("pending", 2)
    record = await service.status(tx.txid_hex)
    assert record["status"] == "pending"
    assert record["rejections"] == []  # no verdict is not a refusal
    assert [n["state"] for n in record["nodes"]] == ["accepted"] * 2 + ["unknown"] * 3
    await down(net, 2, 3, 4, value=False)
    assert await service.recheck() == 1
    record = await service.status(tx.txid_hex)
    assert record["status"] == "accepted"
    assert record["nodes_reached"] == 5


async def test_every_node_down_fails_then_the_recheck_sends_it(
    net: Devnet, service: BroadcastService
) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    await down(net, 0, 1, 2, 3, 4)
    with pytest.raises(ApiError) as caught:
        await service.broadcast(BroadcastRequest(tx.hex()))
    assert (caught.value.status, caught.value.code) == (502, "BROADCAST_FAILED")
    assert (await service.status(tx.txid_hex))["status"] == "pending"
    assert not any(node_has(net, k, tx.txid_hex) for k in range(5))
    await down(net, 0, 1, 2, 3, 4, value=False)
    await service.recheck()  # nobody has it: it is sent again
    assert all(node_has(net, k, tx.txid_hex) for k in range(5))
    assert (await service.status(tx.txid_hex))["status"] == "accepted"


async def test_answers_before_the_slowest_node_and_records_it_later(net: Devnet) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    net.nodes[4].set_faults(slow=0.8)  # every answer, the version handshake included
    async with BroadcastService(config_for(net, timeout=5.0)) as service:
        started = time.monotonic()
        answer = await service.broadcast(BroadcastRequest(tx.hex()))
        assert time.monotonic() - started < 0.6
        assert (answer["status"], answer["nodes_reached"]) == ("accepted", 4)
        record = await service.status(tx.txid_hex)
        assert record["nodes"][4]["state"] == "outstanding"

        async def all_reached() -> bool:
            record = await service.status(tx.txid_hex)
            return bool(record["nodes_reached"] == 5)

        await wait_for(all_reached)
        assert (await service.status(tx.txid_hex))["nodes"][4]["elapsed_ms"] >= 1600


async def test_slow_nodes_time_out_then_resolve(net: Devnet) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    for k in (2, 3, 4):
        net.nodes[k].set_faults(slow=1.5)
    async with BroadcastService(config_for(net, timeout=0.3)) as service:
        started = time.monotonic()
        answer = await service.broadcast(BroadcastRequest(tx.hex()))
        assert time.monotonic() - started < 1.0  # bounded by each node's own timeout
        assert answer["status"] == "pending"
        record = await service.status(tx.txid_hex)
        assert record["rejections"] == []
        assert [n["message"] for n in record["nodes"][2:]] == ["no answer within 0.3s"] * 3
        for k in (2, 3, 4):
            net.nodes[k].set_faults(slow=0.0)
        await service.recheck()
        assert (await service.status(tx.txid_hex))["status"] == "accepted"


async def test_idempotent_repost(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    first = await service.broadcast(BroadcastRequest(tx.hex()))
    record = await settle(service, tx.txid_hex)
    again = await asyncio.gather(*(service.broadcast(BroadcastRequest(tx.hex())) for _ in range(3)))
    assert {a["txid"] for a in again} == {first["txid"]}
    assert {a["status"] for a in again} == {"accepted"}
    assert await service.status(tx.txid_hex) == record  # not sent again, same record
    assert await service.store.count() == 1
    # concurrent first posts share one fan-out and one record
    other = pay(await fund(net, BOB, 30_000), ALICE.locking_bytecode)
    answers = await asyncio.gather(
        *(service.broadcast(BroadcastRequest(other.hex())) for _ in range(4))
    )
    assert {(a["txid"], a["status"]) for a in answers} == {(other.txid_hex, "accepted")}
    assert await service.store.count() == 2


async def test_repost_when_no_node_got_it_sends_again(
    net: Devnet, service: BroadcastService
) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    await down(net, 0, 1, 2, 3, 4)
    with pytest.raises(ApiError):
        await service.broadcast(BroadcastRequest(tx.hex()))
    await down(net, 0, 1, 2, 3, 4, value=False)
    answer = await service.broadcast(BroadcastRequest(tx.hex()))
    assert answer["status"] == "accepted"
    assert await service.store.count() == 1


async def test_repost_after_a_rejection_tries_again(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 50_000)
    parent = pay(coin, ALICE.locking_bytecode)
    [output] = outputs_of(parent, ALICE)
    child = pay(output, BOB.locking_bytecode)
    with pytest.raises(ApiError):  # the parent is nowhere yet
        await service.broadcast(BroadcastRequest(child.hex()))
    assert (await settle(service, child.txid_hex))["status"] == "rejected"
    await service.broadcast(BroadcastRequest(parent.hex()))
    answer = await service.broadcast(BroadcastRequest(child.hex()))
    assert answer["status"] == "accepted"
    assert await service.store.count() == 2  # parent and child: no duplicate record


async def test_restart_keeps_the_records(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    config = config_for(net, tmp_path / "records.sqlite")
    async with BroadcastService(config) as service:
        await service.broadcast(BroadcastRequest(tx.hex()))
        before = await settle(service, tx.txid_hex)
    async with BroadcastService(config) as restarted:
        assert await restarted.status(tx.txid_hex) == before
        # and a re-post after the restart is still recognised
        answer = await restarted.broadcast(BroadcastRequest(tx.hex()))
        assert answer["status"] == "accepted"
        assert await restarted.store.count() == 1


async def test_records_expire(net: Devnet) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    now = [time.time()]
    service = BroadcastService(config_for(net, record_ttl=60.0), clock=lambda: now[0])
    async with service:
        await service.broadcast(BroadcastRequest(tx.hex()))
        now[0] += 61
        with pytest.raises(ApiError) as caught:
            await service.status(tx.txid_hex)
        assert caught.value.code == "TRANSACTION_NOT_FOUND"


async def test_confirmations_update_the_record(net: Devnet, service: BroadcastService) -> None:
    coin = await fund(net, ALICE, 50_000)
    tx = pay(coin, BOB.locking_bytecode)
    await service.broadcast(BroadcastRequest(tx.hex()))
    [block] = net.nodes[0].mine(1)
    height = net.nodes[0].height
    await service.recheck()
    record = await service.status(tx.txid_hex)
    assert (record["block_height"], record["confirmations"]) == (height, 1)
    net.nodes[0].mine(2)
    await service.recheck()
    record = await service.status(tx.txid_hex)
    assert (record["status"], record["block_height"], record["confirmations"]) == (
        "accepted",
        height,
        3,
    )
    assert block.txs[1].txid_hex == tx.txid_hex


async def test_missing_inputs_are_retried_once(net: Devnet) -> None:
    coin = await fund(net, ALICE, 50_000)
    parent = pay(coin, ALICE.locking_bytecode)
    [output] = outputs_of(parent, ALICE)
    child = pay(output, BOB.locking_bytecode)
    net.network.delay = 0.3  # the parent reaches the other nodes 0.3 s after node 0
    await net.nodes[0].submit(parent)
    async with BroadcastService(config_for(net, missing_inputs_retry=0.6)) as service:
        answer = await service.broadcast(BroadcastRequest(child.hex()))
        record = await settle(service, child.txid_hex)
    assert answer["status"] == "accepted"
    # nodes 1-4 first refused (the parent had not reached them), then accepted on the retry
    assert (record["nodes_reached"], record["rejections"]) == (5, [])
