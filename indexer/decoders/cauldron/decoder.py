"""The Cauldron decoder: loads what `decode` needs, writes its rows, undoes them, and keeps the
known owners and the live pool snapshot in step with the committed index and the mempool."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from typing import Any

from bch.tx import OutPoint
from indexer.decoders.cauldron.decode import (
    BlockRows,
    CauldronContext,
    EventRow,
    decode_order,
    decode_tx,
    detect_block,
)
from indexer.decoders.cauldron.model import PoolUtxo, SpentKind
from indexer.decoders.cauldron.schema import COMPONENT, MIGRATIONS
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot
from indexer.store.decoder import BlockContext, BlockTx, Decoder
from indexer.store.schema import Migration
from indexer.store.writer import Step, Writer
from protocols.cauldron.contract import REDEEM_SUFFIX
from protocols.cauldron.detect import SUMMON_HEAD, KnownOwners, is_pool_utxo

# The prefilter: a pool spend carries the redeem script's tail, a creation the SUMMON marker,
# and a known owner's un-summoned pool a P2SH32 locking bytecode (`aa20…87`).
PATTERNS: tuple[bytes, ...] = (REDEEM_SUFFIX, SUMMON_HEAD, b"\xaa\x20")

_POOL_COLUMNS = (
    "txid, vout, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens, height, time, "
    "position, via"
)


def _rev(h: bytes) -> bytes:
    """Wire ↔ display order."""
    return h[::-1]


def _outpoint(display_txid: bytes, vout: int) -> OutPoint:
    return OutPoint(_rev(display_txid), vout)


def _live_pool_maker() -> Callable[..., LivePool]:
    """`LivePool` filled slot by slot: a frozen dataclass's `__init__` sets each field through
    `object.__setattr__` by name (a third dearer; one per pool move of a block), if the class
    still has exactly these slots; otherwise its constructor."""
    names = tuple(f.name for f in dataclasses.fields(LivePool))
    if names != (  # pragma: no cover - layout guard
        "outpoint",
        "lineage",
        "owner_pkh",
        "token_id",
        "sats",
        "tokens",
        "height",
    ):
        return LivePool
    slots: dict[str, Any] = dict(vars(LivePool))
    s0, s1, s2, s3, s4, s5, s6 = (slots[n].__set__ for n in names)
    new = object.__new__

    def make(
        outpoint: OutPoint,
        lineage: OutPoint,
        owner_pkh: bytes,
        token_id: str,
        sats: int,
        tokens: int,
        height: int | None,
    ) -> LivePool:
        pool: LivePool = new(LivePool)
        s0(pool, outpoint)
        s1(pool, lineage)
        s2(pool, owner_pkh)
        s3(pool, token_id)
        s4(pool, sats)
        s5(pool, tokens)
        s6(pool, height)
        return pool

    return make


_live_pool = _live_pool_maker()


def to_live(pool: PoolUtxo, confirmed: bool = True) -> LivePool:
    return _live_pool(
        pool.outpoint,
        pool.lineage,
        pool.owner_pkh,
        pool.category[::-1].hex(),
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


class CauldronDecoder(Decoder[CauldronContext, EventRow]):
    """Indexes Cauldron pools (see `indexer.store.decoder.Decoder` for the protocol)."""

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
        # The rows of the block being applied (`prepare` … `committed`): `decode` returns a
        # transaction's event rows; the others, and the pool moves, collect here.
        self._rows: BlockRows | None = None
        # Each token's latest `cauldron_tvl` totals (display-order category → sats, tokens,
        # pools), kept in step by `write` and reloaded by `load` (after any rollback or undo):
        # a block's row is then plain values, not a lookup of the previous row per row.
        self._tvl: dict[bytes, tuple[int, int, int]] = {}

    # --- state ---------------------------------------------------------------------------------

    async def load(self, conn: Writer) -> None:
        self._unflushed = {}  # rolled back with their transaction, if any
        self._rows = None
        owners = await conn.execute_fetchall("SELECT pkh FROM cauldron_owners")
        self.owners = KnownOwners(bytes(r[0]) for r in owners)
        rows = await conn.execute_fetchall(
            f"SELECT {_POOL_COLUMNS} FROM cauldron_pools WHERE spent_height IS NULL"
        )
        tip = await conn.execute_fetchall("SELECT max(height) FROM blocks")
        height = next(iter(tip))[0]
        pools = [_pool_from_row(r) for r in rows]
        self._tvl = {
            bytes(r[0]): (r[1], r[2], r[3]) for r in await conn.execute_fetchall(_LATEST_TVL)
        }
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
        self, conn: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], CauldronContext]:
        overlay, relevant, found = detect_block(txs, self.owners)
        produced = {t.txid for t in relevant}
        # The pools earlier transactions made that this block spends: the confirmed ones are
        # the unspent pool rows (kept in step by `committed` and `load`: no SELECT per block);
        # the others the index never saw (→ their owner).
        confirmed = self._confirmed
        pools: dict[OutPoint, PoolUtxo] = {}
        unknown: dict[OutPoint, bytes] = {}
        for t in relevant:
            inputs = t.view.inputs
            for index, _, owner, _ in found[t.txid][0]:
                op = inputs[index].outpoint
                if op.txid not in produced:
                    p = confirmed.get(op)
                    if p is not None:
                        pools[op] = p
                    else:
                        unknown[op] = owner
        ctx = CauldronContext(block.height, block.time, overlay, self.owners, pools, found)
        self._rows = ctx.rows
        if unknown and block.prevouts is not None:
            # Pools the index never saw (created before the start height, or without SUMMON by
            # an owner not yet known): their state before this spend, from the chain.
            outputs = await block.prevouts(list(unknown))
            for op, owner in unknown.items():
                out = outputs.get(op)
                if out is not None and out.token is not None and is_pool_utxo(out, owner):
                    ctx.outside[op] = PoolUtxo(
                        *(op, op, owner, out.token.category, out.value, out.token.amount),
                        *(-1, 0, -1, "discovered"),
                    )
        return (decode_order(relevant) if len(relevant) > 1 else relevant), ctx

    def decode(self, tx: BlockTx, context: CauldronContext) -> Sequence[EventRow]:
        return decode_tx(tx, context)

    async def write(self, conn: Writer, block: BlockContext, rows: Sequence[EventRow]) -> None:
        """`rows`: the block's `cauldron_events` rows (what `decode` returned); the rest are in
        the block's `BlockRows` (`prepare` made it)."""
        out = self._rows
        if out is None or not (rows or out.owners):
            return  # no thread hop for a block without Cauldron activity
        h, t = block.height, block.time
        created, spent = out.created, out.spent
        unflushed = self._unflushed
        # The created pools' rows come made (`BlockRows.pool_rows`, live); a pool also spent
        # in this block gets its spent columns here.
        for op, made in out.pool_rows.items():
            s = spent.get(op)
            unflushed[op] = made if s is None else _spent_row(made, s, h, t)
        spends: list[tuple[object, ...]] = []
        confirmed = self._confirmed  # (`committed` takes this block's spends out of it)
        for op, s in spent.items():
            if op in created:
                continue  # (its row is whole above)
            row = unflushed.get(op)
            if row is None:  # inserted by an earlier COMMIT: update it, found by its key
                p = confirmed[op]
                spends.append(
                    (s[0][::-1], h, t, s[1], p.height, p.position, op.index, op.txid[::-1])
                )
            else:  # created earlier in this batch: not inserted yet, so insert it spent
                unflushed[op] = _spent_row(row, s, h, t)
        tvl_rows = []
        totals = self._tvl
        for c, d in out.tvl.items():
            key = c[::-1]
            sats, tokens, n = totals.get(key, (0, 0, 0))
            totals[key] = now = (sats + d[0], tokens + d[1], n + d[2])
            tvl_rows.append((key, h, t, *now))
        statements = (
            (_INSERT_EVENT, rows),
            (_INSERT_TRADE, out.trades),
            (_UPSERT_TOKEN, out.tokens),
            (_INSERT_OWNER, [(pkh, h) for pkh in out.owners]),
            (_INSERT_TRADER, out.traders),
            (_INSERT_TVL, tvl_rows),
        )
        # Queued, not awaited: SQLite writes this block while the loop decodes the next (the
        # store collects errors before COMMIT; later statements on `conn` run after these).
        steps: list[Step] = [("need_tx", f"block {h}: no open transaction")]
        if spends:  # pools inserted by an earlier COMMIT; they were read live, so none is lost
            steps.append(("many", _SPEND_POOL, spends, len(spends), f"block {h}: pool spends"))
        steps += [("many", sql, params, None, "") for sql, params in statements if params]
        conn.submit(steps)

    def flush(self, conn: Writer) -> None:
        """Queue the pool rows kept back in this transaction (the store calls it before each
        COMMIT of applied blocks; see `Decoder.flush`)."""
        if self._unflushed:
            rows = list(self._unflushed.values())
            self._unflushed = {}
            conn.submit_many(((_INSERT_POOL, rows),))

    async def undo_to(self, conn: Writer, height: int) -> None:
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
        self, block: BlockContext, rows: Sequence[EventRow], evicted: Collection[bytes]
    ) -> None:
        out, self._rows = self._rows, None
        if out is None:  # (the store calls `prepare` for every block, so never)
            out = BlockRows(block.height, block.time)
        for pkh in out.owners:
            self.owners.add(pkh)
        created, spent = out.created, out.spent
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
        live_pool = _live_pool  # (`to_live`, inline: once per pool a block leaves live)
        for op, p in created.items():
            if op not in spent:
                confirmed[op] = p
                # fmt: off
                added.append(
                    live_pool(
                        op, p.lineage, p.owner_pkh, p.category[::-1].hex(), p.sats, p.tokens,
                        p.height,
                    )
                )
                # fmt: on
        self.snapshot.apply_block(
            removed=removed,
            added=added,
            confirmed_txids=block.txids,
            evicted=evicted,
            height=block.height,
        )

    # --- mempool -------------------------------------------------------------------------------

    async def mempool_add(self, conn: Writer, block: BlockContext, tx: BlockTx) -> bool:
        self._catch_up()
        if self.snapshot.is_pending(tx.txid):
            return True
        ctx = CauldronContext(block.height, block.time, self.owners, self.owners, {})
        found = ctx.detected(tx)
        if found is None or not (found[0] or found[1]):
            return False
        pools = ctx.pools
        for index, _, _, _ in found[0]:
            op = tx.view.inputs[index].outpoint
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
        decode_tx(tx, ctx)
        spent = tuple(ctx.rows.spent)
        created = tuple(to_live(p, confirmed=False) for p in ctx.rows.created.values())
        if not spent and not created:
            return False
        return self.snapshot.add_pending(PendingTx(tx.txid, spent, created))

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        self.snapshot.evict(txids)

    def mempool_txids(self) -> Collection[bytes]:
        return self.snapshot.pending_txids()


