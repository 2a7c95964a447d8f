"""End to end on the devnet: a generated scenario, the indexer following it in-process, the
router over the indexer's live snapshot, a scenario test wallet asking `tx.build` over the
WebSocket, signing, libauth (2025 and 2026 standard VMs), the devnet's mempool, a block, the
index — and the wallet receives exactly `expected_output`. Then a race: two subscribers want
the same pools; the winner's trade confirms and the loser's fresh push is accepted too."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from bch.script import electrum_scripthash
from bch.token import TokenData
from bch.tx import Transaction, TxOutput
from bch.wallet import Wallet
from devnet.service import Devnet
from indexer.electrum import ElectrumClient
from indexer.service import IndexerConfig, run_indexer
from indexer.snapshot import PoolSnapshot
from router.pools import BCH
from router.service import RouterServer, start_router
from runtime.tasks import cancel_and_wait
from tests.indexer.test_follower_support import SMALL, generate, urls, wait_until
from tests.router.test_daemon_support import FEE, Client, client
from verify.libauth import LibauthVerifier, VerifyResult

pytestmark = pytest.mark.node

VALID = VerifyResult(True, None)


@dataclass
class Stack:
    net: Devnet
    snapshot: PoolSnapshot
    router: RouterServer
    electrum: ElectrumClient
    verifier: LibauthVerifier


@asynccontextmanager
async def stack() -> AsyncIterator[Stack]:
    net, _ = await generate(SMALL)
    snapshot = PoolSnapshot()
    indexer: asyncio.Task[None] | None = None
    router: RouterServer | None = None
    electrum = ElectrumClient(urls(net), client_name="router-e2e")
    try:
        with tempfile.TemporaryDirectory() as scratch, LibauthVerifier() as verifier:
            config = IndexerConfig(
                electrum=tuple(urls(net)),
                db=f"{scratch}/index.sqlite",
                start_height=0,
                progress=False,
                mempool_interval=0.05,
            )
            ready = asyncio.Event()
            indexer = asyncio.create_task(run_indexer(config, ready=ready, snapshot=snapshot))
            await asyncio.wait_for(ready.wait(), 30)
            router = await start_router(snapshot, FEE, "127.0.0.1", 0)
            yield Stack(net, snapshot, router, electrum, verifier)
    finally:
        if router is not None:
            await router.close()
        if indexer is not None:
            await cancel_and_wait([indexer])
        await electrum.close()
        await net.stop()


async def funding_of(s: Stack, wallet: Wallet) -> list[dict[str, Any]]:
    """The wallet's coins as the spec's `funding` items: {txid, vout, value, script_hex, token?}."""
    coins = await s.electrum.listunspent(electrum_scripthash(wallet.locking_bytecode))
    out = []
    for u in coins:
        entry: dict[str, Any] = {
            "txid": u.outpoint.txid_hex,
            "vout": u.outpoint.index,
            "value": str(u.value),
            "script_hex": wallet.locking_bytecode.hex(),
        }
        if u.token is not None:
            entry["token"] = u.token.to_json()
        out.append(entry)
    return out


def held_tokens(funding: list[dict[str, Any]]) -> dict[str, int]:
    held: dict[str, int] = {}
    for f in funding:
        token = f.get("token")
        if token and token.get("nft") is None:
            held[token["category"]] = held.get(token["category"], 0) + int(token["amount"])
    return held


def sign(wallet: Wallet, s: Stack, result: dict[str, Any]) -> Transaction:
    tx = Transaction.from_hex(result["unsigned_tx_hex"])
    sources = []
    for entry in result["source_outputs"]:
        token = TokenData.from_json(entry["token"]) if "token" in entry else None
        sources.append(
            TxOutput(int(entry["value"]), bytes.fromhex(entry["locking_script_hex"]), token)
        )
    signed = wallet.sign_transaction(tx, sources, result["inputs_to_sign"])
    for vm in (2025, 2026):
        assert s.verifier.verify(signed, sources, vm=vm, standard=True) == VALID, vm
    return signed


async def settle(s: Stack, signed: Transaction) -> None:
    """Broadcast, wait for the mempool view, mine, wait until the index has the block."""
    assert await s.electrum.broadcast(signed.hex()) == signed.txid_hex
    await wait_until(lambda: s.snapshot.is_pending(signed.txid), what="the trade in the mempool")
    s.net.nodes[0].mine()
    height = s.net.nodes[0].height
    await wait_until(
        lambda: s.snapshot.height == height and not s.snapshot.is_pending(signed.txid),
        what="the block indexed",
    )


async def received(s: Stack, wallet: Wallet, txid: str, vout: int, buy: str) -> int:
    coins = await s.electrum.listunspent(electrum_scripthash(wallet.locking_bytecode))
    (coin,) = [u for u in coins if (u.outpoint.txid_hex, u.outpoint.index) == (txid, vout)]
    assert coin.height > 0  # mined
    if buy == BCH:
        assert coin.token is None
        return coin.value
    assert coin.token is not None and coin.token.category_hex == buy
    return coin.token.amount


async def trade(
    s: Stack, c: Client, wallet: Wallet, sell: str, buy: str, amount: int
) -> dict[str, Any]:
    params = {
        "sell": sell,
        "buy": buy,
        "amount": str(amount),
        "receive_addr": wallet.token_address,
        "change_addr": wallet.address,
        "funding": await funding_of(s, wallet),
    }
    result: dict[str, Any] = await c.call("tx.build", params)
    signed = sign(wallet, s, result)
    await settle(s, signed)
    n_pools = len(result["route"]["legs"])
    got = await received(s, wallet, signed.txid_hex, n_pools, buy)
    assert got == int(result["expected_output"]), (sell, buy)
    return result


async def test_devnet_trades_and_a_race() -> None:
    async with stack() as s, client(s.router) as c:
        w0, w1, w2 = (Wallet.from_seed(f"ladle devnet wallet {i}") for i in range(3))
        held = held_tokens(await funding_of(s, w0))
        traded = sorted(
            (t for t in held if s.snapshot.pools(t)), key=lambda t: -len(s.snapshot.pools(t))
        )
        assert len(traded) >= 2, "the scenario's test wallet holds tokens with pools"
        a, b = traded[0], traded[1]
        await trade(s, c, w0, BCH, a, 2_000_000)  # BCH → token
        await trade(s, c, w0, a, BCH, held[a] // 10)  # token → BCH
        await trade(s, c, w0, b, a, held[b] // 10)  # token → token

        # The race: both wallets subscribe to the same order; the winner's trade confirms.
        async with client(s.router) as c1, client(s.router) as c2:

            async def subscribe(cx: Client, w: Wallet) -> dict[str, Any]:
                params = {
                    "sell": BCH,
                    "buy": a,
                    "amount": "3000000",
                    "receive_addr": w.token_address,
                    "change_addr": w.address,
                    "funding": await funding_of(s, w),
                }
                await cx.call("tx.subscribe", params)
                push = await cx.push()
                result: dict[str, Any] = push["params"]["result"]
                return result

            first, second = await subscribe(c1, w1), await subscribe(c2, w2)
            legs = {(p["txid"], p["tx_pos"]) for p in first["route"]["legs"]}
            assert legs & {(p["txid"], p["tx_pos"]) for p in second["route"]["legs"]}
            winner = sign(w1, s, first)
            await settle(s, winner)
            fresh = (await c2.push(timeout=10))["params"]["result"]
            assert fresh["unsigned_tx_hex"] != second["unsigned_tx_hex"]
            assert not legs & {(p["txid"], p["tx_pos"]) for p in fresh["route"]["legs"]}
            loser = sign(w2, s, fresh)
            await settle(s, loser)
            n = len(fresh["route"]["legs"])
            assert await received(s, w2, loser.txid_hex, n, a) == int(fresh["expected_output"])
