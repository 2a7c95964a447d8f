"""Shared test helpers: pool and funding factories, and an independent continuous optimum.

The reference optimum is deliberately written differently from `router.route`: it bisects on
the common marginal rate λ and, for each pool, bisects on the amount where the pool's
continuous marginal rate falls to λ (the "nested search" public routers use), working from the
curves themselves rather than from the closed forms the router derives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bch.hashes import sha256
from bch.wallet import Wallet
from router.pools import Pool, PoolBook

FEE_WALLET = Wallet.from_seed("router tests: fee collector")
USER = Wallet.from_seed("router tests: user")
OTHER = Wallet.from_seed("router tests: someone else")

TOKEN_A = sha256(b"router tests: token A").hex()
TOKEN_B = sha256(b"router tests: token B").hex()
TOKEN_C = sha256(b"router tests: token C (not traded)").hex()


# A pool output is P2SH32 with a fungible-token prefix: value 8, script length 1, category
# prefix 1 + 32 + 1, the amount's CompactSize (1, 3, 5 or 9 bytes), the 35-byte locking; dust
# is 3 × (size + 148) (bch-wire.md). Written out here, apart from the router's arithmetic.
_WIDTHS = ((0xFC, 1), (0xFFFF, 3), (0xFFFFFFFF, 5), (2**63 - 1, 9))
LARGEST_POOL_DUST = 3 * (8 + 1 + 34 + 9 + 35 + 148)  # 705 sats


def continuation_dust(tokens: int) -> int:
    """The dust threshold of a pool output holding `tokens`: the least sats it may keep."""
    width = next(w for top, w in _WIDTHS if tokens <= top)
    return 3 * (8 + 1 + 34 + width + 35 + 148)


def txid(label: str) -> str:
    return sha256(label.encode()).hex()


def make_pool(token: str, sats: int, tokens: int, label: str, vout: int = 0) -> Pool:
    return Pool(txid(f"{token}:{label}"), vout, sha256(label.encode())[:20], token, sats, tokens)


def pools_from(token: str, states: Sequence[tuple[int, int]], tag: str = "") -> list[Pool]:
    return [make_pool(token, x, t, f"{tag}{i}", i % 4) for i, (x, t) in enumerate(states)]


def even_pools(token: str, n: int, sats: int, price: float, tag: str = "") -> list[Pool]:
    """`n` pools of `sats` each, prices spread ±10 % around `price` sats per token."""
    out = []
    for i in range(n):
        p = price * (0.9 + 0.2 * ((i * 7919) % 1000) / 1000)
        out.append(make_pool(token, sats, max(2, int(sats / p)), f"{tag}{i}", i % 4))
    return out


def funding(
    label: str,
    value: int,
    wallet: Wallet = USER,
    token: dict[str, Any] | None = None,
    *,
    by_address: bool = True,
) -> dict[str, Any]:
    entry: dict[str, Any] = {"txid": txid(f"funding:{label}"), "vout": 0, "value": str(value)}
    if by_address:
        entry["address"] = wallet.token_address if token is not None else wallet.address
    else:
        entry["script_hex"] = wallet.locking_bytecode.hex()
    if token is not None:
        entry["token"] = token
    return entry


def build_params(
    sell: str,
    buy: str,
    amount: int,
    inputs: list[dict[str, Any]],
    *,
    side: str = "sell",
    receive: str | None = None,
    change: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "sell": sell,
        "buy": buy,
        "amount": str(amount),
        "side": side,
        "receive_addr": receive or USER.token_address,
        "change_addr": change or USER.address,
        "funding": inputs,
    }
    params.update(extra)
    return params


# --- the independent continuous optimum --------------------------------------------------------

GAMMA = 0.997  # share of the sats paid in that counts after the 0.3 % fee (buy)
PHI = 1 / 1.003  # sats out per sat the pool frees, fee on top (sell)


@dataclass(frozen=True)
class Curve:
    """A pool's continuous trade curve: output for input x (buy: sats→tokens, sell: the
    reverse), with the reserve rules as a cap on the input."""

    sats: int
    tokens: int
    buy: bool

    def out(self, x: float) -> float:
        x = min(x, self.cap)
        if x <= 0:
            return 0.0
        if x == math.inf:
            return self.tokens - 1.0 if self.buy else PHI * self.sats
        if self.buy:
            return self.tokens * GAMMA * x / (self.sats + GAMMA * x)
        return PHI * self.sats * x / (self.tokens + x)

    def slope(self, x: float) -> float:
        if self.buy:
            return GAMMA * self.tokens * self.sats / (self.sats + GAMMA * x) ** 2
        return PHI * self.sats * self.tokens / (self.tokens + x) ** 2

    @property
    def cap(self) -> float:
        """Input at which a reserve binds: one token left (buy); selling, the pool keeps the
        dust threshold of its output for the tokens it then holds, which steps up where the
        amount needs a wider CompactSize. Tried width by width: the input where the sats
        reach that width's dust, or where the tokens fill the width, whichever comes first."""
        if self.buy:
            return (self.tokens - 1) * self.sats / GAMMA if self.tokens > 1 else 0.0
        limit = PHI * self.sats  # the curve's asymptote
        best = 0.0
        for top, _ in _WIDTHS:
            if top < self.tokens:
                continue
            keep = self.sats - continuation_dust(top)  # most sats the pool may lose here
            if keep <= 0:
                break
            fill = float(top - self.tokens)  # input that fills this width
            if keep >= limit * (1 - 1e-12):
                at_dust = math.inf
            else:
                at_dust = keep * self.tokens / (limit - keep)
            best = max(best, min(at_dust, fill))
        return best

    def input_at(self, lam: float) -> float:
        """Input where the marginal rate has fallen to λ (bisection), capped."""
        if self.cap <= 0 or self.slope(0.0) <= lam:
            return 0.0
        hi = 1.0
        while hi < self.cap and self.slope(hi) > lam:
            hi *= 2
        hi = min(hi, self.cap)
        if self.slope(hi) > lam:
            return hi
        lo = 0.0
        for _ in range(64):
            mid = (lo + hi) / 2
            if self.slope(mid) > lam:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    def input_for(self, y: float) -> float:
        """Input giving output y on the curve (inf beyond the cap)."""
        if y <= 0:
            return 0.0
        if y > self.out(self.cap) * (1 + 1e-12) + 1e-9:
            return math.inf
        room = (self.tokens - y) if self.buy else (PHI * self.sats - y)
        if room <= 0:
            return math.inf  # at or past the curve's asymptote
        if self.buy:
            return y * self.sats / (GAMMA * room)
        return y * self.tokens / room


