"""Issue 20: BCHN as the indexer's chain source. The index read from the node over JSON-RPC is
the index read through Fulcrum, row for row; new blocks are followed with and without ZMQ; a
reorg (`invalidateblock`, a longer branch) leaves the index of the new chain; an indexer killed
with SIGKILL mid-sync continues to the same index."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bch.block import Block
from bch.tx import hash_to_hex
from bch.wallet import Wallet
from indexer.bitcoind import BitcoindClient, HeightOutOfRange, RpcAddress, RpcError, UnknownBlock
from indexer.electrum import ElectrumClient
from indexer.follow import Follower
from indexer.follow.source_bitcoind import BitcoindSource
from indexer.index import open_store
from indexer.service import IndexerConfig
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from tests.indexer.test_store_scenario import Rows, dump
from tests.realnode.cauldron import Coin, Pool, Traffic
from tests.realnode.nodes import Bitcoind, RealNodes
from tests.realnode.test_index import ladle_router, refuses_mainnet_addresses

TRADER = Wallet.from_seed("ladle real-node tier pools", prefix="bchreg")
POOLS = 4
TIMEOUT = 60.0


@dataclass
class Market:
    """Pools of TRADER on the chain, and what to trade them with next."""

    traffic: Traffic
    pools: list[Pool]
    coin: Coin

    def trade_all(self, rounds: int = 1) -> list[str]:
        """Trade every pool `rounds` times; the txids sent (unconfirmed)."""
        for _ in range(rounds):
            for i, pool in enumerate(self.pools):
                self.pools[i], self.coin = self.traffic.trade(pool, self.coin)
        return self.traffic.send()


@pytest.fixture(scope="module")
def market(nodes: RealNodes) -> Iterator[Market]:
    """TRADER's coinbase, matured; pools created from it and traded over a few blocks."""
    traffic = Traffic(nodes.bitcoind, TRADER)
    pools, coin = traffic.open_pools(POOLS)
    nodes.mine(1)
    created = Market(traffic, pools, coin)

    for _ in range(3):
        created.trade_all(2)
        nodes.mine(1)
    yield created


def node_source(nodes: RealNodes, *, zmq: bool = False) -> BitcoindSource:
    node = nodes.bitcoind
    client = BitcoindClient(RpcAddress.parse(node.rpc_url))
    urls = (node.zmq_url,) if zmq and node.zmq_url else ()
    return BitcoindSource(client, zmq=urls)


@contextlib.asynccontextmanager
async def index(
    source: BitcoindSource | ElectrumClient, path: Path, **settings: Any
) -> AsyncIterator[tuple[Follower, Store]]:
    store = await open_store(path, snapshot=PoolSnapshot())
    try:
        yield Follower(source, store, **settings), store
    finally:
        await store.close()
        await source.close()


async def electrum_index(nodes: RealNodes, path: Path) -> Rows:
    nodes.fulcrum.wait_synced()
    async with index(ElectrumClient([nodes.electrum_url], retries=0), path) as (follower, store):
        await follower.sync()
        return await dump(store.conn)


async def test_the_node_index_is_the_fulcrum_index(
    nodes: RealNodes, market: Market, tmp_path: Path
) -> None:
    want = await electrum_index(nodes, tmp_path / "fulcrum.sqlite")
    assert len(want["cauldron_events"]) >= POOLS * 7, "pools and trades are on the chain"
    async with index(node_source(nodes), tmp_path / "node.sqlite") as (follower, store):
        result = await follower.sync()
        assert result.height == nodes.bitcoind.rpc("getblockcount")
        assert await dump(store.conn) == want
        assert len(store.snapshot) == POOLS


