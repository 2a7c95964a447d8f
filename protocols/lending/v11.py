"""The lending protocol's current version, v11, as this project models it (its layouts are not
public; ours are written down in docs/protocols/lending-v11.md and the devnet produces them).

- **Loan** commitment, 76 bytes (needs the 2026 VM's 128-byte commitments), capability none, at
  the v11 loan contract: `[0:32]` borrower NFT hash, `[32:64]` delegate hash (a third party
  allowed to manage the loan; 32 zero bytes = none), `[64:70]` principal in cents (u48),
  `[70:72]` rate in basis points (u16), `[72:76]` timestamp (u32). Collateral = the UTXO's sats.
  Interest, liquidation and redemption follow the v1 formulas.
- **Bar** (single-asset staking, share based): a mutable NFT of the stablecoin category at the
  bar contract, commitment 17 bytes `'B' ‖ staked u64 ‖ shares u64`; the UTXO holds `staked`
  fungible tokens. Exchange rate = staked / shares; repaid interest is added to `staked`.
- **Pool** (liquidation pool): a mutable NFT of the stablecoin category at the pool contract,
  commitment 25 bytes `'P' ‖ staked u64 ‖ shares u64 ‖ bch_pot u64`; the UTXO holds `staked`
  fungible tokens and `POOL_BASE_SATS + bch_pot` sats. A liquidation burns the loan's debt out of
  `staked` and adds the seized collateral to `bch_pot` (the "BCH pot").
- **Allowances**: outputs at the pay-to-NFT-hash contract of an owner hash (redeem leftovers,
  deposits left by dead loans, payouts); spent by the owner.
- **Crankable**: a loan a keeper may legally process now (liquidate, redeem, accrue) whose
  collateral can fund the keeper's fee.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from protocols.lending.v1 import LoanV1, debt, interest, is_liquidatable, is_redeemable

COMMITMENT_SIZE = 76
NO_DELEGATE = bytes(32)
BAR_TAG = b"B"
POOL_TAG = b"P"
POOL_BASE_SATS = 1_000  # the pool UTXO's sats apart from the BCH pot
ACCRUE_PERIOD = 30 * 86_400  # interest may be rolled into the principal after this long
CRANK_FEE = 2_000  # sats a keeper's transaction takes from the loan's collateral
MIN_COLLATERAL = 10_000  # below this, a loan cannot fund its own processing
_TAIL = struct.Struct("<HI")
_BAR = struct.Struct("<QQ")
_POOL = struct.Struct("<QQQ")

CrankReason = Literal["liquidate", "redeem", "accrue"]


@dataclass(frozen=True, slots=True)
class LoanV11:
    borrower_hash: bytes
    delegate_hash: bytes  # NO_DELEGATE: none
    principal: int  # cents
    rate_bp: int
    timestamp: int

    @property
    def delegate(self) -> bytes | None:
        return None if self.delegate_hash == NO_DELEGATE else self.delegate_hash

    def as_v1(self) -> LoanV1:
        """The v1 view (the formulas are the same)."""
        return LoanV1(self.borrower_hash, self.principal, self.rate_bp, self.timestamp)

    def encode(self) -> bytes:
        if len(self.borrower_hash) != 32 or len(self.delegate_hash) != 32:
            raise ValueError("borrower and delegate hashes are 32 bytes")
        if not 0 <= self.principal < 1 << 48:
            raise ValueError("the principal does not fit in 48 bits")
        return (
            self.borrower_hash
            + self.delegate_hash
            + self.principal.to_bytes(6, "little")
            + _TAIL.pack(self.rate_bp, self.timestamp)
        )

    @classmethod
    def decode(cls, data: bytes) -> LoanV11:
        if len(data) != COMMITMENT_SIZE:
            raise ValueError(f"a v11 loan commitment is 76 bytes, got {len(data)}")
        bp, ts = _TAIL.unpack_from(data, 70)
        return cls(
            bytes(data[:32]), bytes(data[32:64]), int.from_bytes(data[64:70], "little"), bp, ts
        )


@dataclass(frozen=True, slots=True)
class BarState:
    staked: int  # stablecoin base units (cents)
    shares: int

    def encode(self) -> bytes:
        return BAR_TAG + _BAR.pack(self.staked, self.shares)

    @classmethod
    def decode(cls, data: bytes) -> BarState:
        if len(data) != 17 or data[:1] != BAR_TAG:
            raise ValueError("a bar commitment is 'B' ‖ staked u64 ‖ shares u64")
        return cls(*_BAR.unpack_from(data, 1))


@dataclass(frozen=True, slots=True)
class PoolState:
    staked: int
    shares: int
    bch_pot: int  # sats seized from liquidations

    def encode(self) -> bytes:
        return POOL_TAG + _POOL.pack(self.staked, self.shares, self.bch_pot)

    @classmethod
    def decode(cls, data: bytes) -> PoolState:
        if len(data) != 25 or data[:1] != POOL_TAG:
            raise ValueError("a pool commitment is 'P' ‖ staked u64 ‖ shares u64 ‖ pot u64")
        return cls(*_POOL.unpack_from(data, 1))


def shares_for_deposit(staked: int, shares: int, amount: int) -> int:
    """Shares minted for depositing `amount` (1:1 into an empty bar or pool)."""
    if shares == 0 or staked == 0:
        return amount
    return amount * shares // staked


def amount_for_shares(staked: int, shares: int, burned: int) -> int:
    """Tokens paid out for burning `burned` shares (floored: the rest stays with the stakers)."""
    if shares == 0:
        return 0
    return burned * staked // shares


def share_price(staked: int, shares: int) -> float | None:
    return None if shares == 0 else staked / shares


def annualised_growth(p0: float, p1: float, seconds: int) -> float | None:
    """Simple annualised growth of a share price between two observations."""
    if seconds <= 0 or p0 <= 0:
        return None
    return (p1 / p0 - 1.0) * (365 * 86_400) / seconds


def crank_reason(
    loan: LoanV11, collateral: int, now: int, price: int | None, rate_bp: int | None
) -> CrankReason | None:
    """Why a keeper may process the loan now, most urgent first; None if it may not."""
    v1 = loan.as_v1()
    if price is not None and price > 0 and is_liquidatable(collateral, v1, price, now):
        return "liquidate"
    if rate_bp is not None and is_redeemable(v1, rate_bp):
        return "redeem"
    if now - loan.timestamp >= ACCRUE_PERIOD:
        return "accrue"
    return None


def can_fund_fee(collateral: int) -> bool:
    """The loan's UTXO can pay the keeper's fee and stay above the minimum."""
    return collateral >= MIN_COLLATERAL + CRANK_FEE


def accrued(loan: LoanV11, now: int) -> LoanV11:
    """The loan after an accrue: interest rolled into the principal, the clock restarted."""
    return LoanV11(
        loan.borrower_hash,
        loan.delegate_hash,
        loan.principal + interest(loan.principal, loan.rate_bp, now, loan.timestamp),
        loan.rate_bp,
        now,
    )


def debt_v11(loan: LoanV11, now: int) -> int:
    return debt(loan.as_v1(), now)
