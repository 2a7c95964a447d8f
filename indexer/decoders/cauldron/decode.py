"""Pure Cauldron decoding: from a block's transactions (and the pools they spend) to rows.

Nothing here touches SQLite; `decoder.py` loads the context and writes the rows. The same
`decode_tx` serves blocks and the mempool, so both see a transaction the same way. It goes
from the parsed transaction straight to the statements' parameter tuples (the block path is
what the initial sync pays for, ~110,000 pool moves on the benchmark chain): no value per pool
move is made only to be turned into a row later.

Two block-level rules make the result independent of the order of transactions in a block
(blocks are sorted by txid since CTOR, so a trade can come before the pool it spends):

- the owners known while decoding a block are those known before it plus every owner the block
  itself reveals (a SUMMON marker or a pool spend anywhere in it), and
- transactions are decoded parents first (`decode_order`), ties in block order.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from bch.encoding import DecodeError
from bch.hashes import hash160
from bch.script import pushes
from bch.tx import OutPoint
from indexer.decoders.cauldron.model import PoolUtxo, SpentKind
from indexer.store.decoder import BlockTx
from protocols.cauldron.detect import (
    SUMMON_HEAD,
    CreationTuple,
    KnownOwners,
    SpendTuple,
    classify,
    pool_inputs,
    summon_markers,
)
from protocols.cauldron.formulas import LP_FEE_DEN, LP_FEE_NUM, change_kind, lp_fee


class OwnerOverlay(KnownOwners):
    """Known owners plus a block's newly revealed ones, without copying the (large) base."""

    __slots__ = ("_base",)

    def __init__(self, base: KnownOwners, extra: Iterable[bytes] = ()) -> None:
        self._base = base
        known = base.pkhs  # (a set: one C lookup per owner, not a method call)
        super().__init__([pkh for pkh in extra if pkh not in known])

    def owner_of(self, locking: bytes) -> bytes | None:
        return super().owner_of(locking) or self._base.owner_of(locking)

    def __contains__(self, pkh: object) -> bool:
        return super().__contains__(pkh) or pkh in self._base

    def __iter__(self) -> Iterator[bytes]:
        yield from self._base
        yield from super().__iter__()

    def __len__(self) -> int:
        return len(self._base) + super().__len__()

    @property
    def pkhs(self) -> AbstractSet[bytes]:
        return self._base.pkhs | super().pkhs  # (a copy: the block path never asks)


