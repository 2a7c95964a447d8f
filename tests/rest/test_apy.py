"""APY on a chain built by hand, against figures worked out here from the definition in
docs/api.md; and the pure pieces on simple numbers."""

from __future__ import annotations

import math
from decimal import Decimal, getcontext
from pathlib import Path

import pytest

from indexer.index import open_store
from protocols.cauldron.formulas import (
    PoolState,
    apply_buy_tokens_exact_out,
    apply_sell_tokens_exact_in,
)
from rest.apy import annualise, exposure, fee_growth, income
from rest.config import RestConfig
from tests.rest.chain import CATEGORIES as CATS
from tests.rest.chain import OWNERS, HandChain, display
from tests.rest.conftest import api_client

T0 = 1_750_000_000
DAY = 86_400
YEAR = 365 * DAY


def expected_apy(earned: Decimal, area: Decimal, span: int) -> Decimal:
    getcontext().prec = 50
    return ((1 + earned / area * span) ** (Decimal(YEAR) / span) - 1) * 100


def growth(before: PoolState, after: PoolState) -> Decimal:
    getcontext().prec = 50
    kb = Decimal(before.sats * before.tokens)
    ka = Decimal(after.sats * after.tokens)
    return (ka / kb).sqrt() - 1


async def test_apy_of_a_hand_made_history(tmp_path: Path) -> None:
    chain = HandChain()
    tx_a, a = chain.create(0, CATS[0], 10_000_000, 1_000_000_000)
    tx_b, b = chain.create(1, CATS[0], 5_000_000, 500_000_000)
    tx_c, c = chain.create(2, CATS[1], 7_000_000, 70_000)
    chain.mine(T0, [tx_a, tx_b, tx_c])
    a0, b0 = a.state, b.state
    a1 = apply_buy_tokens_exact_out(a0, 10_000_000)  # someone buys 1 % of A's tokens
    chain.mine(T0 + DAY, [chain.move(a, a1)])
    b1 = apply_sell_tokens_exact_in(b0, 25_000_000)  # someone sells into B
    a2 = PoolState(a1.sats + 1_000_000, a1.tokens + 100_000_000)  # a deposit into A
    chain.mine(T0 + 2 * DAY, [chain.move(b, b1), chain.move(a, a2)])
    chain.mine(T0 + 3 * DAY, [chain.withdraw(b)])
    chain.mine(T0 + 4 * DAY + 500, [])
    db = tmp_path / "hand.sqlite"
    store = await open_store(db)
    for height, raw in chain.raw:
        await store.apply_block(height, raw)
    await store.close()

    start, end = T0, T0 + 4 * DAY
    area_a = Decimal(a0.sats * DAY + a1.sats * DAY + a2.sats * 2 * DAY)
    area_b = Decimal(b0.sats * DAY + b0.sats * DAY + b1.sats * DAY)
    area_c = Decimal(c.state.sats * 4 * DAY)
    earned_a = growth(a0, a1) * a0.sats  # the deposit earns nothing
    earned_b = growth(b0, b1) * b0.sats
    span = end - start
    cases = {
        "": (expected_apy(earned_a + earned_b, area_a + area_b + area_c, span), 3),
        f"&token={display(CATS[0])}": (
            expected_apy(earned_a + earned_b, area_a + area_b, span),
            2,
        ),
        f"&token={display(CATS[1])}": (Decimal(0), 1),
        f"&pkh={OWNERS[0].pkh.hex()}": (expected_apy(earned_a, area_a, span), 1),
        f"&pkh={OWNERS[1].pkh.hex()}": (expected_apy(earned_b, area_b, span), 1),
        f"&pkh={OWNERS[1].pkh.hex()}&token={display(CATS[0])}": (
            expected_apy(earned_b, area_b, span),
            1,
        ),
        f"&pkh={OWNERS[1].pkh.hex()}&token={display(CATS[1])}": (Decimal(0), 0),
    }
    config = RestConfig(db_path=db, clock=lambda: T0 + 5 * DAY, rate_limit=0)
    async with api_client(config) as client:
        for query, (want, pools) in cases.items():
            r = await client.get(f"/dex/pool/aggregated_apy?start={start}&end={end}{query}")
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["pools"] == pools, query
            assert Decimal(body["apy"]) == pytest.approx(want, rel=Decimal("1e-9")), query
        # C's idle sats dilute the pooled figure below the token's own.
        assert cases[f"&token={display(CATS[0])}"][0] > cases[""][0] > 0
        # A window after B's withdrawal counts A and C only, and the deposit alone earns 0.
        late = f"/dex/pool/aggregated_apy?start={T0 + 3 * DAY}&end={T0 + 4 * DAY}"
        r = await client.get(late)
        assert r.json() == {"apy": "0.0000000000", "pools": 2}


async def test_a_window_before_the_first_block_is_zero(tmp_path: Path) -> None:
    chain = HandChain()
    tx, _ = chain.create(0, CATS[2], 1_000_000, 1_000_000)
    chain.mine(T0, [tx])
    db = tmp_path / "one.sqlite"
    store = await open_store(db)
    for height, raw in chain.raw:
        await store.apply_block(height, raw)
    await store.close()
    config = RestConfig(db_path=db, clock=lambda: T0 + DAY, rate_limit=0)
    async with api_client(config) as client:
        r = await client.get(f"/dex/pool/aggregated_apy?start={T0 - 10 * DAY}&end={T0 - DAY}")
        assert r.json() == {"apy": "0.0000000000", "pools": 0}


def test_exposure_integrates_a_step_function() -> None:
    assert exposure(10, [], 0, 100) == 1000
    assert exposure(10, [(50, 20)], 0, 100) == 10 * 50 + 20 * 50
    # steps before the window start and after its end are clipped
    assert exposure(10, [(-5, 30), (150, 99)], 0, 100) == 30 * 100
    assert exposure(0, [(25, 4), (25, 8), (75, 0)], 0, 100) == 8 * 50


def test_fee_growth_matches_the_square_root_and_keeps_tiny_fees() -> None:
    before, after = (10_000_000, 1_000_000_000), (10_101_111, 990_000_000)
    naive = math.sqrt(after[0] * after[1] / (before[0] * before[1])) - 1
    assert fee_growth(*before, *after) == pytest.approx(naive, rel=1e-9)
    # A 1-sat change on a huge pool: the naive float formula rounds it away.
    big = (2_000_000_000_000_000, 9_000_000_000_000_000_000)
    got = fee_growth(*big, big[0] + 1, big[1])
    assert got == pytest.approx(0.5 / big[0], rel=1e-6)
    assert income([(*before, *after)]) == pytest.approx(naive * before[0], rel=1e-9)


def test_annualise() -> None:
    # 1 % over exactly a year is 1 % a year; over half a year it compounds twice.
    assert float(annualise(0.01 * 100, 100 * YEAR, 0, YEAR)) == pytest.approx(1.0)
    half = YEAR // 2
    assert float(annualise(0.01 * 100, 100 * half, 0, half)) == pytest.approx(
        (1.01**2 - 1) * 100, rel=1e-6
    )
    assert annualise(5, 0, 0, 100) == 0  # nothing locked: nothing to earn on
    huge = annualise(1e9, 1.0, 0, 3600)  # absurd but finite: a decimal, never an overflow
    assert huge > 10**1000
