"""Routing again only when a change could move the order: a hop's footprint, the best-single
pruning it relies on, and subscriptions that skip unmoved orders, each checked against simply
routing everything again."""

from __future__ import annotations

import math
import os
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from indexer.snapshot import PoolSnapshot
from router.book import LiveBook
from router.errors import RouterError
from router.footprints import footprint_holds
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.pools import BCH, Pool, PoolBook, changed_pools
from router.route import (
    Direction,
    HopFootprint,
    _best_single,
    _single,
    solve_hop,
)
from router.solve.model import _model
from router.subscriptions import Kind, Subscriptions, canonical_params, evaluate
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    build_params,
    even_pools,
    funding,
    make_pool,
)
from tests.router.test_daemon_support import live, pending_trade, snapshot_of

EXAMPLES = int(os.environ.get("ROUTER_EXAMPLES", "40"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONFIG = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)


@st.composite
def near_pools(draw: st.DrawFn, tag: str = "p") -> list[Pool]:
    """4–24 pools whose prices sit within a few percent: routes share them, singles tie."""
    n = draw(st.integers(4, 24))
    price = draw(st.sampled_from([0.01, 1.0, 50.0, 3000.0]))
    pools = []
    for i in range(n):
        sats = draw(st.integers(20_000, 5_000_000))
        p = price * (1 + draw(st.integers(-40, 40)) / 1000)
        pools.append(make_pool(TOKEN_A, sats, max(2, round(sats / p)), f"{tag}{i}", i % 4))
    return pools


def _legs(hop: Any) -> list[tuple[tuple[str, int], int, int]]:
    return [(leg.pool.key, leg.after.sats, leg.after.tokens) for leg in hop.legs]


def _route(book: PoolBook, order: tuple[Direction, bool, int, float, int], trace: list[Any]) -> Any:
    direction, exact_in, amount, fee, cap = order
    try:
        return _legs(
            solve_hop(
                book,
                TOKEN_A,
                direction,
                amount,
                exact_in=exact_in,
                fee_per_byte=fee,
                max_pools=cap,
                trace=trace,
            )
        )
    except RouterError as exc:
        return exc.to_json()


@st.composite
def changed_book(draw: st.DrawFn, pools: list[Pool]) -> list[Pool]:
    """The same pools after 1–3 changes: a trade either way, a pool gone, a new pool."""
    out = list(pools)
    for k in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["scale", "remove", "add"]))
        if what == "add" or len(out) < 2:
            sats = draw(st.integers(20_000, 5_000_000))
            ref = out[0]
            price = ref.sats / ref.tokens * draw(st.floats(0.5, 2.0))
            out.append(make_pool(TOKEN_A, sats, max(2, round(sats / price)), f"new{k}"))
            continue
        i = draw(st.integers(0, len(out) - 1))
        if what == "remove":
            out.pop(i)
            continue
        p = out[i]
        sats = max(700, round(p.sats * draw(st.floats(0.3, 3.0))))
        tokens = max(2, round(p.tokens * draw(st.floats(0.3, 3.0))))
        out[i] = Pool(p.txid, p.vout, p.owner_pkh, p.token_id, sats, tokens)
    return out


orders = st.tuples(
    st.sampled_from(list(Direction)),
    st.booleans(),
    st.floats(1e-6, 0.6),
    st.sampled_from([0.0, 1.0, 3.0]),
    st.sampled_from([3, 500]),
)


@FAST
@given(data=st.data(), pools=near_pools(), spec=orders)
def test_a_footprint_that_holds_means_the_same_route(
    data: st.DataObject, pools: list[Pool], spec: tuple[Direction, bool, float, float, int]
) -> None:
    direction, exact_in, share, fee, cap = spec
    depth = sum(p.sats if (direction is Direction.BUY) == exact_in else p.tokens for p in pools)
    order = (direction, exact_in, max(1, int(depth * share / 4)), fee, cap)
    old = PoolBook(pools, version=1)
    trace: list[HopFootprint] = []
    before = _route(old, order, trace)
    new = PoolBook(data.draw(changed_book(pools)), version=2)
    (fp,) = trace
    holds = footprint_holds(fp, old, new, changed_pools(old, new, TOKEN_A))
    after = _route(new, order, [])
    event("held" if holds else "routed again")
    if holds:
        assert after == before
    if isinstance(before, list) and any(key in fp.used for key, _, _ in before):
        assert fp.used >= {key for key, _, _ in before}


