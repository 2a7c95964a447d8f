"""The end-to-end journey on real node software, in real processes over loopback: a pool put on
a regtest BCHN chain, `ladle router` indexing it through Fulcrum, a quote and a `tx.build` with
the specification's request, the client's signature, `ladle broadcast` sending it to the node
(RPC) and to Fulcrum, a double spend refused in the node's words, a dry run by the node, a
block, `ladle rest` over the router's database showing the trade, and a reorganisation
(`invalidateblock`, a competing block without the trade, `reconsiderblock`) taking the trade
out of the data API and putting it back.

One test, because each step stands on the previous one's chain state."""

from __future__ import annotations

import asyncio
import json
import sys
from asyncio.subprocess import PIPE, Process
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect

from bch.tx import Transaction
from bch.wallet import Wallet
from tests.conformance.client import sign
from tests.realnode.cauldron import Coin, Traffic
from tests.realnode.coins import fund
from tests.realnode.nodes import RPC_PASSWORD, RPC_USER, RealNodes

TRADER = Wallet.from_seed("ladle real-node tier journey", prefix="bchreg")
LADLE = [sys.executable, "-m", "ladle"]
TIMEOUT = 30.0
SELL_SATS = 100_000
TAKE_OUT_OF_BLOCKS = -100_000_000  # prioritisetransaction's fee delta: never worth mining


async def ladle(stack: AsyncExitStack, *args: str) -> Process:
    """`ladle ARGS`, stopped when `stack` closes."""
    proc = await asyncio.create_subprocess_exec(*LADLE, *args, stdout=PIPE, stderr=PIPE)

    async def stop() -> None:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()

    stack.push_async_callback(stop)
    return proc


async def ready(proc: Process, accept: Callable[[bytes], bool]) -> bytes:
    """The first stdout line `accept` takes (the process announcing where it serves)."""
    assert proc.stdout is not None
    async with asyncio.timeout(TIMEOUT):
        line = b""
        while not accept(line):
            line = await proc.stdout.readline()
            assert line, await _stderr(proc)
    return line


async def _stderr(proc: Process) -> str:
    assert proc.stderr is not None
    return (await proc.stderr.read()).decode(errors="replace")[-2000:]


async def call(ws: ClientConnection, method: str, params: dict[str, Any]) -> dict[str, Any]:
    await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    reply: dict[str, Any] = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def build_and_sign(
    ws: ClientConnection, token: str, coin: Coin, sats: int = SELL_SATS
) -> tuple[Transaction, dict[str, Any]]:
    """`tx.build` buying `token` with `sats` from `coin` (the spec's funding entry), signed;
    and the build's result."""
    result = await call(
        ws,
        "tx.build",
        {
            "sell": "bch",
            "buy": token,
            "amount": str(sats),
            "side": "sell",
            "funding": [
                {
                    "txid": coin.outpoint.txid_hex,
                    "vout": coin.outpoint.index,
                    "value": str(coin.output.value),
                    "script_hex": coin.output.locking.hex(),
                }
            ],
            "receive_addr": TRADER.token_address,
            "change_addr": TRADER.address,
        },
    )
    return sign(result, TRADER.key.to_wif(testnet=True)), result


async def until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    """Poll `check` until it holds (the indexer follows Fulcrum, which follows the node)."""
    async with asyncio.timeout(TIMEOUT):
        while not await check():
            await asyncio.sleep(0.1)
    assert await check(), what


