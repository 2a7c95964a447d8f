"""Pure Cauldron decoding: from a block's transactions (and the pools they spend) to rows.

Nothing here touches SQLite; `decoder.py` loads the context and writes the rows. The same
`decode_tx` serves blocks and the mempool, so both see a transaction the same way.

Two block-level rules make the result independent of the order of transactions in a block
(blocks are sorted by txid since CTOR, so a trade can come before the pool it spends):

- the owners known while decoding a block are those known before it plus every owner the block
  itself reveals (a SUMMON marker or a pool spend anywhere in it), and
- transactions are decoded parents first (`decode_order`), ties in block order.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from bch.encoding import DecodeError
from bch.hashes import hash160
from bch.script import pushes
from bch.tx import OutPoint, Transaction
from indexer.decoders.base import BlockTx
from indexer.decoders.cauldron.model import (
    Direction,
    EventKind,
    OwnerSeen,
    PoolEvent,
    PoolSpent,
    PoolUtxo,
    PoolVia,
    Row,
    TokenSeen,
    Trade,
    TraderSeen,
)
from protocols.cauldron.detect import (
    CauldronActivity,
    KnownOwners,
    detect,
    parse_summon,
    pool_spend_pkh,
)
from protocols.cauldron.formulas import PoolState, classify_change, lp_fee


class OwnerOverlay(KnownOwners):
    """Known owners plus a block's newly revealed ones, without copying the (large) base."""

    __slots__ = ("_base",)

    def __init__(self, base: KnownOwners, extra: Iterable[bytes] = ()) -> None:
        self._base = base
        super().__init__(pkh for pkh in extra if pkh not in base)

    def owner_of(self, locking: bytes) -> bytes | None:
        return super().owner_of(locking) or self._base.owner_of(locking)

    def __contains__(self, pkh: object) -> bool:
        return super().__contains__(pkh) or pkh in self._base

    def __iter__(self) -> Iterator[bytes]:
        yield from self._base
        yield from super().__iter__()

    def __len__(self) -> int:
        return len(self._base) + super().__len__()


def revealed_owners(txs: Iterable[Transaction]) -> list[bytes]:
    """Owners these transactions reveal: SUMMON markers and pool spends (first-seen order)."""
    seen: dict[bytes, None] = {}
    for tx in txs:
        for inp in tx.inputs:
            pkh = pool_spend_pkh(inp.unlocking)
            if pkh is not None:
                seen.setdefault(pkh)
        for out in tx.outputs:
            pkh = parse_summon(out.locking)
            if pkh is not None:
                seen.setdefault(pkh)
    return list(seen)


