"""What the index should say, derived from the scenario generator's ledger and the chain's
block headers alone — never from the index or the API's code.

The index cannot see everything the ledger records: a pool created without a SUMMON marker by
an owner the index does not know yet is invisible until its first trade-path spend, which the
index records as a `discover` (state before unknown, so no trade volume from that pool in that
transaction). The rule (docs/index-schema.md, "Known owners"): while decoding block B the known
owners are those known before B plus every owner B reveals anywhere (a SUMMON marker, a pool
spend, a withdraw re-creation). `Oracle` replays the ledger under that rule.
"""

from __future__ import annotations

import bisect
import datetime
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocols.ledger import Amounts, Ledger, PoolEntry, PoolEvent


@dataclass(frozen=True, slots=True)
class Block:
    height: int
    hash: str
    time: int
    max_time: int
    positions: dict[str, int]  # txid -> index in the block


@dataclass
class Event:
    kind: str  # create, discover, buy, sell, deposit, withdraw
    lineage: str
    category: str
    owner: str
    txid: str
    height: int
    time: int
    position: int
    before: Amounts | None
    after: Amounts | None
    out_index: int | None


@dataclass
class Utxo:
    txid: str
    vout: int
    lineage: str
    owner: str
    category: str
    sats: int
    tokens: int
    height: int
    time: int
    position: int
    spent_height: int | None = None


@dataclass
class Trade:
    txid: str
    category: str
    height: int
    time: int
    position: int
    block_hash: str
    direction: str
    sats: int
    tokens: int
    volume_sats: int
    volume_tokens: int
    lp_fee: int
    pools: int
    pools_touched: int

    @property
    def price(self) -> float:
        return self.volume_sats / self.volume_tokens

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.time, self.height, self.position)


def month(t: int) -> str:
    d = datetime.datetime.fromtimestamp(t, datetime.UTC)
    return f"{d.year:04d}-{d.month:02d}"


