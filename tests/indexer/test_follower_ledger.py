"""A generated scenario, synced over the devnet's Electrum socket, against the generator's ledger.

The ledger (what the scenario generator says it did) is the oracle. It records every pool state
change as it happened; the index records what an indexer *can* know, per the rules of
docs/index-schema.md: a pool created without SUMMON by an owner not yet revealed is invisible
until its first spend (kind `discover`; the follower fetches the spent output from the server,
so the discovery carries the state before and the deltas, and counts as the trade it is). The
expectations below derive the index's view from the ledger with exactly those rules — written
here from the documentation, not from the decoder — and everything else must match the ledger
figure for figure: every pool UTXO (live and spent), every event, every trade, volumes, value
locked, traders per month, the chain tip, and (through the mempool) the live snapshot.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from devnet.scenario import Ledger
from indexer.store import queries
from protocols.ledger import PoolEvent
from tests.indexer.test_follower_support import SMALL, following, generate, urls

VIA = {"summon": "summon", "withdraw_recreate": "withdraw_recreate", "no_marker": "known_owner"}
NEVER = 1 << 62


def month(t: int) -> str:
    return time.strftime("%Y-%m", time.gmtime(t))


def outpoint(text: str) -> tuple[str, int]:
    txid, vout = text.split(":")
    return txid, int(vout)


@dataclass
class PoolUtxoRow:
    txid: str
    vout: int
    lineage: str
    owner: str
    category: str
    sats: int
    tokens: int
    height: int
    time: int
    via: str
    spent: tuple[str, int, int, str] | None = None  # txid, height, time, kind

    def key(self) -> tuple[Any, ...]:
        return (
            *(self.txid, self.vout, self.lineage, self.owner, self.category),
            *(self.sats, self.tokens, self.height, self.time, self.via, self.spent),
        )


@dataclass
class Expected:
    """The index's view of a ledger."""

    pools: dict[tuple[str, int], PoolUtxoRow] = field(default_factory=dict)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    known: dict[str, bool] = field(default_factory=dict)  # pool_id → the index has seen it
    trades: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)


def pool_row(e: PoolEvent, via: str) -> PoolUtxoRow:
    """The pool UTXO an event creates (a creation, or a trade's continuation)."""
    assert e.after is not None and e.output_index is not None
    assert e.height is not None and e.time is not None
    return PoolUtxoRow(
        txid=e.txid,
        vout=e.output_index,
        lineage=e.pool_id,
        owner=e.owner_pkh,
        category=e.category,
        sats=e.after.sats,
        tokens=e.after.tokens,
        height=e.height,
        time=e.time,
        via=via,
    )


def owner_reveal_heights(ledger: Ledger) -> dict[str, int]:
    """The height at which an indexer learns each owner: a SUMMON marker or any pool spend
    (trade, deposit, withdraw) — the same block counts."""
    via = {p.pool_id: p.created_via for p in ledger.pools}
    first: dict[str, int] = {}
    for e in ledger.events:
        assert e.height is not None
        if e.kind != "create" or via[e.pool_id] == "summon":
            first[e.owner_pkh] = min(first.get(e.owner_pkh, NEVER), e.height)
    return first