async def wait_for(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not seen within {timeout}s: {what}") from None


async def zmq_connected(nodes: RealNodes, source: BitcoindSource) -> None:
    """Mine until the listener hears a push: a subscription takes a moment to connect, and
    what the node publishes before is lost to it."""
    listener = source.listener
    assert listener is not None
    for _ in range(20):
        nodes.bitcoind.mine(1)
        with contextlib.suppress(AssertionError):
            await wait_for("a push", lambda: listener.messages > 0, timeout=1.0)
            return
    raise AssertionError("no ZMQ push arrived")


@pytest.mark.parametrize("zmq", [True, False], ids=["zmq", "polling"])
async def test_new_blocks_and_trades_are_followed(
    nodes: RealNodes, market: Market, tmp_path: Path, zmq: bool
) -> None:
    """With ZMQ the follower polls only every minute, so seeing a trade and a block at once
    is the pushes' doing; without, it polls every 0.2 s."""
    if zmq and nodes.bitcoind.zmq_url is None:
        pytest.skip("this bitcoind build has no ZMQ")
    source = node_source(nodes, zmq=zmq)
    interval = 60.0 if zmq else 0.2
    async with index(source, tmp_path / "node.sqlite", mempool_interval=interval) as (
        follower,
        store,
    ):
        ready = asyncio.Event()
        task = asyncio.create_task(follower.run(ready=ready))
        try:
            await asyncio.wait_for(ready.wait(), TIMEOUT)
            if zmq:
                await zmq_connected(nodes, source)
            txids = market.trade_all()
            await wait_for(
                "the trades pending",
                lambda: set(txids) <= {hash_to_hex(t) for t in store.snapshot.pending_txids()},
            )
            (block,) = nodes.bitcoind.mine(1)
            await wait_for(
                "the block", lambda: store.snapshot.height == nodes.bitcoind.rpc("getblockcount")
            )
            tip = await store.tip()
            assert tip is not None and tip.hash_hex == block
            await wait_for("the trades confirmed", lambda: not store.snapshot.pending_txids())
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert follower.rounds > 0


async def test_a_reorg_leaves_the_index_of_the_new_chain(
    nodes: RealNodes, market: Market, tmp_path: Path
) -> None:
    node = nodes.bitcoind
    async with index(node_source(nodes), tmp_path / "node.sqlite") as (follower, store):
        market.trade_all()
        nodes.mine(3)
        await follower.sync()
        tip = node.rpc("getblockcount")
        # The last three blocks are replaced by four others: their trades return to the
        # mempool and are mined again, at other heights, with one more trade of every pool.
        node.rpc("invalidateblock", node.rpc("getblockhash", tip - 2))
        market.trade_all()
        nodes.mine(4, TRADER.address)
        result = await follower.sync()
        assert (result.undone, result.applied) == (3, 4)
        assert result.height == tip + 1 == node.rpc("getblockcount")
        want = await electrum_index(nodes, tmp_path / "fulcrum.sqlite")
        assert await dump(store.conn) == want


def stored_height(db: Path) -> int:
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=1.0)) as conn:
            row = conn.execute("SELECT max(height) FROM blocks").fetchone()
    except sqlite3.Error:
        return -1
    return -1 if row is None or row[0] is None else int(row[0])