def optimum(curves: Sequence[Curve], amount: float, exact_in: bool) -> list[float]:
    """Per-pool inputs of the continuous optimum: equal marginal rate λ, found by bisecting
    log λ until the pools' inputs (exact in) or outputs (exact out) add up to `amount`."""

    def total(lam: float) -> float:
        xs = [c.input_at(lam) for c in curves]
        return sum(xs) if exact_in else sum(c.out(x) for c, x in zip(curves, xs, strict=True))

    top = max(c.slope(0.0) for c in curves)
    lo, hi = math.log(top) - 80.0, math.log(top)  # total(exp(lo)) is huge, total(exp(hi)) = 0
    for _ in range(64):
        mid = (lo + hi) / 2
        if total(math.exp(mid)) > amount:
            lo = mid
        else:
            hi = mid
    lam = math.exp((lo + hi) / 2)
    return [c.input_at(lam) for c in curves]


def standard_book(version: int | None = 7, height: int | None = 900_000) -> PoolBook:
    """Token A: 40 pools around 0.02 sats/token; token B: 30 pools around 5 sats/token."""
    pools = even_pools(TOKEN_A, 40, 2_000_000, 0.02, "a") + even_pools(
        TOKEN_B, 30, 3_000_000, 5.0, "b"
    )
    return PoolBook(pools, version=version, height=height)