def expected_index(ledger: Ledger) -> Expected:
    exp = Expected()
    via = {p.pool_id: p.created_via for p in ledger.pools}
    reveals = owner_reveal_heights(ledger)
    utxo: dict[str, tuple[str, int] | None] = {}
    per_tx: dict[str, list[tuple[Any, ...]]] = {}
    sides: dict[str, list[str]] = {}  # per tx: each event's ledger kind (buy/sell count)

    def event(e: PoolEvent, kind: str, known_before: bool) -> None:
        before = (e.before.sats, e.before.tokens) if e.before and known_before else None
        after = (e.after.sats, e.after.tokens) if e.after else None
        delta = None
        if before is not None and after is not None:
            delta = (after[0] - before[0], after[1] - before[1])
        fee = e.lp_fee if kind in ("buy", "sell", "deposit") else None
        if kind == "discover" and delta is not None:  # the contract's fee: 0.3 % of |Δsats|
            fee = abs(delta[0]) * 3 // 1000
        row = (
            *(e.txid, kind, e.pool_id, e.owner_pkh, e.category, e.height, e.time),
            *(None if kind == "create" else e.input_index, e.output_index, before, after),
            *(delta or (None, None)),
            fee,
        )
        per_tx.setdefault(e.txid, []).append(row)
        sides.setdefault(e.txid, []).append(e.kind)

    for e in ledger.events:
        assert e.height is not None and e.time is not None
        if e.kind == "create":
            assert e.after is not None and e.output_index is not None
            visible = via[e.pool_id] != "no_marker" or reveals.get(e.owner_pkh, NEVER) <= e.height
            pool = ledger.pool(e.pool_id)
            # The ledger's own flag only differs when the owner is revealed in the same block
            # (the ledger counts earlier blocks only; the index counts the whole block).
            if visible != pool.visible_at_creation:
                assert visible and reveals[e.owner_pkh] == e.height, e.pool_id
            new = (e.txid, e.output_index)
            utxo[e.pool_id] = new
            exp.known[e.pool_id] = visible
            if visible:
                exp.pools[new] = pool_row(e, VIA[via[e.pool_id]])
                event(e, "create", False)
            continue
        spent = utxo[e.pool_id]
        assert spent is not None
        known = exp.known[e.pool_id]
        if known:
            kind = "withdraw" if e.kind == "withdraw" else "trade"
            exp.pools[spent].spent = (e.txid, e.height, e.time, kind)
        if e.kind == "withdraw":
            utxo[e.pool_id] = None
            if known:
                event(e, "withdraw", True)
            continue
        assert e.after is not None and e.output_index is not None
        if not known:  # discovered: its lineage is the spent outpoint, which is the pool id
            assert f"{spent[0]}:{spent[1]}" == e.pool_id
        new = (e.txid, e.output_index)
        exp.pools[new] = pool_row(e, "continuation" if known else "discovered")
        utxo[e.pool_id] = new
        exp.known[e.pool_id] = True
        event(e, e.kind if known else "discover", True)

    for txid, rows in per_tx.items():
        exp.events.extend((*r, len(rows)) for r in rows)
        sums: dict[str, list[int]] = {}
        for r, side in zip(rows, sides[txid], strict=True):
            if side in ("buy", "sell"):
                s = sums.setdefault(r[4], [0, 0, 0, 0, 0, 0])
                ds, dt, fee = r[11], r[12], r[13]
                for i, v in enumerate((ds, dt, abs(ds), abs(dt), fee, 1)):
                    s[i] += v
        for category, (ds, dt, vs, vt, fee, n) in sums.items():
            direction = "buy" if ds > 0 or (ds == 0 and dt < 0) else "sell"
            exp.trades[(txid, category)] = (direction, ds, dt, vs, vt, fee, n, len(rows))
    return exp