def ladle_index(rpc_url: str, db: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "ladle", "index", "--bitcoind-rpc", rpc_url, "--db", str(db)),
        *("--exit-at-tip", "--log-format", "json", "--no-progress", "--no-registry-fetch"),
    ]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while data := await reader.read(1 << 16):
            await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def slow_proxy(port: int, delay: float) -> AsyncIterator[int]:
    """A loopback TCP proxy to `port` that holds each request `delay` seconds: a sync long
    enough to be killed in the middle, whatever the machine's speed."""

    async def forward(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        node_r, node_w = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(_pipe(client_r, node_w, delay), _pipe(node_r, client_w, 0.0))

    server = await asyncio.start_server(forward, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_sigkill_mid_sync_then_restart(
    nodes: RealNodes, market: Market, tmp_path: Path
) -> None:
    node = nodes.bitcoind
    tip = node.rpc("getblockcount")
    db = tmp_path / "index.sqlite"
    async with slow_proxy(node.rpc_port, 0.03) as port:
        slow = node.rpc_url.replace(f":{node.rpc_port}", f":{port}")
        proc = await asyncio.create_subprocess_exec(
            *ladle_index(slow, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            async with asyncio.timeout(TIMEOUT):
                while stored_height(db) < tip // 3:
                    assert proc.returncode is None, "the sync ended before it was killed"
                    await asyncio.sleep(0.02)
        finally:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    killed_at = stored_height(db)
    assert 0 < killed_at < tip, "killed in the middle of the sync"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count, low, high = conn.execute(
            "SELECT count(*), min(height), max(height) FROM blocks"
        ).fetchone()
        assert (count, low) == (high + 1, 0), "whole blocks from the genesis, none missing"
    done = subprocess.run(
        ladle_index(node.rpc_url, db), capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    ready = [e for e in events if e.get("event") == "ready"]
    assert ready and ready[0]["height"] == tip
    async with aiosqlite.connect(db) as conn:
        got = await dump(conn)
    assert got == await electrum_index(nodes, tmp_path / "fulcrum.sqlite")


async def test_ladle_router_on_the_node(nodes: RealNodes, market: Market, tmp_path: Path) -> None:
    """`ladle router --bitcoind-rpc`: ready at the node's tip with its pools; the network (and
    so the addresses accepted) is the node's, read from its genesis block."""
    db = str(tmp_path / "router.sqlite")
    async with ladle_router("--bitcoind-rpc", nodes.bitcoind.rpc_url, "--db", db) as ready:
        assert ready["height"] == nodes.bitcoind.rpc("getblockcount")
        assert ready["pools"] == POOLS
        await refuses_mainnet_addresses(ready["router"])


async def test_the_node_answers_as_the_client_reads_them(nodes: RealNodes) -> None:
    """BCHN's errors for what the source asks of it, as `indexer.bitcoind.errors` reads them."""
    client = BitcoindClient(RpcAddress.parse(nodes.bitcoind.rpc_url))
    try:
        height, best = await client.tip()
        assert (await client.block_hashes(height, 5)) == [best]  # the chain ends there
        with pytest.raises(HeightOutOfRange):
            await client.block_hash(height + 1)
        with pytest.raises(UnknownBlock):
            await client.block("00" * 32)
        assert await client.transactions(["00" * 32]) == [None]
        genesis = await client.block(await client.block_hash(0))
        coinbase = Block(genesis).transaction(0).txid_hex
        with pytest.raises(RpcError, match="genesis block coinbase"):  # not "unknown"
            await client.transactions([coinbase])
    finally:
        await client.close()


async def test_a_login_by_cookie(nodes: RealNodes, tmp_path: Path) -> None:
    """A node without `rpcuser` writes a cookie, a new one at each start: `--rpc-cookie` logs
    in with it, and a client reads it again after the node restarted."""
    node = Bitcoind(nodes.bitcoind.binary, tmp_path / "bchn", cookie=True)
    # BCHN stops only once its kept-alive RPC connections (the client's here) have been idle
    # for -rpcservertimeout, 30 s by default.
    node.datadir.mkdir(parents=True)
    (node.datadir / "bitcoin.conf").write_text("rpcservertimeout=2\n")
    try:
        node.start()
        node.mine(3)
        db = tmp_path / "index.sqlite"
        args = [*ladle_index(node.rpc_url, db), "--rpc-cookie", str(node.cookie_file)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert stored_height(db) == 3
        client = BitcoindClient(RpcAddress.parse(node.rpc_url, cookie=node.cookie_file))
        try:
            assert (await client.tip())[0] == 3
            before = node.cookie_file.read_text()
            node.stop()
            node.start()
            assert node.cookie_file.read_text() != before
            assert (await client.tip())[0] == node.rpc("getblockcount")
        finally:
            await client.close()
    finally:
        node.stop()


async def test_the_tip_watch_hears_the_node(nodes: RealNodes) -> None:
    """With the node as source, the best tip heard (`/health` freshness, the router's
    staleness) is the node's."""
    watch = IndexerConfig(bitcoind=nodes.bitcoind.rpc_url).tip_watch()
    await watch.start()
    try:
        height = nodes.bitcoind.rpc("getblockcount")
        await wait_for("the tip", lambda: watch.heard().best_height == height)
        (block,) = nodes.bitcoind.mine(1)
        await wait_for("the next tip", lambda: watch.heard().best_height == height + 1)
        heard = watch.heard()
        assert heard.tips[height + 1][0] == block
        assert (heard.servers, heard.connected, heard.offline_since) == (1, 1, None)
    finally:
        await watch.close()
