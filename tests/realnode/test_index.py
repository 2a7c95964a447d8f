"""Issue 20, item 1: a fresh index reaches the tip through a real Fulcrum, as a new user runs it
(no `--start-height`), and so does the standalone router."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import aiosqlite
import orjson
from websockets.asyncio.client import connect

from bch.wallet import Wallet
from indexer.electrum import ElectrumClient
from indexer.follow import Follower
from indexer.index import open_store
from indexer.network import index_prefix
from indexer.tipwatch import TipWatch
from rest.config import RestConfig
from rest.context import ApiContext
from tests.indexer.test_follower_support import wait_until
from tests.realnode.nodes import RealNodes

LADLE = [sys.executable, "-m", "ladle"]
TIMEOUT = 60.0


def _ladle(*args: str) -> list[str]:
    return [*LADLE, *args, "--log-format", "json", "--no-progress"]


async def test_ladle_index_reaches_the_tip(nodes: RealNodes, tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    args = _ladle("index", "--electrum", nodes.electrum_url, "--db", str(db), "--exit-at-tip")
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    ready = [e for e in events if e.get("event") == "ready"]
    assert ready and ready[0]["height"] == nodes.bitcoind.rpc("getblockcount")
    assert ready[0]["tip"] == nodes.bitcoind.rpc("getbestblockhash")
    assert not [e for e in events if e.get("event") == "restart"], "no walk should restart"
    assert not [e for e in events if e.get("level") == "warning"], done.stderr[-2000:]
    await _rest_prefixes(db)


async def _rest_prefixes(db: Path) -> None:
    """REST's owner addresses follow the indexed chain (regtest here) unless told otherwise."""
    async with aiosqlite.connect(db) as conn:
        assert await index_prefix(conn) == "bchreg"
        assert await ApiContext.create(RestConfig(db_path=db)).address_prefix(conn) == "bchreg"
        told = RestConfig(db_path=db, address_prefix="bchtest")
        assert await ApiContext.create(told).address_prefix(conn) == "bchtest"


async def test_follower_indexes_the_genesis_block_and_follows(
    nodes: RealNodes, tmp_path: Path
) -> None:
    """The genesis coinbase cannot be fetched from a node, yet block 0 is part of the index
    (it anchors the index to the network), applied without transactions."""
    client = ElectrumClient([nodes.electrum_url], retries=0)
    store = await open_store(tmp_path / "index.sqlite")
    try:
        follower = Follower(client, store, mempool=False)
        result = await follower.sync()
        assert follower.start_height == 0
        tip = await store.tip()
        assert tip is not None and tip.height == result.height
        genesis = await store.block_hash(0)
        assert genesis is not None
        assert genesis[::-1].hex() == nodes.bitcoind.rpc("getblockhash", 0)
        nodes.mine(2)
        again = await follower.sync()
        assert again.applied == 2 and again.height == tip.height + 2
    finally:
        await store.close()
        await client.close()


async def _tx_build(url: str, receive: str) -> dict[str, Any]:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tx.build",
        "params": {
            "sell": "bch",
            "buy": "ab" * 32,
            "amount": "100000",
            "receive_addr": receive,
            "change_addr": receive,
            "funding": [{"txid": "cd" * 32, "vout": 0, "value": "200000", "address": receive}],
        },
    }
    async with connect(url) as ws:
        await ws.send(orjson.dumps(request).decode())
        answer: dict[str, Any] = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
    return answer


async def test_ladle_router_follows_the_chain_and_its_network(
    nodes: RealNodes, tmp_path: Path
) -> None:
    """Ready without `--start-height`; addresses must be of the server's network (regtest:
    `bchreg:`), an address of another network is a bad request."""
    db = str(tmp_path / "router.sqlite")
    args = [*_ladle("router", "--electrum", nodes.electrum_url, "--db", db)]
    proc = await asyncio.create_subprocess_exec(
        *args, "--port", "0", "--fee-bps", "0", stdout=PIPE, stderr=PIPE
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = b""
        async with asyncio.timeout(TIMEOUT):
            while not line.startswith(b"LADLE_READY"):
                line = await proc.stdout.readline()
                assert line, (await proc.stderr.read()).decode()[-2000:]
        ready = json.loads(line.split(b" ", 1)[1])
        assert ready["height"] == nodes.bitcoind.rpc("getblockcount")
        mainnet = Wallet.from_seed("ladle real-node tier bob")
        wrong = await _tx_build(ready["router"], mainnet.token_address)
        assert wrong["error"]["code"] == "bad_request", wrong
        assert "bchreg" in wrong["error"]["message"], wrong
        regtest = Wallet.from_seed("ladle real-node tier bob", prefix="bchreg")
        right = await _tx_build(ready["router"], regtest.token_address)
        assert right["error"]["code"] == "route_failed", right  # past the addresses: no pools
    finally:
        proc.terminate()
        await proc.wait()


async def test_the_tip_watch_hears_fulcrum(nodes: RealNodes) -> None:
    """The best tip heard (`/health` freshness, the router's staleness) through a real Fulcrum:
    its header subscription, a block mined on BCHN."""
    watch = TipWatch([nodes.electrum_url])
    await watch.start()
    try:
        height = nodes.bitcoind.rpc("getblockcount")
        await wait_until(lambda: watch.heard().best_height == height, timeout=TIMEOUT)
        nodes.mine(1)
        await wait_until(lambda: watch.heard().best_height == height + 1, timeout=TIMEOUT)
        heard = watch.heard()
        assert heard.tips[height + 1][0] == nodes.bitcoind.rpc("getbestblockhash")
        assert (heard.servers, heard.connected, heard.offline_since) == (1, 1, None)
    finally:
        await watch.close()
