"""The Cauldron decoder: loads what `decode` needs, writes its rows, undoes them, and keeps the
known owners and the live pool snapshot in step with the committed index and the mempool."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import aiosqlite

from bch.tx import OutPoint
from indexer.decoders.base import BlockContext, BlockTx
from indexer.decoders.cauldron.decode import (
    CauldronContext,
    OwnerOverlay,
    decode_order,
    decode_tx,
    revealed_owners,
)
from indexer.decoders.cauldron.model import (
    OwnerSeen,
    PoolEvent,
    PoolSpent,
    PoolUtxo,
    Row,
    TokenSeen,
    Trade,
    TraderSeen,
)
from indexer.decoders.cauldron.schema import COMPONENT, MIGRATIONS
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot
from indexer.store.db import submit, submit_many
from indexer.store.schema import Migration
from indexer.store.writer import Step
from protocols.cauldron.contract import REDEEM_SUFFIX
from protocols.cauldron.detect import SUMMON_HEAD, KnownOwners, detect, is_pool_utxo

# The prefilter: a pool spend carries the redeem script's tail, a creation the SUMMON marker,
# and a known owner's un-summoned pool a P2SH32 locking bytecode (`aa20…87`).
PATTERNS: tuple[bytes, ...] = (REDEEM_SUFFIX, SUMMON_HEAD, b"\xaa\x20")
_NONE2: tuple[None, None] = (None, None)
_NONE4 = (None, None, None, None)

_POOL_COLUMNS = (
    "txid, vout, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens, height, time, "
    "position, via"
)


def _rev(h: bytes) -> bytes:
    """Wire ↔ display order."""
    return h[::-1]


def _outpoint(display_txid: bytes, vout: int) -> OutPoint:
    return OutPoint(_rev(display_txid), vout)


def to_live(pool: PoolUtxo, confirmed: bool = True) -> LivePool:
    return LivePool(
        pool.outpoint,
        pool.lineage,
        pool.owner_pkh,
        _rev(pool.category).hex(),
        pool.sats,
        pool.tokens,
        pool.height if confirmed else None,
    )


def _from_live(pool: LivePool) -> PoolUtxo:
    return PoolUtxo(
        pool.outpoint,
        pool.lineage,
        pool.owner_pkh,
        pool.category,
        pool.sats,
        pool.tokens,
        -1 if pool.height is None else pool.height,
        0,
        -1,
        "continuation",
    )


def _pool_from_row(r: Any) -> PoolUtxo:
    return PoolUtxo(
        _outpoint(r[0], r[1]),
        _outpoint(r[2], r[3]),
        bytes(r[4]),
        _rev(r[5]),
        r[6],
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
    )


class CauldronDecoder:
    """Indexes Cauldron pools (see `indexer.decoders.base.Decoder` for the protocol)."""

    name = COMPONENT
    migrations: Sequence[Migration] = MIGRATIONS
    patterns: Sequence[bytes] = PATTERNS

    def __init__(self, snapshot: PoolSnapshot | None = None) -> None:
        self.snapshot = snapshot if snapshot is not None else PoolSnapshot()
        self.owners = KnownOwners()
        # The confirmed pools as this decoder's own values: the snapshot's confirmed set (the
        # unspent `cauldron_pools` rows), kept in step by `load` and `committed`, so that a
        # block's spent pools are neither read from SQLite nor converted back from `LivePool`.
        self._confirmed: dict[OutPoint, PoolUtxo] = {}
        # Pool rows created in the open transaction and not yet inserted (`flush` inserts them
        # before COMMIT): a pool spent within the same batch — most pools of a busy token are —
        # is then inserted once, already spent, instead of inserted and updated (its row goes
        # through the live-pool partial indexes and out again).
        self._unflushed: dict[OutPoint, tuple[object, ...]] = {}
        # Bulk mode (`bulk`): `committed` keeps only `_confirmed` and the owners, and the
        # snapshot lags (at `_lag_height`) until `bulk(False)` or a mempool transaction.
        self._bulk = False
        self._lagging = False
        self._lag_height: int | None = None

    # --- state ---------------------------------------------------------------------------------

    async def load(self, conn: aiosqlite.Connection) -> None:
        self._unflushed = {}  # rolled back with their transaction, if any
        owners = await conn.execute_fetchall("SELECT pkh FROM cauldron_owners")
        self.owners = KnownOwners(bytes(r[0]) for r in owners)
        rows = await conn.execute_fetchall(
            f"SELECT {_POOL_COLUMNS} FROM cauldron_pools WHERE spent_height IS NULL"
        )
        tip = await conn.execute_fetchall("SELECT max(height) FROM blocks")
        height = next(iter(tip))[0]
        pools = [_pool_from_row(r) for r in rows]
        self._confirmed = {p.outpoint: p for p in pools}
        self.snapshot.replace_confirmed((to_live(p) for p in pools), height)
        self._lagging = False

    def bulk(self, on: bool) -> None:
        """During a long initial sync nobody reads the snapshot (the router is served after
        it), so `committed` skips it — a `LivePool` per pool move and four dicts per block —
        and leaving bulk mode rebuilds it once from the confirmed pools."""
        self._bulk = on
        if not on:
            self._catch_up()

    def _catch_up(self) -> None:
        if self._lagging:
            live = (to_live(p) for p in self._confirmed.values())
            self.snapshot.replace_confirmed(live, self._lag_height)
            self._lagging = False

    # --- blocks --------------------------------------------------------------------------------

    async def prepare(
        self, conn: aiosqlite.Connection, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], CauldronContext]:
        overlay = OwnerOverlay(self.owners, revealed_owners(t.tx for t in txs))
        activities = {t.txid: detect(t.tx, overlay) for t in txs}
        relevant = [t for t in txs if not activities[t.txid].is_empty]
        produced = {t.txid for t in relevant}
        spent: dict[OutPoint, bytes] = {}  # pool spends of earlier transactions → owner
        for t in relevant:
            for s in activities[t.txid].spends:
                op = t.tx.inputs[s.input_index].outpoint
                if op.txid not in produced:
                    spent[op] = s.owner_pkh
        # The confirmed pools are the unspent pool rows (kept in step by `committed` and
        # `load`): no SELECT per block.
        confirmed = self._confirmed
        pools = {op: p for op in spent if (p := confirmed.get(op)) is not None}
        ctx = CauldronContext(block.height, block.time, overlay, self.owners, pools, activities)
        unknown = [op for op in spent if op not in pools]
        if unknown and block.prevouts is not None:
            # Pools the index never saw (created before the start height, or without SUMMON by
            # an owner not yet known): their state before this spend, from the chain.
            outputs = await block.prevouts(unknown)
            for op in unknown:
                out = outputs.get(op)
                if out is not None and out.token is not None and is_pool_utxo(out, spent[op]):
                    ctx.outside[op] = PoolUtxo(
                        *(op, op, spent[op], out.token.category, out.value, out.token.amount),
                        *(-1, 0, -1, "discovered"),
                    )
        return decode_order(relevant), ctx

    def decode(self, tx: BlockTx, context: CauldronContext) -> Sequence[Row]:
        return decode_tx(tx, context)

    async def write(
        self, conn: aiosqlite.Connection, block: BlockContext, rows: Sequence[Row]
    ) -> None:
        if not rows:
            return  # no thread hop for a block without Cauldron activity
        h, t = block.height, block.time
        created: dict[OutPoint, PoolUtxo] = {}
        spent: dict[OutPoint, PoolSpent] = {}
        events: list[tuple[object, ...]] = []
        trades: list[tuple[object, ...]] = []
        tokens: list[tuple[object, ...]] = []
        owners: list[tuple[object, ...]] = []
        traders: list[tuple[object, ...]] = []
        tvl: dict[bytes, list[int]] = {}  # category (wire) → [Δsats, Δtokens, Δpools]
        for r in rows:  # the most frequent row types first
            if type(r) is PoolEvent:
                txid, seq, position, kind, lineage, owner, category, i, o, bef, aft, fee, n = r
                states: tuple[int | None, ...]  # before, after, then their difference
                if bef is None:
                    states = _NONE2 + (aft or _NONE2) + _NONE2
                elif aft is None:
                    states = bef + _NONE4
                else:  # (PoolEvent.d_sats and d_tokens, without the property calls)
                    states = bef + aft + (aft[0] - bef[0], aft[1] - bef[1])
                events.append(
                    (
                        *(txid[::-1], seq, h, t, position, kind, lineage[0][::-1], lineage[1]),
                        *(owner, category[::-1], i, o, *states, fee, n),
                    )
                )
            elif isinstance(r, PoolUtxo):
                created[r.outpoint] = r
                d = tvl.get(r.category)
                if d is None:
                    d = tvl[r.category] = [0, 0, 0]
                d[0] += r.sats
                d[1] += r.tokens
                d[2] += 1
            elif isinstance(r, PoolSpent):
                spent[r.outpoint] = r
                d = tvl.get(r.category)
                if d is None:
                    d = tvl[r.category] = [0, 0, 0]
                d[0] -= r.sats
                d[1] -= r.tokens
                d[2] -= 1
            elif isinstance(r, Trade):
                trades.append(
                    (
                        *(r.txid[::-1], r.category[::-1], h, t, r.position, r.direction),
                        *(r.sats, r.tokens, r.volume_sats, r.volume_tokens, r.lp_fee),
                        *(r.pools, r.pools_touched),
                    )
                )
            elif isinstance(r, TraderSeen):
                traders.append((r.month, r.pkh, h))
            elif isinstance(r, TokenSeen):
                tokens.append(
                    (
                        *(r.category[::-1], h, t, r.position, r.out_index),
                        *(r.lineage.txid[::-1], r.lineage.index),
                    )
                )
            elif isinstance(r, OwnerSeen):
                owners.append((r.pkh, h))
        unflushed = self._unflushed
        for op, p in created.items():
            s = spent.pop(op, None)
            unflushed[op] = (
                (op.txid[::-1], op.index, p.lineage.txid[::-1], p.lineage.index, p.owner_pkh)
                + (p.category[::-1], p.sats, p.tokens, h, t, p.position, p.via)
                + (_NONE4 if s is None else (s.txid[::-1], h, t, s.kind))
            )
        spends = []
        for op, s in spent.items():
            row = unflushed.get(op)
            if row is None:  # inserted by an earlier COMMIT: update it
                spends.append((s.txid[::-1], h, t, s.kind, op.txid[::-1], op.index))
            else:  # created earlier in this batch: not inserted yet, so insert it spent
                unflushed[op] = (*row[:12], s.txid[::-1], h, t, s.kind)
        tvl_rows = [(c[::-1], h, t, d[0], d[1], d[2]) for c, d in tvl.items()]
        statements = (
            (_INSERT_EVENT, events),
            (_INSERT_TRADE, trades),
            (_UPSERT_TOKEN, tokens),
            (_INSERT_OWNER, owners),
            (_INSERT_TRADER, traders),
            (_INSERT_TVL, tvl_rows),
        )
        # Queued, not awaited: SQLite writes this block while the loop decodes the next (the
        # store collects errors before COMMIT; later statements on `conn` run after these).
        steps: list[Step] = [("need_tx", f"block {h}: no open transaction")]
        if spends:  # pools inserted by an earlier COMMIT; they were read live, so none is lost
            steps.append(("many", _SPEND_POOL, spends, len(spends), f"block {h}: pool spends"))
        steps += [("many", sql, params, None, "") for sql, params in statements if params]
        submit(conn, steps)

    def flush(self, conn: aiosqlite.Connection) -> None:
        """Queue the pool rows kept back in this transaction (the store calls it before each
        COMMIT of applied blocks; see `indexer.decoders.base.Flushing`)."""
        if self._unflushed:
            rows = list(self._unflushed.values())
            self._unflushed = {}
            submit_many(conn, ((_INSERT_POOL, rows),))

    async def undo_to(self, conn: aiosqlite.Connection, height: int) -> None:
        self._unflushed = {}  # (empty: the store commits, flushing, before an undo)
        for table in (
            "cauldron_tvl",
            "cauldron_trader_months",
            "cauldron_owners",
            "cauldron_tokens",
            "cauldron_trades",
            "cauldron_events",
        ):
            await conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))
        await conn.execute(
            "UPDATE cauldron_pools SET spent_txid = NULL, spent_height = NULL, spent_time = NULL,"
            " spent_kind = NULL WHERE spent_height > ?",
            (height,),
        )
        await conn.execute("DELETE FROM cauldron_pools WHERE height > ?", (height,))

    def committed(
        self, block: BlockContext, rows: Sequence[Row], evicted: Collection[bytes]
    ) -> None:
        created: dict[OutPoint, PoolUtxo] = {}
        spent: set[OutPoint] = set()
        for r in rows:
            if type(r) is PoolUtxo:
                created[r.outpoint] = r
            elif type(r) is PoolSpent:
                spent.add(r.outpoint)
            elif type(r) is OwnerSeen:
                self.owners.add(r.pkh)
        confirmed = self._confirmed
        removed = [op for op in spent if op not in created]
        for op in removed:
            confirmed.pop(op, None)
        if self._bulk and not self.snapshot.has_pending:
            for op, p in created.items():
                if op not in spent:
                    confirmed[op] = p
            self._lagging = True
            self._lag_height = block.height
            return
        self._catch_up()
        added = []
        for op, p in created.items():
            if op not in spent:
                confirmed[op] = p
                added.append(to_live(p))
        self.snapshot.apply_block(
            removed=removed,
            added=added,
            confirmed_txids=block.txids,
            evicted=evicted,
            height=block.height,
        )

    # --- mempool -------------------------------------------------------------------------------

    async def mempool_add(
        self, conn: aiosqlite.Connection, block: BlockContext, tx: BlockTx
    ) -> bool:
        self._catch_up()
        if self.snapshot.is_pending(tx.txid):
            return True
        act = detect(tx.tx, self.owners)
        if not (act.spends or act.created):
            return False
        pools: dict[OutPoint, PoolUtxo] = {}
        for s in act.spends:
            op = tx.tx.inputs[s.input_index].outpoint
            live = self.snapshot.pool(op)
            if live is not None:
                pools[op] = _from_live(live)
            elif (
                self.snapshot.spent_by_pending(op) is not None
                or op in self._unflushed
                or await _stored_pool(conn, op)
            ):
                return False  # conflicts with a pending tx, or spends a pool already spent
        if await _confirmed(conn, tx.txid):
            return False
        ctx = CauldronContext(block.height, block.time, self.owners, self.owners, pools)
        ctx.activities[tx.txid] = act
        rows = decode_tx(tx, ctx)
        spent = tuple(r.outpoint for r in rows if isinstance(r, PoolSpent))
        created = tuple(to_live(r, confirmed=False) for r in rows if isinstance(r, PoolUtxo))
        if not spent and not created:
            return False
        return self.snapshot.add_pending(PendingTx(tx.txid, spent, created))

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        self.snapshot.evict(txids)

    def mempool_txids(self) -> Collection[bytes]:
        return self.snapshot.pending_txids()


_INSERT_POOL = "INSERT INTO cauldron_pools VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
_SPEND_POOL = (
    "UPDATE cauldron_pools SET spent_txid = ?, spent_height = ?, spent_time = ?, "
    "spent_kind = ? WHERE txid = ? AND vout = ? AND spent_height IS NULL"
)
_INSERT_EVENT = "INSERT INTO cauldron_events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
_INSERT_TRADE = "INSERT INTO cauldron_trades VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
_UPSERT_TOKEN = (
    "INSERT INTO cauldron_tokens VALUES (?,?,?,?,?,?,?) ON CONFLICT (category) DO UPDATE "
    "SET time = excluded.time, position = excluded.position, "
    "out_index = excluded.out_index, first_pool_txid = excluded.first_pool_txid, "
    "first_pool_vout = excluded.first_pool_vout "
    "WHERE excluded.height = cauldron_tokens.height AND (excluded.position, "
    "excluded.out_index) < (cauldron_tokens.position, cauldron_tokens.out_index)"
)
_INSERT_OWNER = "INSERT OR IGNORE INTO cauldron_owners VALUES (?,?)"
_INSERT_TRADER = "INSERT OR IGNORE INTO cauldron_trader_months VALUES (?,?,?)"
_INSERT_TVL = (
    "INSERT INTO cauldron_tvl (category, height, time, sats, tokens, pools) "
    "SELECT ?1, ?2, ?3, coalesce(p.sats, 0) + ?4, coalesce(p.tokens, 0) + ?5, "
    "coalesce(p.pools, 0) + ?6 FROM (SELECT 1) LEFT JOIN ("
    "SELECT sats, tokens, pools FROM cauldron_tvl WHERE category = ?1 "
    "ORDER BY height DESC LIMIT 1) AS p"
)

Params = Sequence[tuple[object, ...]]


async def _stored_pool(conn: aiosqlite.Connection, op: OutPoint) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM cauldron_pools WHERE txid = ? AND vout = ?", (_rev(op.txid), op.index)
    )
    return bool(list(rows))


async def _confirmed(conn: aiosqlite.Connection, txid: bytes) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM cauldron_events WHERE txid = ? LIMIT 1", (_rev(txid),)
    )
    return bool(list(rows))