@FAST
@given(
    pools=near_pools(),
    direction=st.sampled_from(list(Direction)),
    exact_in=st.booleans(),
    share=st.floats(1e-7, 0.3),
    fee=st.sampled_from([0.0, 1.0]),
    slack=st.sampled_from([None, 0.0, 0.5, 3.0]),
)
def test_best_single_pruning_matches_trying_every_pool(
    pools: list[Pool],
    direction: Direction,
    exact_in: bool,
    share: float,
    fee: float,
    slack: float | None,
) -> None:
    book = PoolBook(pools)
    m = _model(book, TOKEN_A, direction)
    if not len(m):
        return
    plan = m.plan(fee)
    caps = [m.out_cap(i) for i in range(len(m))]
    amount = max(1, int((sum(m.cap_in) if exact_in else max(caps)) * share))
    v = m.vmax[len(m) // 2] * 0.99
    every = [_single(m, i, amount, exact_in, plan.cost, v, False) for i in range(len(m))]
    values = [c.value for c in every if c is not None]
    best = max(values, default=-math.inf)
    floor = -math.inf if slack is None or best == -math.inf else best - slack
    found = _best_single(m, amount, exact_in, plan, v, floor)
    if best > floor:
        assert found is not None and found.value == best
        first = next(i for i, c in enumerate(every) if c is not None and c.value == best)
        assert found.legs[0][0] == first  # ties: the first pool by rate, whatever the prefix
    else:
        assert found is None


# --- subscriptions -----------------------------------------------------------------------------


def _order(amount: int, side: str = "sell", label: str = "f") -> dict[str, Any]:
    return build_params(BCH, TOKEN_A, amount, [funding(label, 10**11)], side=side)


class Inbox:
    def __init__(self) -> None:
        self.pushes: dict[str, list[bytes]] = {}

    def __call__(self, sub_id: str, message: bytes) -> None:
        self.pushes.setdefault(sub_id, []).append(message)

    def count(self) -> int:
        return sum(len(v) for v in self.pushes.values())


def _subscribe(
    subs: Subscriptions, inbox: Inbox, params: dict[str, Any], kind: Kind = Kind.TX
) -> str:
    request = parse_build_params(params, CONFIG) if kind is Kind.TX else parse_quote_params(params)
    return subs.add(kind, request, canonical_params(params), inbox)


def _market() -> tuple[PoolSnapshot, LiveBook, Subscriptions, Inbox]:
    snap = snapshot_of(even_pools(TOKEN_A, 40, 2_000_000, 50.0, "m"))
    book = LiveBook(snap)
    return snap, book, Subscriptions(book, CONFIG), Inbox()


def _used(subs: Subscriptions, sub_id: str) -> set[tuple[str, int]]:
    group = subs._groups[subs._by_id[sub_id]]
    assert group.footprints
    return set().union(*(fp.used for fp in group.footprints))


def test_a_change_to_a_pool_the_route_uses_pushes() -> None:
    snap, _, subs, inbox = _market()
    sub = _subscribe(subs, inbox, _order(300_000))
    key = sorted(_used(subs, sub))[0]
    old = next(p for p in snap.pools(TOKEN_A) if (p.txid, p.vout) == key)
    pending_trade(snap, old, old.sats + 400_000, old.tokens * 8 // 10, "used")
    assert subs.on_change([TOKEN_A]) == 1
    assert subs.routed == 1 and subs.skipped == 0
    assert len(inbox.pushes[sub]) == 2


def test_a_pool_the_route_cannot_use_is_not_routed_again() -> None:
    snap, book, subs, inbox = _market()
    sub = _subscribe(subs, inbox, _order(300_000))
    route_sub = _subscribe(
        subs, inbox, {"sell": BCH, "buy": TOKEN_A, "amount": "250000"}, Kind.ROUTE
    )
    used = _used(subs, sub) | _used(subs, route_sub)
    # the dearest pool, made dearer still by someone's purchase
    dear = max(
        (p for p in snap.pools(TOKEN_A) if (p.txid, p.vout) not in used),
        key=lambda p: p.sats / p.tokens,
    )
    pending_trade(snap, dear, dear.sats + 100_000, dear.tokens * 9 // 10, "dear")
    assert subs.on_change([TOKEN_A]) == 0
    assert subs.skipped == 2 and subs.routed == 0
    assert inbox.count() == 2  # the first pushes only
    # and it was right: routing everything again gives the same outcome
    for sub_id in (sub, route_sub):
        group = subs._groups[subs._by_id[sub_id]]
        assert evaluate(group.kind, group.request, book.current(), CONFIG)[0] == group.fingerprint


def test_a_pool_that_becomes_better_than_the_route_pushes() -> None:
    snap, _, subs, inbox = _market()
    sub = _subscribe(subs, inbox, _order(300_000))
    used = _used(subs, sub)
    dear = max(
        (p for p in snap.pools(TOKEN_A) if (p.txid, p.vout) not in used),
        key=lambda p: p.sats / p.tokens,
    )
    cheap = pending_trade(snap, dear, dear.sats // 2, dear.tokens * 3, "cheap")  # 1/6 the price
    assert subs.on_change([TOKEN_A]) == 1
    assert subs.routed == 1
    fresh = inbox.pushes[sub][-1]
    assert cheap.txid.encode() in fresh  # the new route trades the pool that got cheap


def test_a_new_book_version_never_reuses_a_stale_prefix() -> None:
    # Caches live per book: the best-single prefix and the pool positions of version 2 see the
    # pool that changed, although version 1's were computed first.
    pools = even_pools(TOKEN_A, 50, 2_000_000, 50.0, "v")
    one = PoolBook(pools, version=1)
    first = solve_hop(
        one, TOKEN_A, Direction.BUY, 2_000, exact_in=True, fee_per_byte=1.0, max_pools=500
    )
    assert len(first.legs) == 1
    loser = min(pools, key=lambda p: p.tokens / p.sats)
    better = Pool(loser.txid, loser.vout, loser.owner_pkh, TOKEN_A, loser.sats, loser.tokens * 2)
    two = PoolBook([better if p is loser else p for p in pools], version=2)
    trace: list[HopFootprint] = []
    second = solve_hop(
        two,
        TOKEN_A,
        Direction.BUY,
        2_000,
        exact_in=True,
        fee_per_byte=1.0,
        max_pools=500,
        trace=trace,
    )
    assert [leg.pool.key for leg in second.legs] == [better.key]
    assert not footprint_holds(trace[0], two, one, changed_pools(two, one, TOKEN_A))


@st.composite
def snapshot_moves(draw: st.DrawFn) -> list[tuple[str, int, float, float]]:
    """A few pending trades: (kind, pool index, sats factor, tokens factor)."""
    moves = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["trade", "trade", "new", "gone"]))
        moves.append(
            (kind, draw(st.integers(0, 39)), draw(st.floats(0.4, 2.5)), draw(st.floats(0.4, 2.5)))
        )
    return moves


@settings(
    max_examples=max(8, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    amounts=st.lists(st.integers(2_000, 3_000_000), min_size=3, max_size=6, unique=True),
    moves=snapshot_moves(),
)
def test_skipping_equals_routing_everyone_again(
    amounts: list[int], moves: list[tuple[str, int, float, float]]
) -> None:
    snap, book, subs, inbox = _market()
    ids = []
    for n, amount in enumerate(amounts):
        side = "buy" if n % 3 == 2 else "sell"
        amt = amount // 50 if side == "buy" else amount
        ids.append((_subscribe(subs, inbox, _order(amt, side, f"s{n}")), Kind.TX))
    ids.append(
        (
            _subscribe(subs, inbox, {"sell": BCH, "buy": TOKEN_A, "amount": "40000"}, Kind.ROUTE),
            Kind.ROUTE,
        )
    )
    for step, (kind, index, fs, ft) in enumerate(moves):
        pools = snap.pools(TOKEN_A)
        old = pools[index % len(pools)]
        if kind == "new":
            fresh = make_pool(TOKEN_A, round(2_000_000 * fs), round(40_000 * ft), f"n{step}")
            snap.apply_block([], [live(fresh, 100 + step)], [], height=100 + step)
        elif kind == "gone" and len(pools) > 2:
            snap.apply_block([old.outpoint], [], [], height=100 + step)
        else:
            pending_trade(
                snap,
                old,
                max(700, round(old.sats * fs)),
                max(2, round(old.tokens * ft)),
                f"t{step}",
            )
        expected = {}
        for sub_id, _ in ids:
            group = subs._groups[subs._by_id[sub_id]]
            fresh_fp, _body = evaluate(group.kind, group.request, book.current(), CONFIG)
            expected[sub_id] = fresh_fp != group.fingerprint
        before = {sub_id: len(inbox.pushes[sub_id]) for sub_id, _ in ids}
        subs.on_change([TOKEN_A])
        for sub_id, _ in ids:
            pushed = len(inbox.pushes[sub_id]) - before[sub_id]
            assert pushed == (1 if expected[sub_id] else 0)
    event(f"skipped {subs.skipped > 0}, routed {subs.routed > 0}")
