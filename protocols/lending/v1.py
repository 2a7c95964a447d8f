"""The public lending protocol, v1 (a BCH-collateralised stablecoin, MUSD): layouts and rules.

Exact facts (../shared/reference/oracle-registry-lending.md; the layouts are also written down
in docs/protocols/lending-v1.md):

- Loan NFT commitment, 40 bytes, capability none, at the loan contract: `[0:32]` borrower NFT
  hash, `[32:34]` principal ÷ 100 (u16, principal in cents), `[34:36]` annual interest in basis
  points (u16), `[36:40]` timestamp (u32, the oracle time at borrow or refinance). Collateral is
  the UTXO's sats.
- NFT hash of an owner NFT = sha256(sha256(category wire ‖ capability byte unless none ‖
  commitment)).
- Interest-rate oracle commitment, 10 bytes: `timestamp u48 ‖ use_fee u16 ‖ bp_value u16`.
- Borrow needs ≥ 150 % collateral; liquidatable when `collateral × 10/12 × price / 1e8 ≤
  principal + interest`; interest = `1 + principal × bp × ceil_days / 3_650_000` cents; a loan is
  redeemable when the rate oracle's bp ≥ the loan's rate, the redeemer paying the debt and
  receiving `debt × 1e8 / price` sats.

All amounts are integers: sats, US cents, cents per BCH. Integer division floors.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from bch.hashes import sha256
from bch.token import Capability

COMMITMENT_SIZE = 40
RATE_SIZE = 10
SATS_PER_BCH = 100_000_000
DAY = 86_400
_TAIL = struct.Struct("<HHI")

# Mainnet constants (configuration defaults).
MAINNET_STABLECOIN = "b38a33f750f84c5c169a6f23cb873e6e79605021585d4f3408789689ed87f366"
MAINNET_PRICE_ORACLE = "d0d46f5cbd82188acede0d3e49c75700c19cb8331a30101f0bb6a260066ac972"
MAINNET_RATE_ORACLE = "01711e39e7bf3b8ca0d9a6fc6ea32e340caa1d64dc7d1dc51fae20fd66755558"
MAINNET_AGENT_MINTER = "9c8362ec067e2d516064b6184b6ef0c9a6e5daa7dfb4693e9764de48460b3d9b"


@dataclass(frozen=True, slots=True)
class LoanV1:
    borrower_hash: bytes  # 32 bytes: the owner NFT's hash (the API's nfth / borrower_hash)
    principal: int  # US cents, a multiple of 100
    rate_bp: int  # annual interest, basis points
    timestamp: int  # oracle time at borrow or refinance

    def encode(self) -> bytes:
        if len(self.borrower_hash) != 32:
            raise ValueError("the borrower hash is 32 bytes")
        if self.principal % 100 or not 0 <= self.principal // 100 <= 0xFFFF:
            raise ValueError("the principal is whole dollars up to 65535, in cents")
        return self.borrower_hash + _TAIL.pack(self.principal // 100, self.rate_bp, self.timestamp)

    @classmethod
    def decode(cls, data: bytes) -> LoanV1:
        if len(data) != COMMITMENT_SIZE:
            raise ValueError(f"a v1 loan commitment is 40 bytes, got {len(data)}")
        dollars, bp, ts = _TAIL.unpack_from(data, 32)
        return cls(bytes(data[:32]), dollars * 100, bp, ts)


@dataclass(frozen=True, slots=True)
class RateCommitment:
    """The interest-rate (basis-point) oracle's commitment."""

    timestamp: int  # u48
    use_fee: int  # u16
    bp_value: int  # u16

    def encode(self) -> bytes:
        if not 0 <= self.timestamp < 1 << 48:
            raise ValueError("timestamp does not fit in 48 bits")
        return self.timestamp.to_bytes(6, "little") + struct.pack(
            "<HH", self.use_fee, self.bp_value
        )

    @classmethod
    def decode(cls, data: bytes) -> RateCommitment:
        if len(data) != RATE_SIZE:
            raise ValueError(f"a rate oracle commitment is 10 bytes, got {len(data)}")
        use_fee, bp = struct.unpack_from("<HH", data, 6)
        return cls(int.from_bytes(data[:6], "little"), use_fee, bp)


def nft_hash(category_wire: bytes, capability: Capability, commitment: bytes) -> bytes:
    """The hash identifying an owner NFT (what a loan's first 32 bytes record)."""
    cap = b"" if capability is Capability.NONE else bytes((int(capability),))
    return sha256(sha256(category_wire + cap + commitment))


def ceil_days(now: int, loan_ts: int) -> int:
    """Whole days since the loan's timestamp, rounded up (0 before it)."""
    return max(0, -(-(now - loan_ts) // DAY))


def interest(principal: int, rate_bp: int, now: int, loan_ts: int) -> int:
    """Interest in cents: `1 + principal × bp × ceil_days / 3_650_000` (floored)."""
    return 1 + principal * rate_bp * ceil_days(now, loan_ts) // 3_650_000


def debt(loan: LoanV1, now: int) -> int:
    return loan.principal + interest(loan.principal, loan.rate_bp, now, loan.timestamp)


def collateral_value(sats: int, price: int) -> int:
    """Cents the collateral is worth at `price` cents per BCH (floored)."""
    return sats * price // SATS_PER_BCH


def can_borrow(collateral: int, principal: int, price: int) -> bool:
    """At least 150 % collateral: `collateral × price / 1e8 ≥ 1.5 × principal` (exact)."""
    return 2 * collateral * price >= 3 * principal * SATS_PER_BCH


def is_liquidatable(collateral: int, loan: LoanV1, price: int, now: int) -> bool:
    """`collateral × 10/12 × price / 1e8 ≤ principal + interest` (compared exactly)."""
    return 10 * collateral * price <= 12 * SATS_PER_BCH * debt(loan, now)


def is_redeemable(loan: LoanV1, rate_oracle_bp: int) -> bool:
    return rate_oracle_bp >= loan.rate_bp


def redeem_split(collateral: int, loan: LoanV1, price: int, now: int) -> tuple[int, int]:
    """(sats to the redeemer, sats left for the borrower) when a loan is redeemed."""
    owed = debt(loan, now)
    to_redeemer = min(collateral, owed * SATS_PER_BCH // price)
    return to_redeemer, collateral - to_redeemer