@dataclass
class Oracle:
    ledger: Ledger
    blocks: dict[int, Block]
    events: list[Event] = field(default_factory=list)
    utxos: dict[str, Utxo] = field(default_factory=dict)  # "txid:vout" -> state
    trades: list[Trade] = field(default_factory=list)
    traders: set[tuple[str, str]] = field(default_factory=set)  # (month, pkh)
    first_pool: dict[str, tuple[tuple[int, int, int], str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._replay()

    # --- replay ---------------------------------------------------------------------------------

    def _replay(self) -> None:
        pools = {p.pool_id: p for p in self.ledger.pools}
        funders = {t.txid: t.funding_pkhs for t in self.ledger.trades}
        by_height: dict[int, list[PoolEvent]] = defaultdict(list)
        for e in self.ledger.events:
            assert e.height is not None
            by_height[e.height].append(e)
        known: set[str] = set()
        seen: dict[str, str] = {}  # current utxo "txid:vout" -> lineage
        current: dict[str, str] = {}  # lineage -> current utxo
        for height in sorted(by_height):
            block = self.blocks[height]
            evs = sorted(by_height[height], key=lambda e: e.seq)
            revealed = {
                e.owner_pkh
                for e in evs
                if e.kind != "create" or pools[e.pool_id].created_via != "no_marker"
            }
            known_here = known | revealed
            tx_events: dict[str, list[Event]] = defaultdict(list)
            order: list[str] = []
            for e in evs:
                if e.txid not in tx_events:
                    order.append(e.txid)
                pos = block.positions[e.txid]
                made = self._apply(e, pools, known_here, seen, current, block, pos)
                if made is not None:
                    tx_events[e.txid].append(made)
                    if made.kind == "create":
                        known_here.add(made.owner)
            known = known_here
            for txid in order:
                self._trades(txid, tx_events[txid], block, funders.get(txid, ()))

    def _apply(
        self,
        e: PoolEvent,
        pools: Mapping[str, PoolEntry],
        known: set[str],
        seen: dict[str, str],
        current: dict[str, str],
        block: Block,
        pos: int,
    ) -> Event | None:
        t = block.time
        if e.kind == "create":
            via = pools[e.pool_id].created_via
            if via == "no_marker" and e.owner_pkh not in known:
                return None  # invisible until its first spend
            assert e.after is not None and e.output_index is not None
            self._new_utxo(e, e.pool_id, block, pos)
            seen[f"{e.txid}:{e.output_index}"] = e.pool_id
            current[e.pool_id] = f"{e.txid}:{e.output_index}"
            self._first(e.category, (block.height, pos, e.output_index), e.pool_id)
            return Event(
                "create",
                e.pool_id,
                e.category,
                e.owner_pkh,
                e.txid,
                block.height,
                t,
                pos,
                None,
                e.after,
                e.output_index,
            )
        lineage = e.pool_id
        visible = lineage in current
        if e.kind == "withdraw":
            if not visible:
                return None
            self.utxos[current.pop(lineage)].spent_height = block.height
            return Event(
                "withdraw",
                lineage,
                e.category,
                e.owner_pkh,
                e.txid,
                block.height,
                t,
                pos,
                e.before,
                None,
                None,
            )
        assert e.after is not None and e.output_index is not None
        if visible:
            self.utxos[current[lineage]].spent_height = block.height
            kind: str = e.kind
            before = e.before
        else:
            kind, before = "discover", None
            self._first(e.category, (block.height, pos, e.output_index), lineage)
        self._new_utxo(e, lineage, block, pos)
        current[lineage] = f"{e.txid}:{e.output_index}"
        return Event(
            kind,
            lineage,
            e.category,
            e.owner_pkh,
            e.txid,
            block.height,
            t,
            pos,
            before,
            e.after,
            e.output_index,
        )

    def _new_utxo(self, e: PoolEvent, lineage: str, block: Block, pos: int) -> None:
        assert e.after is not None and e.output_index is not None
        self.utxos[f"{e.txid}:{e.output_index}"] = Utxo(
            e.txid,
            e.output_index,
            lineage,
            e.owner_pkh,
            e.category,
            e.after.sats,
            e.after.tokens,
            block.height,
            block.time,
            pos,
        )

    def _first(self, category: str, key: tuple[int, int, int], lineage: str) -> None:
        old = self.first_pool.get(category)
        if old is None or key < old[0]:
            self.first_pool[category] = (key, lineage)

    def _trades(self, txid: str, evs: list[Event], block: Block, funders: tuple[str, ...]) -> None:
        self.events.extend(evs)
        per: dict[str, list[Event]] = defaultdict(list)
        for e in evs:
            if e.kind in ("buy", "sell"):
                per[e.category].append(e)
        for cat, moves in per.items():
            ds = [m.after.sats - m.before.sats for m in moves]  # type: ignore[union-attr]
            dt = [m.after.tokens - m.before.tokens for m in moves]  # type: ignore[union-attr]
            sats, tokens = sum(ds), sum(dt)
            direction = "buy" if sats > 0 or (sats == 0 and tokens < 0) else "sell"
            self.trades.append(
                Trade(
                    txid,
                    cat,
                    block.height,
                    block.time,
                    block.positions[txid],
                    block.hash,
                    direction,
                    sats,
                    tokens,
                    sum(map(abs, ds)),
                    sum(map(abs, dt)),
                    sum(abs(d) * 3 // 1000 for d in ds),
                    len(moves),
                    len(evs),
                )
            )
        if per:
            for pkh in funders:
                self.traders.add((month(block.time), pkh))

    # --- questions ------------------------------------------------------------------------------

    def height_at(self, t: int) -> int | None:
        best = None
        for h in sorted(self.blocks):
            if self.blocks[h].max_time <= t:
                best = h
            else:
                break
        return best

    def utxos_live_at(self, height: int | None = None) -> list[Utxo]:
        h = max(self.blocks) if height is None else height
        return [
            u
            for u in self.utxos.values()
            if u.height <= h and (u.spent_height is None or u.spent_height > h)
        ]

    def tvl(self, category: str | None, height: int | None = None) -> tuple[int, int, int]:
        live = [u for u in self.utxos_live_at(height) if category in (None, u.category)]
        return sum(u.sats for u in live), sum(u.tokens for u in live), len(live)

    def categories(self) -> list[str]:
        return sorted({u.category for u in self.utxos.values()})

    def trades_in(self, start: int, end: int, category: str | None = None) -> list[Trade]:
        return [t for t in self.trades if start <= t.time <= end and category in (None, t.category)]

    def lineage_states(self, lineage: str) -> list[Utxo]:
        return sorted(
            (u for u in self.utxos.values() if u.lineage == lineage),
            key=lambda u: (u.height, u.position, u.vout),
        )

    def withdrawn(self, category: str | None = None) -> int:
        return sum(
            1 for e in self.events if e.kind == "withdraw" and category in (None, e.category)
        )

    def block_max_times(self) -> tuple[list[int], list[int]]:
        hs = sorted(self.blocks)
        return hs, [self.blocks[h].max_time for h in hs]

    def max_time_of(self, height: int) -> int:
        return self.blocks[height].max_time

    def height_index(self, t: int) -> int:
        hs, mts = self.block_max_times()
        i = bisect.bisect_right(mts, t)
        return hs[i - 1] if i else -1


# --- yield (an independent implementation of docs/api.md's APY definition) ---------------------

YEAR = 365 * 86_400


def apy(
    o: Oracle, start: int, end: int, token: str | None = None, pkh: str | None = None
) -> tuple[float, int]:
    """(APY in percent, pool lineages counted) over [start, end]."""
    from decimal import Decimal, localcontext

    def mine(category: str, owner: str) -> bool:
        return token in (None, category) and pkh in (None, owner)

    h0, h1 = o.height_index(start), o.height_index(end)
    if h1 < 0:
        return 0.0, 0

    def locked(h: int) -> tuple[int, set[str]]:
        if h < 0:
            return 0, set()
        live = [u for u in o.utxos_live_at(h) if mine(u.category, u.owner)]
        return sum(u.sats for u in live), {u.lineage for u in live}

    sats0, lineages0 = locked(h0)
    # ∫ sats dt: the level after block h holds from its running max time on.
    area = Decimal(0)
    at, level = start, sats0
    for h in sorted(b for b in o.blocks if h0 < b <= h1):
        t = min(max(o.blocks[h].max_time, start), end)
        area += Decimal(level) * (t - at)
        at, level = t, locked(h)[0]
    area += Decimal(level) * (end - at)
    with localcontext() as ctx:
        ctx.prec = 50
        earned = Decimal(0)
        births = 0
        for e in o.events:
            if not (h0 < e.height <= h1 and mine(e.category, e.owner)):
                continue
            if e.kind in ("create", "discover"):
                births += 1
            if e.kind in ("buy", "sell"):
                assert e.before is not None and e.after is not None
                kb = Decimal(e.before.sats * e.before.tokens)
                ka = Decimal(e.after.sats * e.after.tokens)
                earned += ((ka / kb).sqrt() - 1) * e.before.sats
        pools = len(lineages0) + births
        if area == 0:
            return 0.0, pools
        span = end - start
        growth = (1 + earned / area * span) ** (Decimal(YEAR) / span)
        return float((growth - 1) * 100), pools