async def test_journey_from_pool_to_reorg(nodes: RealNodes, tmp_path: Path) -> None:
    node = nodes.bitcoind
    pool_coin, first, second = fund(nodes, TRADER, 3, 2_000_000)
    traffic = Traffic(node, TRADER)
    traffic.create_pool(pool_coin)
    traffic.send()
    nodes.mine(1)
    token = pool_coin.outpoint.txid_hex  # the category: the txid of the genesis input's coin

    db = str(tmp_path / "router.sqlite")
    rpc = f"http://{RPC_USER}:{RPC_PASSWORD}@127.0.0.1:{node.rpc_port}"
    async with AsyncExitStack() as stack:
        # The three services start together (each process takes seconds to import).
        router_proc = await ladle(
            stack,
            *("router", "--electrum", nodes.electrum_url, "--db", db, "--port", "0"),
            *("--fee-bps", "0", "--no-progress", "--log-format", "json"),
        )
        broadcast_proc = await ladle(
            stack,
            *("broadcast", "--port", "0", "--db", str(tmp_path / "broadcast.sqlite")),
            *("--node", nodes.electrum_url, "--bitcoind-rpc", rpc),
            *("--recheck-interval", "0.5", "--no-verify"),
        )
        rest_proc = await ladle(stack, *("rest", "--db", db, "--port", "0", "--stale-after", "0"))
        line = await ready(router_proc, lambda line: line.startswith(b"LADLE_READY"))
        router = json.loads(line.split(b" ", 1)[1])
        assert router["height"] == node.rpc("getblockcount")
        announced = json.loads(await ready(broadcast_proc, lambda line: line.startswith(b"{")))
        public_rpc = f"http://127.0.0.1:{node.rpc_port}"
        assert announced["nodes"] == [nodes.electrum_url, public_rpc]  # no password printed
        line = await ready(rest_proc, lambda line: line.startswith(b"{"))
        rest = await stack.enter_async_context(httpx.AsyncClient(base_url=json.loads(line)["rest"]))
        bcast = await stack.enter_async_context(httpx.AsyncClient(base_url=announced["broadcast"]))
        ws = await stack.enter_async_context(connect(router["router"]))

        # A quote, then the build it prices, signed by the client.
        quote = await call(ws, "quote", {"sell": "bch", "buy": token, "amount": str(SELL_SATS)})
        trade, built = await build_and_sign(ws, token, first)
        assert quote["kind"] == "single", quote
        assert built["expected_output"] == quote["output_amount"] != "0", (quote, built)
        assert built["inputs_to_sign"] == [1], built  # the pool's input is not the client's

        # Sent to the node and to Fulcrum: both hold it.
        posted = await bcast.post("/broadcast", json={"tx": trade.hex()})
        assert posted.status_code == 200, posted.text
        assert (posted.json()["status"], posted.json()["nodes_reached"]) == ("accepted", 2)
        assert trade.txid_hex in node.rpc("getrawmempool")
        status = (await bcast.get(f"/broadcast/status/{trade.txid_hex}")).json()
        assert [(n["node"], n["state"]) for n in status["nodes"]] == [
            (nodes.electrum_url, "accepted"),
            (public_rpc, "accepted"),
        ]

        # The same coin spent again, by a second build: refused, in each node's words.
        double, _ = await build_and_sign(ws, token, first, 2 * SELL_SATS)
        assert double.txid_hex != trade.txid_hex
        refused = await bcast.post("/broadcast", json={"tx": double.hex()})
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["details"]["reason"]) == ("REJECTED", "conflict")
        words = {r["node"]: r["message"] for r in error["details"]["rejections"]}
        assert words[public_rpc] == "txn-mempool-conflict (code 18)"
        assert "txn-mempool-conflict" in words[nodes.electrum_url]
        assert double.txid_hex not in node.rpc("getrawmempool")

        # A dry run of another build, once the router trades on the pool as the mempool trade
        # left it (before that, the node answers txn-mempool-conflict): the node's
        # testmempoolaccept finds it valid; nothing is sent.
        other = trade

        async def after_the_trade() -> bool:
            nonlocal other
            other, _ = await build_and_sign(ws, token, second)
            return other.inputs[0].outpoint.txid_hex == trade.txid_hex

        await until("the router trading on the unconfirmed pool", after_the_trade)
        dry = await bcast.post("/broadcast", json={"tx": other.hex(), "dry_run": True})
        validation = dry.json()["validation"]
        assert (validation["status"], validation["node"]["allowed"]) == ("valid", True), dry.text
        assert other.txid_hex not in node.rpc("getrawmempool")

        # Mined: the data API shows the trade; the broadcast record its block.
        block = nodes.mine(1)[0]
        height = node.rpc("getblockcount")

        async def trades() -> list[dict[str, Any]]:
            answer = await rest.get("/dex/tx/latest", params={"token": token})
            assert answer.status_code == 200, answer.text
            rows: list[dict[str, Any]] = answer.json()
            return rows

        async def volume() -> int:
            answer = await rest.get(f"/dex/volume/{token}", params=window)
            assert answer.status_code == 200, answer.text
            total = await rest.get("/dex/volume", params=window)
            assert total.json()["total_volume_sats"] >= answer.json()["volume_sats"], total.text
            return int(answer.json()["volume_sats"])

        async def traded_in(block_hash: str) -> bool:
            rows = await trades()
            return [(t["txid"], t["blockhash"]) for t in rows] == [(trade.txid_hex, block_hash)]

        window: dict[str, int] = {}
        await until("the trade in the data API", lambda: traded_in(block))
        assert (await trades())[0]["height"] == height
        # Regtest block times run ahead of the clock (each block must pass the median time of
        # the last 11, and the tier mines hundreds in seconds): the window is the block's.
        when = (await trades())[0]["timestamp_guess"]
        window = {"start": when - 3600, "end": when + 3600}
        assert await volume() == SELL_SATS

        async def confirmed() -> bool:
            record = (await bcast.get(f"/broadcast/status/{trade.txid_hex}")).json()
            return bool(record["block_height"] == height)

        await until("the broadcast record confirmed", confirmed)

        # A reorganisation: the trade's block replaced by one without it (the trade, back in
        # the mempool, is made not worth mining), on a branch shorter than the first.
        nodes.mine(1)
        node.rpc("invalidateblock", block)
        assert trade.txid_hex in node.rpc("getrawmempool")
        node.rpc("prioritisetransaction", trade.txid_hex, 0, TAKE_OUT_OF_BLOCKS)
        competing = nodes.mine(1)[0]
        assert trade.txid_hex not in node.rpc("getblock", competing)["tx"]

        async def no_trade() -> bool:
            return await trades() == [] and await volume() == 0

        await until("the trade out of the data API", no_trade)

        # The first branch, longer, is back: so is the trade, in its block.
        node.rpc("reconsiderblock", block)
        assert node.rpc("getblockcount") == height + 1
        nodes.fulcrum.wait_synced()
        await until("the trade back in the data API", lambda: traded_in(block))
        assert await volume() == SELL_SATS
        await until("the broadcast record confirmed again", confirmed)
