"""A funding input is refused exactly when it is a pool the trade spends (looked up in the
book, not against every leg), `PoolBook.find` is a search of the book, and a hop's pool bytes
counted by width steps are the sum over legs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.hashes import sha256
from bch.policy import standardness_errors
from bch.script import p2pkh_locking
from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from router.build import build
from router.errors import ErrorCode, RouterError
from router.params import RouterConfig, parse_build_params
from router.pools import BCH, PoolBook
from router.route import Direction
from router.solve.model import _Model
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    funding,
    make_pool,
    standard_book,
)

CONFIG = RouterConfig(fee_address=FEE_WALLET.token_address)


def _build(params: dict[str, Any], book: PoolBook) -> Any:
    return build(book, parse_build_params(params, CONFIG), CONFIG)


def _refusal(params: dict[str, Any], book: PoolBook) -> RouterError | None:
    try:
        _build(params, book)
    except RouterError as exc:
        return exc
    return None


def _as_funding(pool: Any, value: int, token: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**funding("x", value, USER, token), "txid": pool.txid, "vout": pool.vout}


def test_find_is_a_search_of_the_book() -> None:
    book = standard_book()
    for token in (TOKEN_A, TOKEN_B):
        for pool in book.pools(token):
            assert book.find(token, pool.key) is pool
            assert book.find(token, (pool.txid, pool.vout + 1)) is None
        other = TOKEN_B if token == TOKEN_A else TOKEN_A
        assert all(book.find(other, p.key) is None for p in book.pools(token))
    assert book.find("00" * 32, book.pools(TOKEN_A)[0].key) is None
    assert PoolBook([]).find(TOKEN_A, ("00" * 32, 0)) is None


def test_a_pool_the_trade_does_not_spend_may_fund_it() -> None:
    """Refused only when the trade spends it: a pool of the book the route leaves alone is
    (as far as the router can tell) just a coin, as before."""
    book = standard_book()
    order = build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 10**7)])
    used = {leg.pool.key for leg in _build(order, book).route.legs}
    spare = next(p for p in book.pools(TOKEN_A) if p.key not in used)
    other_token = book.pools(TOKEN_B)[0]
    for pool in (spare, other_token):
        params = build_params(BCH, TOKEN_A, 3_000_000, [_as_funding(pool, 10**7)])
        result = _build(params, book)
        assert {leg.pool.key for leg in result.route.legs} == used
        spent = result.tx.inputs[-1].outpoint
        assert (spent.txid_hex, spent.index) == pool.key


@pytest.mark.parametrize("hop", [0, 1])
def test_a_pool_of_either_hop_offered_as_funding_is_refused(hop: int) -> None:
    book = standard_book()
    tokens = {"category": TOKEN_A, "amount": str(10**9)}
    plain = [funding("t", 10**6, USER, tokens), funding("f", 10**7)]
    order = build_params(TOKEN_A, TOKEN_B, 10**8, plain)
    route = _build(order, book).route
    spent = route.hops[hop].legs[-1].pool
    offered = [*plain, _as_funding(spent, 10**7)]
    error = _refusal(build_params(TOKEN_A, TOKEN_B, 10**8, offered), book)
    assert error is not None and error.code is ErrorCode.BAD_REQUEST
    assert "is pool" in error.message and "funding[2]" in error.message


def test_a_pool_offered_by_a_seller_is_refused() -> None:
    book = standard_book()
    tokens = {"category": TOKEN_B, "amount": str(10**6)}
    plain = [funding("t", 10**6, USER, tokens)]
    route = _build(build_params(TOKEN_B, BCH, 10**5, plain), book).route
    offered = [_as_funding(route.legs[0].pool, 10**6), *plain]
    error = _refusal(build_params(TOKEN_B, BCH, 10**5, offered), book)
    assert error is not None and error.code is ErrorCode.BAD_REQUEST
    assert "funding[0] is pool" in error.message


# --- a hop's pool bytes -----------------------------------------------------------------------


def _pool_bytes(tokens: int) -> int:
    """Input (110) and re-created output (78 + the amount's CompactSize), written out."""
    width = 1 if tokens <= 0xFC else 3 if tokens <= 0xFFFF else 5 if tokens <= 0xFFFFFFFF else 9
    return 110 + 78 + width


_STEPS = [3, 0xFC, 0xFD, 300, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**40, MAX_TOKEN_AMOUNT - 1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(10**6, 10**9), st.sampled_from(_STEPS), st.sampled_from(_STEPS)),
        min_size=1,
        max_size=30,
    )
)
def test_a_hops_pool_bytes_are_the_legs_sum(states: list[tuple[int, int, int]]) -> None:
    """Legs leaving pools at amounts on both sides of every CompactSize width step."""
    pools = [make_pool(TOKEN_A, x, t, f"w{n}") for n, (x, t, _) in enumerate(states)]
    target = {pool.key: after for pool, (_, _, after) in zip(pools, states, strict=True)}
    for direction in Direction:
        m = _Model(pools, direction)
        indices = list(range(len(m)))
        moved = [m.pools[i].tokens - target[m.pools[i].key] for i in indices]  # tokens out
        ones = [1] * len(indices)
        if direction is Direction.BUY:
            chosen = (indices, ones, moved)
        else:
            chosen = (indices, [-y for y in moved], ones)
        hop = m.hop(TOKEN_A, chosen)
        _, _, tokens_after = hop.columns()
        assert list(tokens_after) == [target[m.pools[i].key] for i in indices]
        assert hop.pool_bytes == sum(map(_pool_bytes, tokens_after))


# --- the policy's known-clean unlockings ------------------------------------------------------


def _spending(unlocking: bytes) -> Transaction:
    txin = TxInput(OutPoint(sha256(b"round 9: spent"), 1), unlocking)
    return Transaction(2, (txin,), (TxOutput(10_000, p2pkh_locking(bytes(20))),), 0)


@pytest.mark.parametrize("vm_years", [(2026, 2025), (2025, 2026)])
def test_a_clean_unlocking_is_clean_only_for_its_size_limit(vm_years: tuple[int, int]) -> None:
    """2,000 bytes of pushes: standard under the 2026 limit (10,000), too long before it
    (1,650), whichever year asks first and however often."""
    pushes = bytes([0x4D, 0xD0, 0x07]) + bytes(2_000)  # OP_PUSHDATA2, 2,000 bytes
    tx = _spending(pushes)
    for _ in range(2):
        for year in vm_years:
            reasons = [v.reason for v in standardness_errors(tx, vm_year=year)]
            assert reasons == ([] if year >= 2026 else ["scriptsig-size"])


def test_an_unlocking_with_something_to_report_is_reported_every_time() -> None:
    tx = _spending(bytes([0x51, 0x76]))  # OP_1 OP_DUP: not push-only
    for _ in range(3):
        assert [v.reason for v in standardness_errors(tx)] == ["scriptsig-not-pushonly"]
