"""`tx.subscribe` / `route.subscribe` over a real server: pushes follow the snapshot, only when
the outcome changes; errors when unbuildable; a slow reader gets only the latest; the loser of
a race for the same pools gets a fresh transaction once the winner's trade is in."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

from websockets.asyncio.client import connect

from bch.tx import OutPoint, Transaction
from indexer.snapshot import LivePool, PoolSnapshot
from router.pools import BCH
from tests.router.helpers import (
    OTHER,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    even_pools,
    funding,
    make_pool,
)
from tests.router.test_daemon_support import (
    Client,
    client,
    live,
    pending_trade,
    running,
    snapshot_of,
    standard_pools,
)


def order(wallet: Any = USER, label: str = "f0", amount: int = 300_000) -> dict[str, Any]:
    return build_params(
        BCH,
        TOKEN_A,
        amount,
        [funding(label, 50_000_000, wallet)],
        receive=wallet.token_address,
        change=wallet.address,
    )


def pool_inputs(result: dict[str, Any]) -> list[tuple[str, int]]:
    return [(leg["txid"], leg["tx_pos"]) for leg in result["route"]["legs"]]


def confirm(snap: PoolSnapshot, result: dict[str, Any], height: int) -> None:
    """Mine a built trade into the snapshot: its pools are spent and re-created as outputs."""
    tx = Transaction.from_hex(result["unsigned_tx_hex"])
    legs = result["route"]["legs"]
    removed, added = [], []
    for i, leg in enumerate(legs):
        old = snap.pool(OutPoint.from_hex(leg["txid"], leg["tx_pos"]))
        assert old is not None
        out = tx.outputs[i]
        assert out.token is not None
        removed.append(old.outpoint)
        added.append(
            LivePool(
                OutPoint(tx.txid, i),
                old.lineage,
                old.owner_pkh,
                old.token_id,
                out.value,
                out.token.amount,
                height,
            )
        )
    snap.apply_block(removed, added, [tx.txid], height=height)


async def first_tx(c: Client, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    sub = (await c.call("tx.subscribe", params))["subscription"]
    push = await c.push()
    assert push["method"] == "tx.update" and push["params"]["subscription"] == sub
    return sub, push["params"]["result"]


async def test_subscribe_reply_precedes_the_first_push() -> None:
    async with running(snapshot_of(standard_pools())) as server, client(server) as c:
        sub, result = await first_tx(c, order())
        assert c.order[-2:] == ["reply:1", f"push:{sub}"]
        built = await c.call("tx.build", order())
        assert built["unsigned_tx_hex"] == result["unsigned_tx_hex"]


async def test_a_pool_change_pushes_a_fresh_transaction() -> None:
    snap = snapshot_of(standard_pools())
    async with running(snap) as server, client(server) as c:
        sub, result = await first_tx(c, order())
        used = pool_inputs(result)
        old = snap.pool(OutPoint.from_hex(*used[0]))
        assert old is not None
        new = pending_trade(snap, old, old.sats + 500_000, old.tokens * 9 // 10, "move")
        push = await c.push()
        fresh = push["params"]["result"]
        assert push["params"]["subscription"] == sub
        assert fresh["unsigned_tx_hex"] != result["unsigned_tx_hex"]
        assert used[0] not in pool_inputs(fresh)
        assert fresh["route"]["snapshot_version"] == snap.version
        # it is exactly what a tx.build now answers
        assert (await c.call("tx.build", order()))["unsigned_tx_hex"] == fresh["unsigned_tx_hex"]
        # the moved pool, if used, is used at its new outpoint
        assert all(p != (old.txid, old.vout) for p in pool_inputs(fresh))
        assert new.txid != old.txid


async def test_no_push_when_the_transaction_is_identical() -> None:
    pools = standard_pools()
    snap = snapshot_of(pools)
    async with running(snap) as server, client(server) as c:
        _, result = await first_tx(c, order())
        v0 = snap.version
        # another token moves: no re-route at all
        b = snap.pools(TOKEN_B)[0]
        pending_trade(snap, b, b.sats + 100_000, b.tokens - 500, "b-move")
        # a TOKEN_A pool far off the market appears: re-routed, same transaction, no push
        dear = make_pool(TOKEN_A, 1_000_000, 10, "dear")  # 100,000 sats per token
        snap.apply_block([], [live(dear, 101)], [], height=101)
        assert snap.version == v0 + 2
        await c.no_push()
        assert (await c.call("tx.build", order()))["unsigned_tx_hex"] == (result["unsigned_tx_hex"])


async def test_error_push_when_unbuildable_and_back() -> None:
    snap = snapshot_of(standard_pools())
    async with running(snap) as server, client(server) as c:
        sub, _ = await first_tx(c, order())
        a_pools = snap.pools(TOKEN_A)
        snap.apply_block([p.outpoint for p in a_pools], [], [], height=101)
        push = await c.push()
        assert push["params"]["subscription"] == sub
        assert push["params"]["error"]["code"] == "route_failed"
        # still unbuildable after another change of the token: no second error push
        extra = make_pool(TOKEN_A, 600, 5, "tiny")  # below the tradable reserves
        snap.apply_block([], [live(extra, 102)], [], height=102)
        await c.no_push()
        snap.apply_block([], a_pools, [], height=103)
        push = await c.push()
        assert "result" in push["params"]
        assert await c.call("tx.unsubscribe", {"subscription": sub}) is True
        snap.apply_block([p.outpoint for p in a_pools], [], [], height=104)
        await c.no_push()


async def test_route_subscription_pushes_on_price_moves_only() -> None:
    snap = snapshot_of(standard_pools())
    params = {"sell": TOKEN_A, "buy": BCH, "amount": "20000"}
    async with running(snap) as server, client(server) as c:
        sub = (await c.call("route.subscribe", params))["subscription"]
        first = (await c.push())["params"]["result"]
        assert first == await c.call("quote", params)
        # confirming a pending pool changes the version and height, not the route
        used = first["legs"][0]
        old = snap.pool(OutPoint.from_hex(used["txid"], used["tx_pos"]))
        assert old is not None
        moved = pending_trade(snap, old, old.sats // 2, old.tokens * 2, "half")
        push = await c.push()
        assert push["method"] == "route.update" and push["params"]["subscription"] == sub
        assert push["params"]["result"]["output_amount"] != first["output_amount"]
        confirmed = dataclasses.replace(moved, height=101)
        snap.apply_block([old.outpoint], [confirmed], [moved.outpoint.txid], height=101)
        await c.no_push()


async def test_identical_orders_share_one_routing() -> None:
    snap = snapshot_of(standard_pools())
    async with running(snap) as server, client(server) as a, client(server) as b:
        sa, ra = await first_tx(a, order())
        sb, rb = await first_tx(b, order())
        assert sa != sb and ra == rb
        assert len(server.daemon.subscriptions) == 2
        old = snap.pool(OutPoint.from_hex(*pool_inputs(ra)[0]))
        assert old is not None
        pending_trade(snap, old, old.sats + 500_000, old.tokens * 9 // 10, "shared")
        pa, pb = await a.push(), await b.push()
        assert pa["params"]["result"] == pb["params"]["result"]
        assert (pa["params"]["subscription"], pb["params"]["subscription"]) == (sa, sb)


async def test_slow_subscriber_gets_only_the_latest() -> None:
    # 200 pools and an order using most of them: each push is ~100 kB, so a reader that
    # stops reading fills the socket buffers within a few dozen pushes.
    snap = snapshot_of(even_pools(TOKEN_A, 200, 1_000_000, 50.0, "slow"))
    big = order(amount=40_000_000)
    async with running(snap) as server:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        async with connect(server.url, sock=sock, max_size=None, max_queue=1) as ws:
            c = Client(ws)
            sub, first = await first_tx(c, big)
            assert len(pool_inputs(first)) > 100
            ws.transport.pause_reading()
            (session,) = server.daemon.sessions.values()
            changes = 0
            while session.outbox.replaced < 3 and changes < 200:
                p = snap.pools(TOKEN_A)[changes % 50]
                pending_trade(snap, p, p.sats + 1000, p.tokens - 20, f"slow{changes}")
                changes += 1
                await asyncio.sleep(0.01)
            assert session.outbox.replaced >= 3  # overwritten in its slot, never queued
            ws.transport.resume_reading()
            latest = await c.call("tx.build", big)
            got: list[dict[str, Any]] = []
            while not got or not c.pushes.empty():
                got.append(await c.push())
                await asyncio.sleep(0.1)
            assert len(got) <= changes - session.outbox.replaced
            final = got[-1]["params"]
            assert final["subscription"] == sub
            assert final["result"]["unsigned_tx_hex"] == latest["unsigned_tx_hex"]


async def test_the_loser_of_a_race_gets_a_fresh_transaction() -> None:
    snap = snapshot_of(standard_pools())
    async with running(snap) as server, client(server) as win, client(server) as lose:
        _, mine = await first_tx(win, order(USER, "winner"))
        sub, theirs = await first_tx(lose, order(OTHER, "loser"))
        shared = set(pool_inputs(mine)) & set(pool_inputs(theirs))
        assert shared  # both routes want the same best pools
        confirm(snap, mine, 101)
        push = await lose.push()
        fresh = push["params"]["result"]
        assert push["params"]["subscription"] == sub
        assert not shared & set(pool_inputs(fresh))  # nothing already spent
        tx = Transaction.from_hex(fresh["unsigned_tx_hex"])
        live_now = {(p.txid, p.vout) for p in snap.all_pools()}
        n = len(fresh["route"]["legs"])
        assert all((i.outpoint.txid_hex, i.outpoint.index) in live_now for i in tx.inputs[:n])
        assert int(fresh["expected_output"]) < int(theirs["expected_output"])  # price moved
