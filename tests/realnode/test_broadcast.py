"""Issue 20, item 2: the broadcaster against a real Fulcrum, which answers
`transaction.get_height` of an unknown txid with error code 1, not null."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from broadcast.app import create_app
from broadcast.config import BroadcastConfig, NodeConfig
from broadcast.request import BroadcastRequest
from broadcast.service import BroadcastService
from runtime.errors import ApiError
from tests.realnode.nodes import MINER, RealNodes

BOB = Wallet.from_seed("ladle real-node tier bob", prefix="bchreg")
FEE = 1_000


def spend_coinbase(nodes: RealNodes, height: int) -> Transaction:
    """A signed payment to BOB of the (mature) coinbase the miner got at `height`."""
    block = nodes.bitcoind.rpc("getblock", nodes.bitcoind.rpc("getblockhash", height), 2)
    coinbase = block["tx"][0]
    out = coinbase["vout"][0]
    source = TxOutput(int(Decimal(str(out["value"])) * 100_000_000), MINER.locking_bytecode)
    assert bytes.fromhex(out["scriptPubKey"]["hex"]) == source.locking
    unsigned = Transaction.build(
        [TxInput(OutPoint.from_hex(coinbase["txid"], 0))],
        [TxOutput(source.value - FEE, BOB.locking_bytecode)],
    )
    return MINER.sign_transaction(unsigned, [source])


def in_mempool(nodes: RealNodes, txid: str) -> bool:
    return txid in nodes.bitcoind.rpc("getrawmempool")


@pytest.fixture
async def service(nodes: RealNodes, tmp_path: Path) -> AsyncIterator[BroadcastService]:
    config = BroadcastConfig(
        (NodeConfig(nodes.electrum_url, 1.0, 10.0),),
        db_path=str(tmp_path / "records.sqlite"),
        recheck_interval=3600.0,
        verify_scripts=False,
        missing_inputs_retry=None,
        reconnect_backoff=0.05,
    )
    svc = BroadcastService(config)
    await svc.start()
    yield svc
    await svc.close()


async def test_dry_run_of_a_new_transaction_is_valid(
    nodes: RealNodes, service: BroadcastService
) -> None:
    tx = spend_coinbase(nodes, 2)
    transport = httpx.ASGITransport(app=create_app(service, manage=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://broadcast") as http:
        response = await http.post("/broadcast", json={"tx": tx.hex(), "dry_run": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["dry_run"], body["txid"]) == (True, tx.txid_hex)
    assert body["validation"]["status"] == "valid", body["validation"]
    assert body["validation"]["fee"] == FEE
    assert not in_mempool(nodes, tx.txid_hex)  # a dry run sends nothing


async def test_broadcast_then_confirmation_through_fulcrum(
    nodes: RealNodes, service: BroadcastService
) -> None:
    tx = spend_coinbase(nodes, 3)
    answer = await service.broadcast(BroadcastRequest(tx.hex()))
    assert answer["status"] == "accepted", answer
    assert in_mempool(nodes, tx.txid_hex)
    nodes.mine(1)
    await service.recheck()
    record = await service.status(tx.txid_hex)
    assert record["block_height"] == nodes.bitcoind.rpc("getblockcount")


async def test_recheck_sends_what_fulcrum_does_not_know(
    nodes: RealNodes, service: BroadcastService
) -> None:
    """Fulcrum down at broadcast time: pending. Back up, it answers code 1 "No transaction
    matching…" for the txid, which the re-check must read as "never arrived" and send it."""
    tx = spend_coinbase(nodes, 4)
    nodes.fulcrum.stop()
    try:
        with pytest.raises(ApiError) as caught:
            await service.broadcast(BroadcastRequest(tx.hex()))
        assert (caught.value.status, caught.value.code) == (502, "BROADCAST_FAILED")
    finally:
        nodes.fulcrum.start()
        nodes.fulcrum.wait_synced()
    assert (await service.status(tx.txid_hex))["status"] == "pending"
    assert not in_mempool(nodes, tx.txid_hex)
    await service.recheck()
    assert in_mempool(nodes, tx.txid_hex)
    assert (await service.status(tx.txid_hex))["status"] == "accepted"
