"""The lending decoder against the small scenario with the lending extension, configured as
`ladle up` and `ladle index --devnet-ledger` configure it (the mainnet v1 deployment beside the
devnet's v1 and v11): every action, bar/pool state and allowance the ledger records is a row
(with the interest owed at the block time), the reads answer from them, undo is exact, and
migration #2 turns an index written by the old pairing into the one a fresh decode writes."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bch.tx import OutPoint
from devnet.scenario.generator import ScenarioGenerator
from devnet.scenario.lending import LendingExtension
from devnet.service import Devnet
from indexer.cli import add_commands, config_from_args
from indexer.decoders.lending import LendingContext, LendingDecoder, median_time_past
from indexer.decoders.lending.decoder import (
    ActionRow,
    AllowanceCreated,
    AllowanceSpent,
    LoanCreated,
    LoanSpent,
    Row,
    StateRow,
)
from indexer.decoders.lending.schema import MIGRATIONS
from indexer.decoders.oracle import OracleDecoder
from indexer.store import Store
from indexer.store.decoder import BlockTx
from indexer.store.queries_lending import (
    active_loans,
    allowances,
    crankable,
    history,
    loan_history,
    oracle_rate,
    staking_apr,
    state_history,
    stats,
)
from protocols.ledger import Ledger
from protocols.ledger_deployments import configs_from_ledger, lending_configs, rate_feed
from protocols.lending import LendingConfig, allowance_outputs, classify, loan_outputs, v1
from protocols.lending.actions import state_outputs
from protocols.lending.contracts import p2nfth_locking
from protocols.oracle import FeedTable
from tests.devnet.test_scenario import SMALL, devnet_config
from tests.indexer.test_decoder_oracle import dump, index

TABLES = ("lending_loans", "lending_actions", "lending_states", "lending_allowances")
ACTION_KINDS = {"borrow", "add_collateral", "refinance", "delegate", "repay", "redeem"}
ACTION_KINDS |= {"liquidation", "accrue"}


@dataclass(frozen=True)
class LendingChain:
    ledger: Ledger
    part: dict[str, Any]
    blocks: list[bytes]


_CACHE: list[LendingChain] = []


def lending_chain() -> LendingChain:
    if not _CACHE:

        async def run() -> LendingChain:
            net = Devnet(devnet_config())
            await net.start()
            try:
                result = await ScenarioGenerator(net, SMALL, extensions=[LendingExtension()]).run()
                part = result.ledger.extensions["lending"]
                assert isinstance(part, dict)
                blocks = [b.raw for b in net.nodes[0].chain.blocks]
                return LendingChain(result.ledger, part, blocks)
            finally:
                await net.stop()

        _CACHE.append(asyncio.run(run()))
    return _CACHE[0]


@pytest.fixture(scope="module")
def chain() -> LendingChain:
    return lending_chain()


def ladle_up_configs(ledger: Ledger) -> tuple[LendingConfig, ...]:
    """The deployments `ladle index --devnet-ledger` indexes (`ladle up` the same): the mainnet
    v1 one, then the devnet's v1 and v11 — two v1 deployments side by side."""
    parser = argparse.ArgumentParser(prog="ladle")
    add_commands(parser.add_subparsers(dest="command", required=True))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ledger.json"
        path.write_bytes(ledger.dumps())
        lending = config_from_args(parser.parse_args(["index", "--devnet-ledger", str(path)]))
    assert lending.lending == (LendingConfig(), *lending_configs(ledger))  # as `up_config`
    assert [c.version for c in lending.lending] == ["v1", "v1", "v11"]
    return lending.lending


def decoder(chain: LendingChain) -> LendingDecoder:
    return LendingDecoder(ladle_up_configs(chain.ledger))