def _spent_row(
    row: tuple[object, ...], spend: tuple[bytes, SpentKind], height: int, time: int
) -> tuple[object, ...]:
    """A live `cauldron_pools` row with its spent columns set (a flat tuple display: joining
    starred parts builds a list and three tuples)."""
    # fmt: off
    return (
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9],
        row[10], row[11], spend[0][::-1], height, time, spend[1],
    )
    # fmt: on


_INSERT_POOL = "INSERT INTO cauldron_pools VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
_SPEND_POOL = (
    "UPDATE cauldron_pools SET spent_txid = ?, spent_height = ?, spent_time = ?, "
    "spent_kind = ? WHERE height = ? AND position = ? AND vout = ? AND txid = ? "
    "AND spent_height IS NULL"
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
    "INSERT INTO cauldron_tvl (category, height, time, sats, tokens, pools) VALUES (?,?,?,?,?,?)"
)
# The latest row of every token, one primary-key seek per token (the recursive part walks the
# distinct categories through the key, so no full scan of the table).
_LATEST_TVL = (
    "WITH RECURSIVE cats(category) AS ("
    "SELECT min(category) FROM cauldron_tvl UNION ALL "
    "SELECT (SELECT min(category) FROM cauldron_tvl WHERE category > cats.category) "
    "FROM cats WHERE cats.category IS NOT NULL) "
    "SELECT v.category, v.sats, v.tokens, v.pools FROM cats CROSS JOIN cauldron_tvl v "
    "ON v.category = cats.category AND v.height = "
    "(SELECT max(height) FROM cauldron_tvl WHERE category = cats.category)"
)

Params = Sequence[tuple[object, ...]]


async def _stored_pool(conn: Writer, op: OutPoint) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM cauldron_pools WHERE txid = ? AND vout = ?", (_rev(op.txid), op.index)
    )
    return bool(list(rows))


async def _confirmed(conn: Writer, txid: bytes) -> bool:
    rows = await conn.execute_fetchall(
        "SELECT 1 FROM cauldron_events WHERE txid = ? LIMIT 1", (_rev(txid),)
    )
    return bool(list(rows))
