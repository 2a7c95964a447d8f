"""A hand-built Cauldron chain and the ledger it implies, checked row for row against the store.

`Scenario` builds real blocks (coinbase first, then CTOR: sorted by txid) of real transactions:
pool creations with and without SUMMON, buys and sells against one to three pools, token→token
trades, deposits, withdraws (some re-creating a pool), junk outputs at pool addresses, and
transactions in one block spending pools created earlier in the same block. Trades use the
exact contract formulas so every pool transition is one the contract accepts.

`Ledger` is the oracle: it derives the expected table rows from what the scenario *did*
(written independently of the decoder, from the rules in docs/index-schema.md). The other
test_store_* modules reuse `Scenario`, `dump` and `open_store`.
"""

from __future__ import annotations

import copy
import datetime
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bch.block import Block
from bch.hashes import hash160
from bch.keys import PrivateKey
from bch.script import p2pkh_locking, push_data, push_int
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from indexer import index
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from indexer.store.sql import Sql
from protocols.cauldron.contract import pool_locking_bytecode, redeem_script, trade_unlocking
from protocols.cauldron.formulas import (
    PoolState,
    buy_tokens_exact_out,
    is_valid_pool_transition,
    sell_tokens_exact_in,
)

OWNERS = [PrivateKey.from_int(0x1000 + i) for i in range(7)]
TRADERS = [PrivateKey.from_int(0x2000 + i) for i in range(5)]
CATEGORIES = [bytes([0xC0 + i]) * 31 + bytes([i]) for i in range(4)]  # wire order
BITS = 0x207FFFFF
T0 = 1_700_000_000
SPACING = 6 * 86_400 + 777  # about five blocks per month: trader months roll over
NULL_OUTPOINT = OutPoint(bytes(32), 0xFFFFFFFF)

Rows = dict[str, list[tuple[Any, ...]]]


def rev(b: bytes) -> bytes:
    return b[::-1]


# --- the chain -----------------------------------------------------------------------------------


@dataclass
class SimPool:
    """A pool UTXO as it exists on chain (whether or not the index can see it)."""

    outpoint: OutPoint
    owner: int
    category: bytes
    sats: int
    tokens: int


@dataclass
class Op:
    """One pool-related thing a transaction did, in the order the decoder reports it."""

    kind: str  # "create", "trade", "withdraw"
    pool: SimPool | None = None  # the spent pool (trade/withdraw)
    new: SimPool | None = None  # the created/continued pool
    input_index: int | None = None
    summon: bool = False


@dataclass
class TxRecord:
    tx: Transaction
    ops: list[Op]
    summons: list[int]  # owners with a SUMMON marker in this tx
    funders: list[bytes]  # pubkeys of the P2PKH funding inputs


@dataclass
class BuiltBlock:
    height: int
    raw: bytes
    time: int
    records: list[TxRecord]

    @property
    def block(self) -> Block:
        return Block.from_bytes(self.raw)


