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
from protocols.cauldron.contract import REDEEM_SUFFIX
from protocols.cauldron.detect import (
    SUMMON_HEAD,
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
    suffix, head = REDEEM_SUFFIX, SUMMON_HEAD  # the cheap C-level tests first
    for tx in txs:
        for inp in tx.inputs:
            if inp.unlocking.endswith(suffix):
                pkh = pool_spend_pkh(inp.unlocking)
                if pkh is not None:
                    seen.setdefault(pkh)
        for out in tx.outputs:
            if out.locking.startswith(head):
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
    n = len(unlocking)
    sig_len = unlocking[0] if n else 0
    if 9 <= sig_len <= 73 and n in (sig_len + 35, sig_len + 67):
        # The usual shape, two direct pushes: read in place (what `pushes` would return).
        key_len = unlocking[sig_len + 1]
        if key_len == n - sig_len - 2:
            lead = unlocking[sig_len + 2]
            if (key_len == 33 and lead in (2, 3)) or (key_len == 65 and lead == 4):
                return hash160(unlocking[sig_len + 2 :])
            return None
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


_new = tuple.__new__  # a named tuple without its Python-level `__new__`


def month_of(unix_time: int) -> str:
    """UTC calendar month "YYYY-MM"."""
    return _time.strftime("%Y-%m", _time.gmtime(unix_time))


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
    """The rows of one transaction; moves the pools it spends/creates in `ctx.pools`.

    Written for speed (a trade moves up to 50 pools, every one through here): the values are
    named tuples made with `tuple.__new__`, in one pass over the spends and one over the
    creations, each change kept as the fields of its `PoolEvent` after `seq`… until
    `pools_touched`, which is known only at the end.
    """
    act = ctx.activity(btx)
    if act.is_empty:
        return []
    tx, txid, position = btx.tx, btx.txid, btx.position
    height, time = ctx.height, ctx.time
    inputs, outputs = tx.inputs, tx.outputs
    pools, outside = ctx.pools, ctx.outside
    rows: list[Row] = []
    new_pools: list[PoolUtxo] = []
    # (kind, lineage, owner, category, input, output, before, after, lp_fee) per change.
    changes: list[tuple[object, ...]] = []
    owners: list[bytes] = [s.owner_pkh for s in act.summons]

    for spend in act.spends:
        owner = spend.owner_pkh
        owners.append(owner)
        index = spend.input_index
        op = inputs[index].outpoint
        prev = pools.pop(op, None)
        seen = outside.pop(op, None) if prev is None else None
        if prev is not None:
            rows.append(
                _new(PoolSpent, (op, prev.category, prev.sats, prev.tokens, txid, spend.kind))
            )
        cont = spend.continuation_index
        if spend.kind == "withdraw" or cont is None:
            if prev is None:
                continue  # never a pool we knew (e.g. token-less junk at a pool address)
            kind: EventKind = "withdraw" if spend.kind == "withdraw" else "invalidated"
            held = (prev.sats, prev.tokens)
            changes.append(
                (kind, prev.lineage, prev.owner_pkh, prev.category, index, None, held, None, None)
            )
            continue
        out = outputs[cont]
        token = out.token
        assert token is not None  # detect only hands out FT-carrying outputs
        sats, amount = out.value, token.amount
        new_op = _new(OutPoint, (txid, cont))
        if prev is not None:
            lineage = prev.lineage
            via: PoolVia = "continuation"
            before: tuple[int, int] | None = (prev.sats, prev.tokens)
            kind = classify_change(PoolState(prev.sats, prev.tokens), PoolState(sats, amount))
            fee: int | None = lp_fee(prev.sats, sats)
        else:
            lineage, via, kind = op, "discovered", "discover"
            before = None if seen is None else (seen.sats, seen.tokens)
            fee = None if seen is None else lp_fee(seen.sats, sats)
        category = token.category
        new_pools.append(
            _new(
                PoolUtxo,
                (new_op, lineage, owner, category, sats, amount, height, time, position, via),
            )
        )
        changes.append((kind, lineage, owner, category, index, cont, before, (sats, amount), fee))

    for created in act.created:
        owner = created.owner_pkh
        owners.append(owner)
        index = created.output_index
        out = outputs[index]
        token = out.token
        assert token is not None  # detect only hands out FT-carrying outputs
        new_op = _new(OutPoint, (txid, index))
        sats, amount, category, via_c = out.value, token.amount, token.category, created.via
        new_pools.append(
            _new(
                PoolUtxo,
                (new_op, new_op, owner, category, sats, amount, height, time, position, via_c),
            )
        )
        changes.append(("create", new_op, owner, category, None, index, None, (sats, amount), None))

    emitted, known_before = ctx.emitted_owners, ctx.known_before
    for pkh in owners:
        if pkh not in emitted and pkh not in known_before:
            emitted.add(pkh)
            rows.append(_new(OwnerSeen, (pkh,)))
    for pool in new_pools:
        pools[pool.outpoint] = pool
        rows.append(pool)
        if pool.via != "continuation":
            rows.append(
                _new(TokenSeen, (pool.category, pool.lineage, position, pool.outpoint.index))
            )

    touched = len(changes)
    events = [
        _new(PoolEvent, (txid, seq, position, *change, touched))
        for seq, change in enumerate(changes)
    ]
    rows.extend(events)
    trades = _trades(txid, position, events, touched)
    rows.extend(trades)
    if trades:
        rows.extend(_traders(tx, act, month_of(time)))
    return rows


def _trades(txid: bytes, position: int, events: list[PoolEvent], touched: int) -> list[Trade]:
    """Sum the buys and sells per token (first-appearance order)."""
    sums: dict[bytes, list[int]] = {}  # category → [sats, tokens, vol_sats, vol_tokens, fee, n]
    for e in events:
        kind = e.kind
        if kind != "buy" and kind != "sell" and _side(e) is None:
            continue
        before, after = e.before, e.after
        if before is None or after is None:
            ds = dt = 0
        else:
            ds, dt = after[0] - before[0], after[1] - before[1]
        s = sums.get(e.category)
        if s is None:
            s = sums[e.category] = [0, 0, 0, 0, 0, 0]
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