async def check_against_ledger(conn: Any, ledger: Ledger) -> Expected:
    exp = expected_index(ledger)

    # The chain.
    tip = await queries.index_height(conn)
    assert tip == ledger.chain.tip_height
    [(tip_hash,)] = await conn.execute_fetchall("SELECT hash FROM blocks WHERE height = ?", (tip,))
    assert bytes(tip_hash).hex() == ledger.chain.tip_hash

    # Every pool UTXO the index knows, live or spent.
    rows = await conn.execute_fetchall(
        "SELECT txid, vout, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens, "
        "height, time, via, spent_txid, spent_height, spent_time, spent_kind FROM cauldron_pools"
    )
    got_pools = sorted(
        (
            *(bytes(r[0]).hex(), r[1], f"{bytes(r[2]).hex()}:{r[3]}", bytes(r[4]).hex()),
            *(bytes(r[5]).hex(), *r[6:11]),
            None if r[11] is None else (bytes(r[11]).hex(), *r[12:15]),
        )
        for r in rows
    )
    assert got_pools == sorted(p.key() for p in exp.pools.values())

    # The live pools are the ledger's final pools, UTXO and state.
    live = {
        (p.pool_id, p.txid, p.vout, p.sats, p.tokens) for p in await queries.all_active_pools(conn)
    }
    want_live = set()
    for p in ledger.pools:
        if p.status == "active" and exp.known[p.pool_id]:
            assert p.utxo is not None and p.state is not None
            want_live.add((p.pool_id, *outpoint(p.utxo), p.state.sats, p.state.tokens))
    assert live == want_live
    withdrawn = sum(1 for p in ledger.pools if p.status == "withdrawn" and p.withdrawn_txid)
    active, ended = await queries.contract_counts(conn)
    assert active == len(want_live)
    assert ended == sum(1 for e in exp.events if e[1] == "withdraw") <= withdrawn

    # Every event (a transaction's order is not compared: seq is the index's own).
    rows = await conn.execute_fetchall(
        "SELECT txid, kind, lineage_txid, lineage_vout, owner_pkh, category, height, time, "
        "input_index, output_index, sats_before, tokens_before, sats_after, tokens_after, "
        "d_sats, d_tokens, lp_fee, pools_touched FROM cauldron_events"
    )
    got_events = Counter(
        (
            *(bytes(r[0]).hex(), r[1], f"{bytes(r[2]).hex()}:{r[3]}", bytes(r[4]).hex()),
            *(bytes(r[5]).hex(), r[6], r[7], r[8], r[9]),
            None if r[10] is None else (r[10], r[11]),
            None if r[12] is None else (r[12], r[13]),
            *(r[14], r[15], r[16], r[17]),
        )
        for r in rows
    )
    assert got_events == Counter(exp.events)

    # Trades: the index's rows, and the ledger's own entries wherever every pool was visible.
    rows = await conn.execute_fetchall(
        "SELECT txid, category, height, time, direction, sats, tokens, volume_sats, "
        "volume_tokens, lp_fee, pools, pools_touched FROM cauldron_trades"
    )
    got_trades = {(bytes(r[0]).hex(), bytes(r[1]).hex()): tuple(r[4:]) for r in rows}
    assert got_trades == exp.trades
    ledger_events = Counter(e.txid for e in ledger.events)
    compared = 0
    for t in ledger.trades:
        trade = exp.trades.get((t.txid, t.category))
        if trade is None or trade[-1] != ledger_events[t.txid]:
            continue  # an invisible pool's creation is in it
        assert trade == (
            *(t.direction, t.sats, t.tokens, t.volume_sats, t.volume_tokens),
            *(t.lp_fee, t.pools, t.pools_touched),
        )
        compared += 1
    assert compared >= len(ledger.trades) - 3 and compared > 0

    # Volume figures (the REST query) per token and overall.
    start, end = ledger.chain.start_time - 1, ledger.chain.end_time + 1
    by_token = await queries.volume_by_token(conn, start, end)
    want_volume: dict[str, list[int]] = {}
    for (_, category), row in exp.trades.items():
        v = want_volume.setdefault(category, [0, 0, 0])
        v[0] += row[3]
        v[1] += row[4]
        v[2] += 1
    assert by_token == {c: tuple(v) for c, v in want_volume.items()}
    assert await queries.volume(conn, start, end) == (
        sum(v[0] for v in want_volume.values()),
        sum(v[1] for v in want_volume.values()),
        len(exp.trades),
    )

    # Value locked now, per token: the known live pools' states.
    tvl = {k: (v.sats, v.tokens, v.pools) for k, v in (await queries.value_locked(conn)).items()}
    want_tvl = {p.category: [0, 0, 0] for p in exp.pools.values()}
    for pool_id, _, _, sats, tokens in want_live:
        w = want_tvl[ledger.pool(pool_id).category]
        w[0] += sats
        w[1] += tokens
        w[2] += 1
    assert tvl == {c: tuple(w) for c, w in want_tvl.items()}

    # Tokens seen in pools, and their first pool.
    first = {t.token_id: t for t in await queries.tokens(conn)}
    new_pools = [p for p in exp.pools.values() if p.via != "continuation"]
    assert set(first) == {p.category for p in new_pools}
    for category, token in first.items():
        earliest = min(p.height for p in new_pools if p.category == category)
        candidates = {
            p.lineage for p in new_pools if p.category == category and p.height == earliest
        }
        assert token.first_pool_id in candidates and token.height == earliest

    # Unique trader addresses by month: the funding pkhs of the transactions with a trade row.
    funding = {t.txid: t.funding_pkhs for t in ledger.trades}
    times = {t.txid: t.time for t in ledger.trades}
    want_months: set[tuple[str, str]] = set()
    for txid, _ in exp.trades:
        t_time = times[txid]
        assert t_time is not None
        want_months.update((month(t_time), pkh) for pkh in funding[txid])
    rows = await conn.execute_fetchall("SELECT month, pkh FROM cauldron_trader_months")
    assert {(r[0], bytes(r[1]).hex()) for r in rows} == want_months
    return exp


def check_snapshot(snapshot: Any, ledger: Ledger, exp: Expected) -> None:
    """Live pools = confirmed pools with the ledger's mempool tail applied on top."""
    touched = {e.pool_id for e in ledger.mempool.events}
    assert touched, "the scenario leaves trades in the mempool"
    want = set()
    for p in ledger.pools:
        if p.live_utxo is None or p.live_state is None:
            continue
        if exp.known[p.pool_id] or p.pool_id in touched:
            want.add((p.pool_id, *outpoint(p.live_utxo), p.live_state.sats, p.live_state.tokens))
    got = {(p.pool_id, p.txid, p.vout, p.sats, p.tokens) for p in snapshot.all_pools()}
    assert got == want
    assert {t[::-1].hex() for t in snapshot.pending_txids()} == {
        e.txid for e in ledger.mempool.events
    }
    unconfirmed = {(p.txid, p.vout) for p in snapshot.all_pools() if p.height is None}
    assert unconfirmed == {
        outpoint(p.live_utxo)
        for p in ledger.pools
        if p.pool_id in touched and p.live_utxo is not None and p.live_utxo != p.utxo
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_synced_index_equals_the_scenario_ledger(seed: int) -> None:
    net, result = await generate(SMALL.replace(seed=seed))
    try:
        async with following(urls(net)) as run:
            exp = await check_against_ledger(run.store.conn, result.ledger)
            check_snapshot(run.snapshot, result.ledger, exp)
            # The scenario exercised what the comparison is about.
            kinds = {e[1] for e in exp.events}
            assert {"create", "buy", "sell", "deposit", "withdraw"} <= kinds
            assert len(exp.trades) >= 50
    finally:
        await net.stop()