def decode_order(txs: Sequence[BlockTx]) -> list[BlockTx]:
    """Parents before children among `txs`, otherwise block order (iterative DFS)."""
    by_txid = {t.txid: t for t in txs}
    done: set[bytes] = set()
    order: list[BlockTx] = []
    for root in txs:
        if root.txid in done:
            continue
        # Stack of (tx, iterator over its in-set parents).
        stack: list[tuple[BlockTx, Iterator[bytes]]] = [(root, _parents(root, by_txid))]
        done.add(root.txid)
        while stack:
            node, parents = stack[-1]
            for parent in parents:
                if parent not in done:
                    done.add(parent)
                    ptx = by_txid[parent]
                    stack.append((ptx, _parents(ptx, by_txid)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _parents(t: BlockTx, by_txid: Mapping[bytes, BlockTx]) -> Iterator[bytes]:
    return iter(
        sorted(
            {i.outpoint.txid for i in t.tx.inputs if i.outpoint.txid in by_txid} - {t.txid},
            key=lambda txid: by_txid[txid].position,
        )
    )


def p2pkh_spender(unlocking: bytes) -> bytes | None:
    """The pkh of a P2PKH spend, read from its unlocking bytecode alone: `<sig> <pubkey>`.

    hash160(pubkey) *is* the spent output's pkh (P2PKH checks exactly that), so the funding
    address of a trade needs no lookup of the output it spends. Shape check only: a P2SH spend
    whose two pushes happen to look like a signature and a public key would be miscounted.
    """
    try:
        items = pushes(unlocking)
    except DecodeError:
        return None
    if len(items) != 2:
        return None
    sig, pubkey = items
    if not ((len(pubkey) == 33 and pubkey[0] in (2, 3)) or (len(pubkey) == 65 and pubkey[0] == 4)):
        return None
    if not 9 <= len(sig) <= 73:  # DER ECDSA + sighash byte, or 64-byte Schnorr + sighash byte
        return None
    return hash160(pubkey)


def month_of(unix_time: int) -> str:
    """UTC calendar month "YYYY-MM"."""
    return _time.strftime("%Y-%m", _time.gmtime(unix_time))


class _Change(NamedTuple):
    """A PoolEvent before its sequence number and the transaction's pool count are known."""

    kind: EventKind
    lineage: OutPoint
    owner_pkh: bytes
    category: bytes
    input_index: int | None = None
    output_index: int | None = None
    before: tuple[int, int] | None = None
    after: tuple[int, int] | None = None
    lp_fee: int | None = None


@dataclass(slots=True)
class CauldronContext:
    """What decoding one block (or one mempool transaction) needs, advanced tx by tx."""

    height: int
    time: int
    owners: KnownOwners  # for `detect`: known before the block + revealed by it
    known_before: KnownOwners  # owners already stored (OwnerSeen is emitted for the others)
    pools: dict[OutPoint, PoolUtxo]  # live pools the candidates may spend
    activities: dict[bytes, CauldronActivity] = field(default_factory=dict)
    # Pool UTXOs the index never saw, read from the chain (`BlockContext.prevouts`): a spend of
    # one is still a `discover`, but with its state before, so with deltas and a trade.
    outside: dict[OutPoint, PoolUtxo] = field(default_factory=dict)
    emitted_owners: set[bytes] = field(default_factory=set)

    def activity(self, btx: BlockTx) -> CauldronActivity:
        act = self.activities.get(btx.txid)
        if act is None:
            act = detect(btx.tx, self.owners)
            self.activities[btx.txid] = act
        return act


def decode_tx(btx: BlockTx, ctx: CauldronContext) -> list[Row]:
    """The rows of one transaction; moves the pools it spends/creates in `ctx.pools`."""
    act = ctx.activity(btx)
    if act.is_empty:
        return []
    tx, txid = btx.tx, btx.txid
    rows: list[Row] = []
    new_pools: list[PoolUtxo] = []
    changes: list[_Change] = []
    owners: list[bytes] = [s.owner_pkh for s in act.summons]

    def new_pool(index: int, lineage: OutPoint | None, owner: bytes, via: PoolVia) -> PoolUtxo:
        out = tx.outputs[index]
        assert out.token is not None  # detect only hands out FT-carrying outputs
        op = OutPoint(txid, index)
        pool = PoolUtxo(
            op,
            lineage or op,
            owner,
            out.token.category,
            out.value,
            out.token.amount,
            ctx.height,
            ctx.time,
            btx.position,
            via,
        )
        new_pools.append(pool)
        return pool

    for spend in act.spends:
        owners.append(spend.owner_pkh)
        op = tx.inputs[spend.input_index].outpoint
        prev = ctx.pools.pop(op, None)
        seen = ctx.outside.pop(op, None) if prev is None else None
        if prev is not None:
            rows.append(PoolSpent(op, prev.category, prev.sats, prev.tokens, txid, spend.kind))
        if spend.kind == "withdraw" or spend.continuation_index is None:
            if prev is None:
                continue  # never a pool we knew (e.g. token-less junk at a pool address)
            kind: EventKind = "withdraw" if spend.kind == "withdraw" else "invalidated"
            changes.append(
                _Change(
                    kind,
                    prev.lineage,
                    prev.owner_pkh,
                    prev.category,
                    input_index=spend.input_index,
                    before=(prev.sats, prev.tokens),
                )
            )
            continue
        via: PoolVia = "continuation" if prev is not None else "discovered"
        lineage = prev.lineage if prev is not None else op
        pool = new_pool(spend.continuation_index, lineage, spend.owner_pkh, via)
        known = prev or seen
        before = None if known is None else (known.sats, known.tokens)
        after = (pool.sats, pool.tokens)
        fee = None
        if prev is None:
            kind = "discover"
            if seen is not None:
                fee = lp_fee(seen.sats, pool.sats)
        else:
            kind = classify_change(PoolState(prev.sats, prev.tokens), PoolState(*after))
            fee = lp_fee(prev.sats, pool.sats)
        changes.append(
            _Change(
                kind,
                lineage,
                pool.owner_pkh,
                pool.category,
                input_index=spend.input_index,
                output_index=pool.outpoint.index,
                before=before,
                after=after,
                lp_fee=fee,
            )
        )

    for created in act.created:
        owners.append(created.owner_pkh)
        pool = new_pool(created.output_index, None, created.owner_pkh, created.via)
        changes.append(
            _Change(
                "create",
                pool.lineage,
                pool.owner_pkh,
                pool.category,
                output_index=pool.outpoint.index,
                after=(pool.sats, pool.tokens),
            )
        )

    for pkh in owners:
        if pkh not in ctx.emitted_owners and pkh not in ctx.known_before:
            ctx.emitted_owners.add(pkh)
            rows.append(OwnerSeen(pkh))
    for pool in new_pools:
        ctx.pools[pool.outpoint] = pool
        rows.append(pool)
        if pool.via != "continuation":
            rows.append(TokenSeen(pool.category, pool.lineage, btx.position, pool.outpoint.index))

    touched = len(changes)
    events = [
        PoolEvent(txid, seq, btx.position, *change, pools_touched=touched)
        for seq, change in enumerate(changes)
    ]
    rows.extend(events)
    trades = _trades(txid, btx.position, events, touched)
    rows.extend(trades)
    if trades:
        rows.extend(_traders(tx, act, month_of(ctx.time)))
    return rows


def _trades(txid: bytes, position: int, events: list[PoolEvent], touched: int) -> list[Trade]:
    """Sum the buys and sells per token (first-appearance order)."""
    sums: dict[bytes, list[int]] = {}  # category → [sats, tokens, vol_sats, vol_tokens, fee, n]
    for e in events:
        if _side(e) is None:
            continue
        ds, dt = e.d_sats or 0, e.d_tokens or 0
        s = sums.setdefault(e.category, [0, 0, 0, 0, 0, 0])
        s[0] += ds
        s[1] += dt
        s[2] += abs(ds)
        s[3] += abs(dt)
        s[4] += e.lp_fee or 0
        s[5] += 1
    trades = []
    for category, (sats, tokens, vs, vt, fee, n) in sums.items():
        direction: Direction = "buy" if sats > 0 or (sats == 0 and tokens < 0) else "sell"
        trades.append(
            Trade(txid, category, position, direction, sats, tokens, vs, vt, fee, n, touched)
        )
    return trades


def _side(e: PoolEvent) -> Direction | None:
    """Whether an event is a buy or a sell: its kind, or for a discovery whose state before is
    known, its deltas' kind."""
    if e.kind in ("buy", "sell"):
        return "buy" if e.kind == "buy" else "sell"
    if e.kind == "discover" and e.before is not None and e.after is not None:
        kind = classify_change(PoolState(*e.before), PoolState(*e.after))
        return kind if kind in ("buy", "sell") else None
    return None


def _traders(tx: Transaction, act: CauldronActivity, month: str) -> list[TraderSeen]:
    """The P2PKH addresses funding a trade: its inputs that are not pool spends."""
    pool_inputs = {s.input_index for s in act.spends}
    seen: dict[bytes, None] = {}
    for i, inp in enumerate(tx.inputs):
        if i in pool_inputs:
            continue
        pkh = p2pkh_spender(inp.unlocking)
        if pkh is not None:
            seen.setdefault(pkh)
    return [TraderSeen(month, pkh) for pkh in seen]