def decode_order(txs: Sequence[BlockTx], *, full: bool = False) -> list[BlockTx]:
    """Parents before children among `txs`, otherwise block order (iterative DFS). The inputs
    are read from each transaction's view, or with `full` from its full decode (for a decoder
    that decodes its candidates fully anyway: one parse each, not two)."""
    by_txid = {t.txid: t for t in txs}
    done: set[bytes] = set()
    order: list[BlockTx] = []
    for root in txs:
        if root.txid in done:
            continue
        # Stack of (tx, iterator over its in-set parents).
        stack: list[tuple[BlockTx, Iterator[bytes]]] = [(root, _parents(root, by_txid, full))]
        done.add(root.txid)
        while stack:
            node, parents = stack[-1]
            for parent in parents:
                if parent not in done:
                    done.add(parent)
                    ptx = by_txid[parent]
                    stack.append((ptx, _parents(ptx, by_txid, full)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _parents(t: BlockTx, by_txid: Mapping[bytes, BlockTx], full: bool) -> Iterator[bytes]:
    inputs = t.tx.inputs if full else t.view.inputs
    own = t.txid
    parents = [p for i in inputs if (p := i.outpoint.txid) in by_txid and p != own]
    if len(parents) > 1:  # (most candidates have no parent among them, the rest one)
        parents = sorted(set(parents), key=lambda txid: by_txid[txid].position)
    return iter(parents)


# Public key → hash160, for the traders' keys (a trader funds trade after trade with the same
# key; a hash160 costs microseconds): emptied when full.
_PKH_OF_KEY: dict[bytes, bytes] = {}
_PKH_CACHE_SIZE = 1 << 16


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
                key = unlocking[sig_len + 2 :]
                pkh = _PKH_OF_KEY.get(key)
                if pkh is None:
                    if len(_PKH_OF_KEY) >= _PKH_CACHE_SIZE:
                        _PKH_OF_KEY.clear()
                    pkh = _PKH_OF_KEY[key] = hash160(key)
                return pkh
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

# What decoding one transaction uses from `detect`'s passes: its pool spends, its new pools
# and the owners of its SUMMON markers.
Found = tuple[list[SpendTuple], list[CreationTuple], list[bytes]]
# A `cauldron_events` row: the parameters of the decoder's INSERT (hashes in display order).
EventRow = tuple[object, ...]


# UTC day → its month: `strftime` costs microseconds, and every block asks (a day's worth of
# blocks share one entry; one entry a day).
_MONTH_OF_DAY: dict[int, str] = {}


def month_of(unix_time: int) -> str:
    """UTC calendar month "YYYY-MM"."""
    day = unix_time // 86400
    month = _MONTH_OF_DAY.get(day)
    if month is None:
        month = _MONTH_OF_DAY[day] = _time.strftime("%Y-%m", _time.gmtime(unix_time))
    return month


@dataclass(slots=True)
class BlockRows:
    """The rows of a block (or of one mempool transaction), as `decode_tx` builds them: the
    parameter tuples of the decoder's statements, plus the pool moves `write` and `committed`
    settle per block (a pool created and spent within a batch is inserted once, spent)."""

    height: int
    time: int
    trades: list[tuple[object, ...]] = field(default_factory=list)
    traders: list[tuple[object, ...]] = field(default_factory=list)
    tokens: list[tuple[object, ...]] = field(default_factory=list)
    owners: list[bytes] = field(default_factory=list)  # owners first seen (not yet stored)
    created: dict[OutPoint, PoolUtxo] = field(default_factory=dict)  # in creation order
    # Each created pool's `cauldron_pools` row, live (spent columns NULL), made beside its event
    # row from the same display-order hashes (one reversal each), so `write` need not rebuild it
    # from the `PoolUtxo`.
    pool_rows: dict[OutPoint, tuple[object, ...]] = field(default_factory=dict)
    spent: dict[OutPoint, tuple[bytes, SpentKind]] = field(default_factory=dict)  # → (txid, kind)
    tvl: dict[bytes, list[int]] = field(default_factory=dict)  # category → [Δsats, Δtokens, Δn]


@dataclass(slots=True)
class CauldronContext:
    """What decoding one block (or one mempool transaction) needs, advanced tx by tx."""

    height: int
    time: int
    owners: KnownOwners  # for detection: known before the block + revealed by it
    known_before: KnownOwners  # owners already stored (owner rows are made for the others)
    pools: dict[OutPoint, PoolUtxo]  # live pools the candidates may spend
    found: dict[bytes, Found] = field(default_factory=dict)  # txid → detected (see `detected`)
    # Pool UTXOs the index never saw, read from the chain (`BlockContext.prevouts`): a spend of
    # one is still a `discover`, but with its state before, so with deltas and a trade.
    outside: dict[OutPoint, PoolUtxo] = field(default_factory=dict)
    emitted_owners: set[bytes] = field(default_factory=set)
    rows: BlockRows = field(init=False)
    month: str = field(init=False)

    def __post_init__(self) -> None:
        self.rows = BlockRows(self.height, self.time)
        self.month = month_of(self.time)

    def detected(self, btx: BlockTx) -> Found | None:
        """The transaction's Cauldron activity (None: none that makes rows)."""
        found = self.found.get(btx.txid)
        if found is None:
            view = btx.view
            summons = summon_markers(view)
            c = classify(view, pool_inputs(view), summons, self.owners.owner_of)
            if not (c.spends or c.created or summons):
                return None
            found = self.found[btx.txid] = (c.spends, c.created, [pkh for _, pkh in summons])
        return found


def detect_block(
    txs: Sequence[BlockTx], known: KnownOwners
) -> tuple[OwnerOverlay, list[BlockTx], dict[bytes, Found]]:
    """`detect` over a block's candidates in its two passes: the owners known while decoding the
    block (`known` plus those any candidate reveals), the relevant candidates (block order) and
    what each holds."""
    first = []
    for t in txs:
        view = t.view
        # (Most candidates are trades, without a SUMMON: their bytes say so at C speed.)
        summons = summon_markers(view) if t.may_hold(SUMMON_HEAD) else []
        first.append((t, view, pool_inputs(view), summons))
    seen: dict[bytes, None] = {}
    for _, _, inputs, summons in first:
        for _, pkh, _ in inputs:
            seen.setdefault(pkh)
        for _, pkh in summons:
            seen.setdefault(pkh)
    overlay = OwnerOverlay(known, seen)
    owner_of = overlay.owner_of
    relevant: list[BlockTx] = []
    found: dict[bytes, Found] = {}
    for t, view, inputs, summons in first:
        c = classify(view, inputs, summons, owner_of)
        if not c.is_empty or summons:
            relevant.append(t)
            found[t.txid] = (c.spends, c.created, [pkh for _, pkh in summons])
    return overlay, relevant, found


def _tally(
    sums: dict[bytes, list[int]] | None, category: bytes, ds: int, dt: int, fee: int
) -> dict[bytes, list[int]]:
    """Add one pool's buy or sell to its token's sums for the transaction: Δsats, Δtokens,
    |Δsats|, |Δtokens|, LP fee, pools (made on the first trade: most candidates have none)."""
    if sums is None:
        sums = {}
    s = sums.get(category)
    if s is None:
        s = sums[category] = [0, 0, 0, 0, 0, 0]
    s[0] += ds
    s[1] += dt
    s[2] += abs(ds)
    s[3] += abs(dt)
    s[4] += fee
    s[5] += 1
    return sums


def decode_tx(btx: BlockTx, ctx: CauldronContext) -> list[EventRow]:
    """One transaction's `cauldron_events` rows; its other rows and pool moves go to
    `ctx.rows`, and the pools it spends/creates move in `ctx.pools`.

    Written for speed (a trade moves up to 50 pools, every one through here): straight from
    the detected tuples to the statements' parameter tuples, in one pass over the spends and
    one over the creations. `pools_touched`, the last column of every event, is counted first
    so that each event is built once, whole: as one flat tuple display (kept so by `fmt: off`;
    joining starred parts costs three times as much).
    """
    found = ctx.found.get(btx.txid)  # (a block's candidates were all detected in `prepare`)
    if found is None:
        found = ctx.detected(btx)
        if found is None:
            return []
    spends, creations, owners = found
    tx, txid, position = btx.view, btx.txid, btx.position
    height, time, out = ctx.height, ctx.time, ctx.rows
    txid_d = txid[::-1]
    inputs, outputs = tx.inputs, tx.outputs
    pools, outside, spent, tvl = ctx.pools, ctx.outside, out.spent, out.tvl
    created, tokens_rows, pool_rows = out.created, out.tokens, out.pool_rows
    # Every continuation and creation makes an event, and so does a withdraw (or a spend
    # without a valid continuation) of a pool we knew. (A transaction never spends an outpoint
    # twice, nor its own outputs, so its spends do not change this as they go.)
    touched = len(creations)
    for index, spend_kind, _, cont in spends:
        if (cont is not None and spend_kind != "withdraw") or inputs[index].outpoint in pools:
            touched += 1
    events: list[EventRow] = []
    add_event = events.append
    # New pools whose category's TVL entry is settled after the spends' (so that categories
    # enter `tvl`, and its rows the batch, in the same order as when every new pool was).
    later: list[tuple[bytes, int, int]] = []
    sums: dict[bytes, list[int]] | None = None  # trades: category → [Δs, Δt, |Δs|, |Δt|, fee, n]
    owners = list(owners)

    for index, spend_kind, owner, cont in spends:
        owners.append(owner)
        op = inputs[index].outpoint
        prev = pools.pop(op, None)
        if prev is None:  # a pool the index never saw (`outside`: its state before) or junk
            seen = outside.pop(op, None)
            if cont is None or spend_kind == "withdraw":
                continue  # never a pool we knew (e.g. token-less junk at a pool address)
            o = outputs[cont]
            token = o.token
            assert token is not None  # detection only hands out FT-carrying outputs
            sats, amount, category = o.value, token.amount, token.category
            lineage_d, category_d = op[0][::-1], category[::-1]
            if seen is None:
                # fmt: off
                add_event(
                    (
                        txid_d, len(events), height, time, position, "discover", lineage_d,
                        op[1], owner, category_d, index, cont, None, None, sats, amount,
                        None, None, None, touched,
                    )
                )
                # fmt: on
            else:
                bs, bt = seen.sats, seen.tokens
                ds, dt = sats - bs, amount - bt
                fee = lp_fee(bs, sats)
                side = change_kind(ds, dt)
                if side == "buy" or side == "sell":
                    sums = _tally(sums, category, ds, dt, fee)
                # fmt: off
                add_event(
                    (
                        txid_d, len(events), height, time, position, "discover", lineage_d,
                        op[1], owner, category_d, index, cont, bs, bt, sats, amount,
                        ds, dt, fee, touched,
                    )
                )
                # fmt: on
            new_op = _new(OutPoint, (txid, cont))
            pool = _new(
                PoolUtxo,
                (new_op, op, owner, category, sats, amount, height, time, position, "discovered"),
            )
            later.append((category, sats, amount))
            tokens_rows.append((category_d, height, time, position, cont, lineage_d, op[1]))
            pools[new_op] = pool
            created[new_op] = pool
            # fmt: off
            pool_rows[new_op] = (
                txid_d, cont, lineage_d, op[1], owner, category_d, sats, amount, height, time,
                position, "discovered", None, None, None, None,
            )
            # fmt: on
            continue

        spent[op] = (txid, spend_kind)
        d = tvl.get(prev.category)
        if d is None:
            d = tvl[prev.category] = [0, 0, 0]
        bs, bt = prev.sats, prev.tokens
        d[0] -= bs
        d[1] -= bt
        d[2] -= 1
        lineage = prev.lineage
        if cont is None or spend_kind == "withdraw":  # or a trade without a continuation
            # fmt: off
            add_event(
                (
                    txid_d, len(events), height, time, position,
                    "withdraw" if spend_kind == "withdraw" else "invalidated", lineage[0][::-1],
                    lineage[1], prev.owner_pkh, prev.category[::-1], index, None, bs, bt,
                    None, None, None, None, None, touched,
                )
            )
            # fmt: on
            continue
        o = outputs[cont]
        token = o.token
        assert token is not None  # detection only hands out FT-carrying outputs
        sats, amount, category = o.value, token.amount, token.category
        ds, dt = sats - bs, amount - bt
        # `lp_fee`, `change_kind` and `_tally` inline for the trades (most pool moves).
        fee = (ds if ds >= 0 else -ds) * LP_FEE_NUM // LP_FEE_DEN
        if ds > 0 and dt < 0:
            kind: str = "buy"
        elif ds < 0 and dt > 0:
            kind = "sell"
        else:
            kind = change_kind(ds, dt)
        if kind == "buy" or kind == "sell":
            if sums is None:
                sums = {}
            tally = sums.get(category)
            if tally is None:
                tally = sums[category] = [0, 0, 0, 0, 0, 0]
            tally[0] += ds
            tally[1] += dt
            tally[2] += ds if ds >= 0 else -ds
            tally[3] += dt if dt >= 0 else -dt
            tally[4] += fee
            tally[5] += 1
        lineage_d, category_d = lineage[0][::-1], category[::-1]
        # fmt: off
        add_event(
            (
                txid_d, len(events), height, time, position, kind, lineage_d,
                lineage[1], owner, category_d, index, cont, bs, bt, sats, amount,
                ds, dt, fee, touched,
            )
        )
        # fmt: on
        new_op = _new(OutPoint, (txid, cont))
        pool = _new(
            PoolUtxo,
            (
                new_op,
                lineage,
                owner,
                category,
                sats,
                amount,
                height,
                time,
                position,
                "continuation",
            ),
        )
        pools[new_op] = pool
        created[new_op] = pool
        # fmt: off
        pool_rows[new_op] = (
            txid_d, cont, lineage_d, lineage[1], owner, category_d, sats, amount, height, time,
            position, "continuation", None, None, None, None,
        )
        # fmt: on
        if category == prev.category:  # (always on a valid chain: the contract checks it)
            d[0] += sats
            d[1] += amount
            d[2] += 1
        else:
            later.append((category, sats, amount))

    for index, owner, via_c in creations:
        owners.append(owner)
        o = outputs[index]
        token = o.token
        assert token is not None  # detection only hands out FT-carrying outputs
        new_op = _new(OutPoint, (txid, index))
        sats, amount, category = o.value, token.amount, token.category
        category_d = category[::-1]
        pool = _new(
            PoolUtxo,
            (new_op, new_op, owner, category, sats, amount, height, time, position, via_c),
        )
        pools[new_op] = pool
        created[new_op] = pool
        # fmt: off
        pool_rows[new_op] = (
            txid_d, index, txid_d, index, owner, category_d, sats, amount, height, time,
            position, via_c, None, None, None, None,
        )
        # fmt: on
        later.append((category, sats, amount))
        tokens_rows.append((category_d, height, time, position, index, txid_d, index))
        # fmt: off
        add_event(
            (
                txid_d, len(events), height, time, position, "create", txid_d, index, owner,
                category_d, None, index, None, None, sats, amount, None, None, None, touched,
            )
        )
        # fmt: on

    for category, sats, amount in later:
        d = tvl.get(category)
        if d is None:
            d = tvl[category] = [0, 0, 0]
        d[0] += sats
        d[1] += amount
        d[2] += 1

    emitted, known_before = ctx.emitted_owners, ctx.known_before.pkhs
    for pkh in owners:
        if pkh not in emitted and pkh not in known_before:
            emitted.add(pkh)
            out.owners.append(pkh)
    if sums is not None:
        for category, (sats, tokens, vs, vt, fee, n) in sums.items():
            direction = "buy" if sats > 0 or (sats == 0 and tokens < 0) else "sell"
            # fmt: off
            out.trades.append(
                (
                    txid_d, category[::-1], height, time, position, direction,
                    sats, tokens, vs, vt, fee, n, touched,
                )
            )
            # fmt: on
        month = ctx.month
        pool_inputs_ = {s[0] for s in spends}
        traders: dict[bytes, None] = {}
        for i, inp in enumerate(inputs):
            if i not in pool_inputs_:
                funder = p2pkh_spender(inp.unlocking)
                if funder is not None:
                    traders.setdefault(funder)
        out.traders += [(month, funder, height) for funder in traders]
    return events