async def test_rows_equal_the_ledger(chain: LendingChain) -> None:
    records = chain.part["records"]
    store = await index(":memory:", [decoder(chain)], chain.blocks)
    try:
        rows = await store.conn.execute_fetchall(
            "SELECT txid, kind, version, hex(borrower_hash), principal_before, principal_after, "
            "collateral_after, rate_after, loan_ts_after, interest, hex(delegate_hash), height, "
            "time FROM lending_actions ORDER BY height, txid, seq"
        )
        names: tuple[str, ...] = ("txid", "kind", "version", "borrower_hash", "principal_before")
        names += ("principal_after", "collateral_after", "rate_after", "loan_ts_after")
        names += ("interest", "delegate_hash", "height", "time")

        def norm(r: Any) -> tuple[Any, ...]:
            values = dict(zip(names, r, strict=True))
            values["txid"] = bytes(r[0]).hex()
            values["borrower_hash"] = r[3].lower()
            values["delegate_hash"] = r[10].lower() if r[10] else None
            return tuple(values[n] for n in names)

        got = sorted(norm(r) for r in rows)
        want = []
        for e in records:
            if e["kind"] not in ACTION_KINDS:
                continue
            ends = e["kind"] in ("repay", "redeem", "liquidation")
            before = e.get("before", e if ends else None)
            after = None if ends else e
            expected = {
                "txid": e["txid"],
                "kind": e["kind"],
                "version": e["version"],
                "borrower_hash": e["borrower_hash"],
                "principal_before": None if before is None else before["principal"],
                "principal_after": None if after is None else after["principal"],
                "collateral_after": None if after is None else after["collateral"],
                "rate_after": None if after is None else after["rate_bp"],
                "loan_ts_after": None if after is None else after["loan_ts"],
                "interest": e.get("interest"),
                "delegate_hash": e["delegate_hash"],
                "height": e["height"],
                "time": e["time"],
            }
            want.append(tuple(expected[n] for n in names))
        assert got == sorted(want)
        assert {r[1] for r in rows} == ACTION_KINDS

        states = await store.conn.execute_fetchall(
            "SELECT txid, vout, kind, staked, shares, bch_pot, height FROM lending_states"
        )
        assert sorted((bytes(r[0]).hex(), *r[1:]) for r in states) == sorted(
            (e["txid"], e["vout"], e["state"], e["staked"], e["shares"], e["bch_pot"], e["height"])
            for e in records
            if e["kind"] == "state"
        )
        allow = await store.conn.execute_fetchall(
            "SELECT txid, vout, owner_hash, sats, spent_txid FROM lending_allowances"
        )
        claims = {e["spent"]: e["txid"] for e in records if e["kind"] == "claim"}
        assert sorted(
            (bytes(r[0]).hex(), r[1], bytes(r[2]).hex(), r[3], _hex(r[4])) for r in allow
        ) == sorted(
            (
                e["txid"],
                e["vout"],
                e["owner_hash"],
                e["sats"],
                claims.get(f"{e['txid']}:{e['vout']}"),
            )
            for e in records
            if e["kind"] == "allowance"
        )

        # --- the reads ----------------------------------------------------------------------
        active = await active_loans(store.conn, "v11") + await active_loans(store.conn, "v1")
        last = {e["loan"]: e for e in records if "loan" in e}
        assert sorted(x.borrower_hash for x in active) == sorted(
            last[name]["borrower_hash"] for name in chain.part["active"]
        )
        c = next(x for x in active if x.delegate_hash is not None)
        assert c.delegate_hash == last["C"]["delegate_hash"]
        a_hash = last["A"]["borrower_hash"]
        a_hist = await loan_history(store.conn, a_hash)
        assert [x.kind for x in a_hist] == ["borrow", "add_collateral", "refinance", "repay"]
        newest = await history(store.conn, "v1", limit=2)
        all_v1 = await history(store.conn, "v1", limit=200)
        assert (
            newest == all_v1[:2]
            and len(all_v1)
            == 1
            + sum(1 for e in records if e.get("version") == "v1" and e["kind"] in ACTION_KINDS)
            - 1
        )
        heights = [x.height for x in all_v1]
        assert heights == sorted(heights, reverse=True)
        only_a = await history(store.conn, "v1", nfths=[a_hash])
        assert {x.borrower_hash for x in only_a} == {a_hash} and len(only_a) == 4
        with pytest.raises(ValueError):
            await history(store.conn, "v1", limit=201)
        with pytest.raises(ValueError):
            await history(store.conn, "v1", nfths=["ab"])
        e_hash = last["E"]["borrower_hash"]
        left = await allowances(store.conn, e_hash)
        assert [x.sats for x in left] == [
            e["sats"] for e in records if e["kind"] == "allowance" and e["owner_hash"] == e_hash
        ]
        assert await allowances(store.conn, last["F"]["borrower_hash"]) == []  # claimed
        bars = await state_history(store.conn, "bar", 0, 1000)
        assert [b.staked for b in bars] == [
            e["staked"] for e in reversed(records) if e["kind"] == "state" and e["state"] == "bar"
        ]
        since = bars[-1].mtp
        assert all(b.mtp > since for b in await state_history(store.conn, "bar", since))
        with pytest.raises(ValueError):
            await state_history(store.conn, "pool", 0, 1001)
        end = max(b.mtp for b in bars)
        apr = await staking_apr(store.conn, end, end - bars[-1].mtp)
        assert apr["excludes_bch_pot"] is True
        first, top = bars[-1], bars[0]
        growth = (top.staked / top.shares / (first.staked / first.shares) - 1) * 365 * 86_400
        assert apr["bar"] == pytest.approx(growth / (end - first.mtp))
        assert (await staking_apr(store.conn, end, end))["pool"] is None  # no coverage
        with pytest.raises(ValueError):
            await staking_apr(store.conn, end, -1)
        now = max(x.time for x in a_hist) + 400 * 86_400
        crank = await crankable(store.conn, now, 100, None)
        assert {x.reason for x in crank} == {"liquidate"} and len(crank) == len(
            await active_loans(store.conn, "v11")
        )
        assert await crankable(store.conn, now - 400 * 86_400 + 1, 10**9, None) == []
        s = await stats(store.conn, "v11", 45_000, now)
        assert s["loans"] == len(await active_loans(store.conn, "v11"))
        assert s["collateral"] == sum(x.collateral for x in await active_loans(store.conn, "v11"))
        assert s["debt"] == sum(
            x.principal + v1.interest(x.principal, x.rate_bp, now, x.loan_ts)
            for x in await active_loans(store.conn, "v11")
        )
    finally:
        await store.close()