@dataclass
class Scenario:
    seed: int
    branch: int = 0
    height: int = 0
    prev_hash: bytes = bytes(32)
    time: int = T0
    pools: dict[OutPoint, SimPool] = field(default_factory=dict)
    rng: random.Random = field(init=False)
    ledger: Ledger = field(init=False)
    blocks: list[BuiltBlock] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.ledger = Ledger()

    def fork(self, seed: int) -> Scenario:
        """An independent copy that continues differently (a competing branch)."""
        other = copy.deepcopy(self)
        other.rng = random.Random(seed)
        other.branch = self.branch + 1 + seed % 1000
        return other

    # --- transactions --------------------------------------------------------------------------

    def _funding(self, n: int = 1) -> tuple[list[TxInput], list[bytes]]:
        inputs, pubkeys = [], []
        for _ in range(n):
            key = self.rng.choice(TRADERS)
            sig = self.rng.randbytes(64) + b"\x41"
            op = OutPoint(self.rng.randbytes(32), self.rng.randrange(3))
            inputs.append(TxInput(op, push_data(sig) + push_data(key.public_key)))
            pubkeys.append(key.public_key)
        return inputs, pubkeys

    def _pay(self, sats: int, token: TokenData | None = None) -> TxOutput:
        return TxOutput(sats, p2pkh_locking(self.rng.choice(TRADERS).pkh), token)

    @staticmethod
    def _pool_out(p: SimPool) -> TxOutput:
        return TxOutput(
            p.sats, pool_locking_bytecode(OWNERS[p.owner].pkh), TokenData(p.category, p.tokens)
        )

    def _finish(self, inputs: list[TxInput], outputs: list[TxOutput]) -> Transaction:
        return Transaction.build(inputs, outputs)

    def _new_pool(self, owner: int, category: bytes | None = None) -> SimPool:
        return SimPool(
            OutPoint(bytes(32), 0),
            owner,
            category or self.rng.choice(CATEGORIES),
            self.rng.randrange(100_000, 5_000_000),
            self.rng.randrange(1_000, 10_000_000),
        )

    def create(self, summon: bool, category: bytes | None = None) -> TxRecord:
        owner = self.rng.randrange(len(OWNERS))
        pool = self._new_pool(owner, category)
        inputs, _ = self._funding()
        outputs = [self._pool_out(pool)]
        if summon:
            outputs.append(TxOutput(0, b"\x6a\x06SUMMON\x14" + OWNERS[owner].pkh))
        outputs.append(self._pay(self.rng.randrange(1_000, 50_000)))
        tx = self._finish(inputs, outputs)
        pool.outpoint = OutPoint(tx.txid, 0)
        self.pools[pool.outpoint] = pool
        return TxRecord(tx, [Op("create", new=pool, summon=summon)], [owner] if summon else [], [])

    def trade(self, pools: list[SimPool]) -> TxRecord:
        """Buy or sell against each pool (directions mixed for token→token and arbitrage)."""
        news = []
        payouts = []
        for p in pools:
            state = PoolState(p.sats, p.tokens)
            if self.rng.random() < 0.5:
                d = self.rng.randrange(1, max(2, p.tokens // 5))
                after = PoolState(p.sats + buy_tokens_exact_out(state, d), p.tokens - d)
                payouts.append(self._pay(800, TokenData(p.category, d)))
            else:
                s = self.rng.randrange(1, max(2, p.tokens // 4))
                got = sell_tokens_exact_in(state, s)
                after = PoolState(p.sats - got, p.tokens + s)
                payouts.append(self._pay(max(got, 600)))
            assert is_valid_pool_transition(state, after)
            news.append(SimPool(p.outpoint, p.owner, p.category, after.sats, after.tokens))
        return self._spend_pools(pools, news, payouts, n_funding=self.rng.randrange(1, 3))

    def deposit(self, p: SimPool) -> TxRecord:
        new = SimPool(
            p.outpoint,
            p.owner,
            p.category,
            p.sats + self.rng.randrange(1, 100_000),
            p.tokens + self.rng.randrange(1, 100_000),
        )
        return self._spend_pools([p], [new], [self._pay(2_000)], n_funding=1)

    def _spend_pools(
        self,
        pools: list[SimPool],
        news: list[SimPool],
        payouts: list[TxOutput],
        n_funding: int,
    ) -> TxRecord:
        funding, funders = self._funding(n_funding)
        inputs = [TxInput(p.outpoint, trade_unlocking(OWNERS[p.owner].pkh)) for p in pools]
        tx = self._finish(inputs + funding, [self._pool_out(n) for n in news] + payouts)
        ops = []
        for i, (old, new) in enumerate(zip(pools, news, strict=True)):
            del self.pools[old.outpoint]
            new.outpoint = OutPoint(tx.txid, i)
            self.pools[new.outpoint] = new
            ops.append(Op("trade", pool=old, new=new, input_index=i))
        return TxRecord(tx, ops, [], funders)

    def withdraw(self, p: SimPool, recreate: bool) -> TxRecord:
        key = OWNERS[p.owner]
        unlock = push_data(self.rng.randbytes(64) + b"\x41") + push_data(key.public_key)
        inputs = [TxInput(p.outpoint, unlock + push_data(redeem_script(key.pkh)))]
        outputs = [self._pay(p.sats, TokenData(p.category, p.tokens))]
        new = None
        if recreate:
            new = self._new_pool(p.owner, p.category)
            outputs.append(self._pool_out(new))
        tx = self._finish(inputs, outputs)
        del self.pools[p.outpoint]
        ops = [Op("withdraw", pool=p, input_index=0)]
        if new is not None:
            new.outpoint = OutPoint(tx.txid, 1)
            self.pools[new.outpoint] = new
            ops.append(Op("create", new=new))
        return TxRecord(tx, ops, [], [])

    def junk(self) -> TxRecord:
        """Outputs at a pool address that are not pools: no token, or an NFT."""
        lock = pool_locking_bytecode(OWNERS[self.rng.randrange(len(OWNERS))].pkh)
        nft = TokenData(self.rng.choice(CATEGORIES), 5, NFT(Capability.NONE, b"\x01"))
        inputs, _ = self._funding()
        tx = self._finish(inputs, [TxOutput(5_000, lock), TxOutput(5_000, lock, nft)])
        return TxRecord(tx, [], [], [])

    def action(self) -> TxRecord:
        live = list(self.pools.values())
        r = self.rng.random()
        if not live or r < 0.22:
            return self.create(summon=self.rng.random() < 0.75)
        if r < 0.62:
            by_cat: dict[bytes, list[SimPool]] = {}
            for p in live:
                by_cat.setdefault(p.category, []).append(p)
            cat_pools = self.rng.choice(list(by_cat.values()))
            chosen = self.rng.sample(cat_pools, self.rng.randrange(1, min(3, len(cat_pools)) + 1))
            if len(by_cat) > 1 and self.rng.random() < 0.25:  # token→token
                other = self.rng.choice([v for k, v in by_cat.items() if k != chosen[0].category])
                chosen.append(self.rng.choice(other))
            return self.trade(chosen)
        if r < 0.74:
            return self.deposit(self.rng.choice(live))
        if r < 0.92:
            return self.withdraw(self.rng.choice(live), recreate=self.rng.random() < 0.4)
        return self.junk()

    # --- blocks --------------------------------------------------------------------------------

    def next_block(
        self, actions: int | None = None, records: list[TxRecord] | None = None
    ) -> BuiltBlock:
        """Mine the next block: `actions` random transactions, or exactly `records`."""
        if records is None:
            n = self.rng.randrange(0, 7) if actions is None else actions
            records = [self.action() for _ in range(n)]
        height = self.height + 1
        tag = b"ladle-test" + self.branch.to_bytes(4, "little")
        coinbase = Transaction.build(
            [TxInput(NULL_OUTPOINT, push_int(height) + push_data(tag))],
            [TxOutput(50 * 100_000_000, p2pkh_locking(TRADERS[0].pkh))],
            version=1,
        )
        ordered = sorted((r.tx for r in records), key=lambda t: t.txid)
        self.time += SPACING + self.rng.randrange(-3_000, 3_000)  # block times are not monotonic
        raw = Block.build([coinbase, *ordered], prev_hash=self.prev_hash, time=self.time, bits=BITS)
        built = BuiltBlock(height, raw, self.time, records)
        self.ledger.add_block(built)
        self.height = height
        self.prev_hash = built.block.hash
        self.blocks.append(built)
        return built


def build_chain(seed: int, n_blocks: int, actions: int | None = None) -> Scenario:
    sc = Scenario(seed)
    for _ in range(n_blocks):
        sc.next_block(actions)
    return sc


# --- the oracle ----------------------------------------------------------------------------------


@dataclass
class ExpEvent:
    kind: str
    lineage: OutPoint
    pool: SimPool  # for owner and category
    input_index: int | None = None
    before: SimPool | None = None
    after: SimPool | None = None
    fee: int | None = None


def month(t: int) -> str:
    d = datetime.datetime.fromtimestamp(t, datetime.UTC)
    return f"{d.year:04d}-{d.month:02d}"


@dataclass
class Ledger:
    """The expected table contents, built from what the scenario did."""

    known: set[int] = field(default_factory=set)  # owners the index knows
    max_time: int = 0
    lineage: dict[OutPoint, OutPoint] = field(default_factory=dict)  # visible pool → lineage
    rows: Rows = field(
        default_factory=lambda: {
            t: []
            for t in (
                "blocks",
                "cauldron_pools",
                "cauldron_events",
                "cauldron_trades",
                "cauldron_owners",
                "cauldron_trader_months",
                "cauldron_tvl",
            )
        }
    )
    pools: dict[OutPoint, list[Any]] = field(default_factory=dict)  # cauldron_pools rows
    tokens: dict[bytes, tuple[Any, ...]] = field(default_factory=dict)
    traders: dict[tuple[str, bytes], int] = field(default_factory=dict)
    tvl: dict[bytes, list[int]] = field(default_factory=dict)  # live sats, tokens, pools

    def add_block(self, b: BuiltBlock) -> None:
        block = b.block
        h, t = b.height, b.time
        hdr = block.header
        self.max_time = max(self.max_time, t)
        self.rows["blocks"].append(
            (
                *(h, rev(block.hash), rev(hdr.prev_hash), t, self.max_time),
                *(len(block.txids), hdr.encode()),
            )
        )
        position = {txid: i for i, txid in enumerate(block.txids)}
        revealed = set()
        for rec in b.records:
            revealed.update(rec.summons)
            revealed.update(op.pool.owner for op in rec.ops if op.pool is not None)
        known = self.known | revealed
        for owner in sorted(revealed - self.known, key=lambda o: OWNERS[o].pkh):
            self.rows["cauldron_owners"].append((OWNERS[owner].pkh, h))
        self.known = known
        touched: set[bytes] = set()
        for rec in b.records:  # generation order: parents before children
            self._add_tx(rec, h, t, position[rec.tx.txid], known, touched)
        for cat in sorted(touched):
            sats, tokens, n = self.tvl[cat]
            self.rows["cauldron_tvl"].append((rev(cat), h, t, sats, tokens, n))

    def _tvl(self, cat: bytes, sats: int, tokens: int, n: int, touched: set[bytes]) -> None:
        v = self.tvl.setdefault(cat, [0, 0, 0])
        v[0] += sats
        v[1] += tokens
        v[2] += n
        touched.add(cat)

    def _add_tx(
        self, rec: TxRecord, h: int, t: int, pos: int, known: set[int], touched: set[bytes]
    ) -> None:
        txid = rec.tx.txid
        events: list[ExpEvent] = []
        withdrawn = {op.pool.owner for op in rec.ops if op.kind == "withdraw" and op.pool}
        for op in rec.ops:
            new, old = op.new, op.pool
            if op.kind == "create":
                assert new is not None
                if not (op.summon or new.owner in known):
                    continue  # invisible until first spent
                via = (
                    "summon"
                    if op.summon
                    else "withdraw_recreate"
                    if new.owner in withdrawn
                    else "known_owner"
                )
                self._add_pool(new, new.outpoint, h, t, pos, via, touched)
                self._token(new.category, new.outpoint, h, t, pos, new.outpoint.index)
                events.append(ExpEvent("create", new.outpoint, new, after=new))
                continue
            assert old is not None
            lineage = self.lineage.get(old.outpoint)
            if lineage is not None:
                self._spend(old, txid, h, t, op.kind, touched)
            if op.kind == "withdraw":
                if lineage is not None:
                    events.append(ExpEvent("withdraw", lineage, old, op.input_index, before=old))
                continue
            assert new is not None
            if lineage is None:  # a pool the index never saw: discovered by this spend
                self._add_pool(new, old.outpoint, h, t, pos, "discovered", touched)
                self._token(new.category, old.outpoint, h, t, pos, new.outpoint.index)
                events.append(ExpEvent("discover", old.outpoint, new, op.input_index, after=new))
                continue
            self._add_pool(new, lineage, h, t, pos, "continuation", touched)
            ds, dt = new.sats - old.sats, new.tokens - old.tokens
            if ds > 0 and dt < 0:
                kind = "buy"
            elif ds < 0 and dt > 0:
                kind = "sell"
            else:
                assert ds >= 0 and dt >= 0 and (ds or dt)
                kind = "deposit"
            fee = abs(ds) * 3 // 1000
            events.append(ExpEvent(kind, lineage, new, op.input_index, old, new, fee))
        n = len(events)
        trades: dict[bytes, list[int]] = {}
        for seq, e in enumerate(events):
            before = (e.before.sats, e.before.tokens) if e.before else (None, None)
            after = (e.after.sats, e.after.tokens) if e.after else (None, None)
            d: tuple[int | None, int | None] = (None, None)
            if e.before and e.after:
                d = (e.after.sats - e.before.sats, e.after.tokens - e.before.tokens)
            out_index = e.after.outpoint.index if e.after else None
            self.rows["cauldron_events"].append(
                (
                    *(rev(txid), seq, h, t, pos, e.kind, rev(e.lineage.txid), e.lineage.index),
                    *(OWNERS[e.pool.owner].pkh, rev(e.pool.category), e.input_index, out_index),
                    *before,
                    *after,
                    *d,
                    *(e.fee, n),
                )
            )
            if e.kind in ("buy", "sell"):
                d_sats, d_tokens = d
                assert d_sats is not None and d_tokens is not None and e.fee is not None
                acc = trades.setdefault(e.pool.category, [0, 0, 0, 0, 0, 0])
                for k, v in enumerate((d_sats, d_tokens, abs(d_sats), abs(d_tokens), e.fee, 1)):
                    acc[k] += v
        for cat, (sats, tokens, vs, vt, fee, k) in trades.items():
            direction = "buy" if sats > 0 or (sats == 0 and tokens < 0) else "sell"
            self.rows["cauldron_trades"].append(
                (rev(txid), rev(cat), h, t, pos, direction, sats, tokens, vs, vt, fee, k, n)
            )
        if trades:
            for pubkey in rec.funders:
                self.traders.setdefault((month(t), hash160(pubkey)), h)

    def _add_pool(
        self,
        p: SimPool,
        lineage: OutPoint,
        h: int,
        t: int,
        pos: int,
        via: str,
        touched: set[bytes],
    ) -> None:
        self.lineage[p.outpoint] = lineage
        self.pools[p.outpoint] = [
            rev(p.outpoint.txid),
            p.outpoint.index,
            rev(lineage.txid),
            lineage.index,
            OWNERS[p.owner].pkh,
            rev(p.category),
            p.sats,
            p.tokens,
            h,
            t,
            pos,
            via,
            None,
            None,
            None,
            None,
        ]
        self._tvl(p.category, p.sats, p.tokens, 1, touched)

    def _spend(
        self, p: SimPool, txid: bytes, h: int, t: int, kind: str, touched: set[bytes]
    ) -> None:
        row = self.pools[p.outpoint]
        row[12:16] = [rev(txid), h, t, kind]
        del self.lineage[p.outpoint]
        self._tvl(p.category, -p.sats, -p.tokens, -1, touched)

    def _token(self, cat: bytes, lineage: OutPoint, h: int, t: int, pos: int, out: int) -> None:
        row = (rev(cat), h, t, pos, out, rev(lineage.txid), lineage.index)
        old = self.tokens.get(cat)
        if old is None or (old[1] == h and (pos, out) < (old[3], old[4])):
            self.tokens[cat] = row

    def expected(self) -> Rows:
        out = {k: sorted(v, key=repr) for k, v in self.rows.items()}
        out["cauldron_pools"] = sorted((tuple(r) for r in self.pools.values()), key=repr)
        out["cauldron_tokens"] = sorted(self.tokens.values(), key=repr)
        out["cauldron_trader_months"] = sorted(
            ((m, pkh, h) for (m, pkh), h in self.traders.items()), key=repr
        )
        return out

    def live_pools(self) -> set[tuple[Any, ...]]:
        """(txid display, vout, sats, tokens) of every pool the index should see as live."""
        return {(r[0], r[1], r[6], r[7]) for r in self.pools.values() if r[12] is None}


# --- helpers shared by the store tests -----------------------------------------------------------


async def dump(conn: Sql, tables: Iterable[str] | None = None) -> Rows:
    """Every row of every index table (or of `tables`), sorted: physical order never matters.
    The mempool overlay (`mempool_*`) and the tips heard (`heard_*`) are beside the index, not
    part of it: named only."""
    if tables is None:
        names = await conn.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE 'mempool_%' AND name NOT LIKE 'heard_%'"
        )
        tables = [str(r[0]) for r in names]
    out: Rows = {}
    for table in sorted(tables):
        rows = await conn.execute_fetchall(f"SELECT * FROM {table}")
        out[table] = sorted((tuple(r) for r in rows), key=repr)
    return out


async def open_store(path: str | Path = ":memory:") -> Store:
    return await index.open_store(path, snapshot=PoolSnapshot())


async def apply_all(store: Store, blocks: Iterable[BuiltBlock]) -> None:
    for b in blocks:
        await store.apply_block(b.height, b.raw)


# --- tests ----------------------------------------------------------------------------------------


async def test_ledger_equals_index_row_for_row() -> None:
    sc = build_chain(seed=7, n_blocks=40)
    kinds = {e[5] for e in sc.ledger.rows["cauldron_events"]}
    # The scenario exercises every kind a valid chain can produce.
    assert {"create", "buy", "sell", "deposit", "withdraw", "discover"} <= kinds
    store = await open_store()
    try:
        await apply_all(store, sc.blocks)
        got = await dump(store.conn)
        want = sc.ledger.expected()
        for table, rows in want.items():
            assert got[table] == rows, table
        tip = await store.tip()
        assert tip is not None and tip.height == 40 and tip.hash == sc.prev_hash
    finally:
        await store.close()


async def test_chained_trades_in_one_block_are_ordered_parents_first() -> None:
    """Five trades on one pool in one block: CTOR scatters them, lineage must still chain."""
    sc = Scenario(seed=3)
    sc.next_block(actions=0)
    first = sc.create(summon=True)
    chain = [first]
    pool = first.ops[0].new
    assert pool is not None
    for _ in range(5):
        rec = sc.trade([pool])
        chain.append(rec)
        pool = rec.ops[0].new
        assert pool is not None
    built = sc.next_block(records=chain)
    positions = [built.block.txids.index(r.tx.txid) for r in chain]
    assert positions != sorted(positions)  # CTOR really reordered parents and children
    store = await open_store()
    try:
        await apply_all(store, sc.blocks)
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
        lineages = await store.conn.execute_fetchall(
            "SELECT DISTINCT lineage_txid, lineage_vout FROM cauldron_events"
        )
        assert list(lineages) == [(rev(first.tx.txid), 0)]
    finally:
        await store.close()


async def test_counts_tokens_and_traders_match_the_ledger() -> None:
    sc = build_chain(seed=11, n_blocks=30)
    store = await open_store()
    try:
        await apply_all(store, sc.blocks)
        live = await store.conn.execute_fetchall(
            "SELECT txid, vout, sats, tokens FROM cauldron_pools WHERE spent_height IS NULL"
        )
        assert {tuple(r) for r in live} == sc.ledger.live_pools()
        ended = await store.conn.execute_fetchall(
            "SELECT count(*) FROM cauldron_events WHERE kind = 'withdraw'"
        )
        n_withdraws = sum(1 for e in sc.ledger.rows["cauldron_events"] if e[5] == "withdraw")
        assert list(ended) == [(n_withdraws,)]
        # Value locked now = the sum over the live pools, per token.
        for cat in CATEGORIES:
            mine = [p for p in sc.ledger.pools.values() if p[5] == rev(cat) and p[12] is None]
            rows = await store.conn.execute_fetchall(
                "SELECT sats, tokens, pools FROM cauldron_tvl WHERE category = ? "
                "ORDER BY height DESC LIMIT 1",
                (rev(cat),),
            )
            got = next(iter(rows), (0, 0, 0))
            assert tuple(got) == (sum(p[6] for p in mine), sum(p[7] for p in mine), len(mine))
        # Snapshot = live pools.
        snap = {
            (rev(p.outpoint.txid), p.vout, p.sats, p.tokens) for p in store.snapshot.all_pools()
        }
        assert snap == sc.ledger.live_pools()
    finally:
        await store.close()
