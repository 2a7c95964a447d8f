"""Lending v1 layouts and rules (hand-computed from the reference's formulas) and the v11 model."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.token import Capability
from protocols.lending import v1, v11

BORROWER = bytes([0x11]) * 32


def test_v1_commitment_layout() -> None:
    loan = v1.LoanV1(BORROWER, 12_300, 500, 1_700_000_000)
    raw = loan.encode()
    assert raw == BORROWER + bytes.fromhex("7b00f40100f15365")
    assert len(raw) == 40
    assert v1.LoanV1.decode(raw) == loan
    with pytest.raises(ValueError):
        v1.LoanV1(BORROWER, 12_345, 500, 0).encode()  # principal is stored ÷ 100
    with pytest.raises(ValueError):
        v1.LoanV1.decode(raw[:-1])


def test_rate_oracle_commitment() -> None:
    raw = (1_700_000_000).to_bytes(6, "little") + struct.pack("<HH", 1000, 450)
    assert v1.RateCommitment.decode(raw) == v1.RateCommitment(1_700_000_000, 1000, 450)
    assert v1.RateCommitment(1_700_000_000, 1000, 450).encode() == raw


def test_nft_hash() -> None:
    cat = bytes(range(32))
    assert (
        v1.nft_hash(cat, Capability.NONE, b"abc")
        == hashlib.sha256(hashlib.sha256(cat + b"abc").digest()).digest()
    )
    assert (
        v1.nft_hash(cat, Capability.MUTABLE, b"abc")
        == hashlib.sha256(hashlib.sha256(cat + b"\x01abc").digest()).digest()
    )
    assert (
        v1.nft_hash(cat, Capability.MINTING, b"")
        == hashlib.sha256(hashlib.sha256(cat + b"\x02").digest()).digest()
    )


def test_interest() -> None:
    year = 365 * 86_400
    # $100 at 5 %: a year is 500 cents, plus the 1-cent floor.
    assert v1.interest(10_000, 500, year, 0) == 501
    # One second is a whole day: 10000 × 500 × 1 / 3,650,000 = 1.37 → 1.
    assert v1.interest(10_000, 500, 1, 0) == 2
    assert v1.interest(10_000, 500, 0, 0) == 1
    assert v1.ceil_days(86_400, 0) == 1 and v1.ceil_days(86_401, 0) == 2
    assert v1.ceil_days(0, 100) == 0  # an oracle time ahead of the block does not go negative


def test_borrow_needs_150_percent() -> None:
    # 1 BCH at $450.00 is worth 45,000 cents: 150 % allows 30,000 cents.
    assert v1.can_borrow(100_000_000, 30_000, 45_000)
    assert not v1.can_borrow(100_000_000, 30_001, 45_000)


def test_liquidation_threshold() -> None:
    # 1 BCH at $450.00 × 10/12 = 37,500 cents of borrowing power.
    ok = v1.LoanV1(BORROWER, 37_400, 0, 0)  # debt 37,401
    bad = v1.LoanV1(BORROWER, 37_499, 0, 0)  # debt 37,500: "≤" is liquidatable
    assert not v1.is_liquidatable(100_000_000, ok, 45_000, 0)
    assert v1.is_liquidatable(100_000_000, bad, 45_000, 0)


def test_redeem() -> None:
    loan = v1.LoanV1(BORROWER, 10_000, 300, 0)
    assert v1.is_redeemable(loan, 300) and not v1.is_redeemable(loan, 299)
    # debt 10,001 cents at $500.00: 10001 × 1e8 / 50000 = 20,002,000 sats to the redeemer.
    assert v1.redeem_split(100_000_000, v1.LoanV1(BORROWER, 10_000, 0, 0), 50_000, 0) == (
        20_002_000,
        79_998_000,
    )


def test_v11_loan_layout() -> None:
    delegate = bytes([0x22]) * 32
    loan = v11.LoanV11(BORROWER, delegate, 123_456, 650, 1_700_000_000)
    raw = loan.encode()
    assert len(raw) == 76
    assert raw[:32] == BORROWER and raw[32:64] == delegate
    assert raw[64:] == (123_456).to_bytes(6, "little") + struct.pack("<HI", 650, 1_700_000_000)
    assert v11.LoanV11.decode(raw) == loan
    assert loan.delegate == delegate
    assert v11.LoanV11(BORROWER, v11.NO_DELEGATE, 1, 1, 1).delegate is None


def test_bar_and_pool_layouts() -> None:
    assert v11.BarState(5, 4).encode() == b"B" + struct.pack("<QQ", 5, 4)
    assert v11.PoolState(5, 4, 3).encode() == b"P" + struct.pack("<QQQ", 5, 4, 3)
    assert v11.BarState.decode(v11.BarState(5, 4).encode()) == v11.BarState(5, 4)
    with pytest.raises(ValueError):
        v11.BarState.decode(v11.PoolState(5, 4, 3).encode())


def test_share_math() -> None:
    assert v11.shares_for_deposit(0, 0, 1000) == 1000
    assert v11.shares_for_deposit(1100, 1000, 110) == 100
    assert v11.amount_for_shares(1100, 1000, 100) == 110
    assert v11.share_price(0, 0) is None
    growth = v11.annualised_growth(1.0, 1.01, 365 * 86_400 // 12)
    assert growth is not None and abs(growth - 0.12) < 1e-9
    assert v11.annualised_growth(1.0, 1.1, 0) is None


def test_crank_reasons() -> None:
    day = 86_400
    loan = v11.LoanV11(BORROWER, v11.NO_DELEGATE, 30_000, 300, 0)
    assert v11.crank_reason(loan, 100_000_000, day, 30_000, 100) == "liquidate"
    assert v11.crank_reason(loan, 100_000_000, day, 45_000, 300) == "redeem"
    assert v11.crank_reason(loan, 100_000_000, 30 * day, 45_000, 100) == "accrue"
    assert v11.crank_reason(loan, 100_000_000, day, 45_000, 100) is None
    assert v11.crank_reason(loan, 100_000_000, day, None, None) is None
    assert v11.can_fund_fee(v11.MIN_COLLATERAL + v11.CRANK_FEE)
    assert not v11.can_fund_fee(v11.MIN_COLLATERAL + v11.CRANK_FEE - 1)
    rolled = v11.accrued(loan, 30 * day)
    assert rolled.principal == 30_000 + 1 + 30_000 * 300 * 30 // 3_650_000
    assert rolled.timestamp == 30 * day


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF))
def test_v1_round_trip(dollars: int, bp: int, ts: int) -> None:
    loan = v1.LoanV1(BORROWER, dollars * 100, bp, ts)
    assert v1.LoanV1.decode(loan.encode()) == loan


@given(st.integers(1, 10**10), st.integers(1, 10**6), st.integers(1, 10**15))
def test_deposit_then_withdraw_never_pays_more(staked: int, amount: int, extra: int) -> None:
    shares = staked  # any non-empty state with price ≥ 1
    staked += extra % (staked + 1)
    minted = v11.shares_for_deposit(staked, shares, amount)
    assert v11.amount_for_shares(staked + amount, shares + minted, minted) <= amount