def _hex(b: Any) -> str | None:
    return None if b is None else bytes(b).hex()


async def test_undo_is_exact(chain: LendingChain, tmp_path: Path) -> None:
    full = await index(tmp_path / "a.db", [decoder(chain)], chain.blocks)
    heights = sorted({e["height"] for e in chain.part["records"] if e["height"] is not None})
    cut = heights[len(heights) // 2]  # in the middle of the lending activity
    part = await index(tmp_path / "b.db", [decoder(chain)], chain.blocks[: cut + 1])
    try:
        await full.undo_to(cut)
        assert await dump(full, TABLES) == await dump(part, TABLES)
        for h in range(cut + 1, len(chain.blocks)):
            await full.apply_block(h, chain.blocks[h])
            await part.apply_block(h, chain.blocks[h])
        assert await dump(full, TABLES) == await dump(part, TABLES)
    finally:
        await full.close()
        await part.close()


def test_median_time_past() -> None:
    assert median_time_past([5]) == 5
    assert median_time_past([1, 9, 3]) == 3
    assert median_time_past(range(11)) == 5
    assert median_time_past([1, 2]) == 2  # sorted[n // 2], as nodes compute it


async def test_rate_oracle_updates_are_indexed_and_read_at_a_time(chain: LendingChain) -> None:
    """The scenario's interest-rate oracle, configured as a `rate` feed: one row per recorded
    update (value = bp, sequence = its timestamp); `oracle_rate` answers the value standing at a
    time, with or without naming the feed."""
    feed = rate_feed(chain.part)
    assert feed is not None and feed.layout == "rate"
    store = await index(":memory:", [OracleDecoder(FeedTable([feed]))], chain.blocks)
    try:
        rows = await store.conn.execute_fetchall(
            "SELECT txid, vout, height, oracle_time, sequence, price, use_fee, hex(category), "
            "layout FROM oracle_updates ORDER BY height"
        )
        rates = [e for e in chain.part["records"] if e["kind"] == "rate"]
        assert len(rates) == 3
        assert [(bytes(r[0]).hex(), *r[1:7]) for r in rows] == [
            (
                e["txid"],
                e["vout"],
                e["height"],
                e["timestamp"],
                e["timestamp"],
                e["bp"],
                e["use_fee"],
            )
            for e in rates
        ]
        assert {(r[7].lower(), r[8]) for r in rows} == {(chain.part["rate_oracle"], "rate")}
        for category in (None, chain.part["rate_oracle"]):
            for e in rates:
                got = await oracle_rate(store.conn, e["timestamp"], category)
                assert got is not None and (got.bp, got.time) == (e["bp"], e["timestamp"])
                before = await oracle_rate(store.conn, e["timestamp"] - 1, category)
                earlier = [x for x in rates if x["timestamp"] < e["timestamp"]]
                want = None if not earlier else (earlier[-1]["bp"], earlier[-1]["timestamp"])
                assert (None if before is None else (before.bp, before.time)) == want
        assert await oracle_rate(store.conn, 2**40, "ab" * 32) is None  # another feed: none
        # The lending decoder's configuration names the same rate oracle.
        assert {c.rate_oracle for c in configs_from_ledger(chain.part)} == {feed.category}
    finally:
        await store.close()


# --- migration #2: the old pairing's rows repaired -----------------------------------------


def _old_decode(tx: BlockTx, ctx: LendingContext, configs: Sequence[LendingConfig]) -> list[Row]:
    """`decode_lending_tx` before migration #2: a spent loan went to every deployment of its
    version in turn, so the first one (mainnet v1) read a devnet loan it never re-creates."""
    t = tx.tx
    rows: list[Row] = []
    seq = 0
    for cfg in configs:
        spent = {
            i: loan
            for i, inp in enumerate(t.inputs)
            if (loan := ctx.loans.get(inp.outpoint)) is not None and loan.version == cfg.version
        }
        created = loan_outputs(t, cfg)
        for action in classify(t, cfg, spent, ctx.time, created):
            rows.append(ActionRow(tx.txid, seq, tx.position, action))
            seq += 1
            if action.before is not None:
                rows.append(LoanSpent(action.before.outpoint, tx.txid, action.kind))
                ctx.loans.pop(action.before.outpoint, None)
        for loan in created:
            rows.append(LoanCreated(loan, tx.position))
            ctx.loans[loan.outpoint] = loan
            for h in (loan.borrower_hash, loan.delegate_hash):
                if h is not None and p2nfth_locking(h) not in ctx.owners:
                    ctx.owners[p2nfth_locking(h)] = h
                    ctx.new_owners[p2nfth_locking(h)] = h
        rows += [StateRow(tx.txid, tx.position, s) for s in state_outputs(t, cfg)]
    for inp in t.inputs:
        if inp.outpoint in ctx.allowances:
            rows.append(AllowanceSpent(inp.outpoint, tx.txid))
            ctx.allowances.discard(inp.outpoint)
    for vout, owner in allowance_outputs(t, ctx.owners):
        out = t.outputs[vout]
        tok = out.token
        op = OutPoint(tx.txid, vout)
        category, amount = (None, 0) if tok is None else (tok.category, tok.amount)
        rows.append(AllowanceCreated(op, owner, out.value, category, amount, tx.position))
        ctx.allowances.add(op)
    return rows


class _OldPairing(LendingDecoder):
    migrations = MIGRATIONS[:1]

    def decode(self, tx: BlockTx, context: LendingContext) -> Sequence[Row]:
        return _old_decode(tx, context, self.configs)


async def test_migration_2_repairs_an_index_of_the_old_pairing(
    chain: LendingChain, tmp_path: Path
) -> None:
    configs = ladle_up_configs(chain.ledger)
    path = tmp_path / "old.db"
    a_hash = next(e for e in chain.part["records"] if e.get("loan") == "A")["borrower_hash"]
    fresh = await index(":memory:", [decoder(chain)], chain.blocks)
    try:
        old = await index(path, [_OldPairing(configs)], chain.blocks)
        try:
            # The issue as the old decoder wrote it: A's add_collateral (no owner NFT) read as
            # liquidation + borrow, its refinance (owner NFT present) as repay + borrow.
            old_kinds = [x.kind for x in await loan_history(old.conn, a_hash)]
            assert old_kinds == ["borrow", "liquidation", "borrow", "repay", "borrow", "repay"]
            assert await dump(old, TABLES) != await dump(fresh, TABLES)
        finally:
            await old.close()
        migrated = await Store.open(path, decoders=[decoder(chain)])
        try:
            assert await dump(migrated, TABLES) == await dump(fresh, TABLES)
            kinds = [x.kind for x in await loan_history(migrated.conn, a_hash)]
            assert kinds == ["borrow", "add_collateral", "refinance", "repay"]
        finally:
            await migrated.close()
    finally:
        await fresh.close()
