"""A route's hops: the legs trading one token in one direction, as objects and as columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter
from typing import Any

from bch.token import MAX_TOKEN_AMOUNT
from protocols.cauldron.formulas import (
    PoolState,
    lp_fee,
)
from router.pools import (
    POOL_INPUT_SIZE,
    Pool,
    pool_output_size,
)


class Direction(StrEnum):
    BUY = "buy"  # the user pays sats into the pools and takes tokens
    SELL = "sell"  # the user pays tokens into the pools and takes sats


@dataclass(frozen=True, slots=True)
class Leg:
    """One pool's part of a route: its state before (the pool) and after the trade."""

    pool: Pool
    after: PoolState

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied and pickled through `__init__` (`Hop.__reduce__`: compiled, the frozen
        fields cannot be set afterwards)."""
        return (Leg, (self.pool, self.after))

    @property
    def direction(self) -> Direction:
        return Direction.BUY if self.after.sats > self.pool.sats else Direction.SELL

    @property
    def amount_in(self) -> int:
        """What the user pays this pool (sats when buying tokens, tokens when selling)."""
        if self.after.sats > self.pool.sats:
            return self.after.sats - self.pool.sats
        return self.after.tokens - self.pool.tokens

    @property
    def amount_out(self) -> int:
        if self.after.sats > self.pool.sats:
            return self.pool.tokens - self.after.tokens
        return self.pool.sats - self.after.sats

    @property
    def lp_fee(self) -> int:
        return lp_fee(self.pool.sats, self.after.sats)


# A hop's legs as columns: the pools, their sats after the trade, their tokens after it.
Columns = tuple[tuple[Pool, ...], tuple[int, ...], tuple[int, ...]]
# A table aligned with a route model's pools (`_Model.pool_table`) and the legs' positions in it.
Aligned = tuple[list[Any], Sequence[int]]


class Hop:
    """The legs trading one token in one direction, and their totals.

    A hop the route makes (`Hop.of_columns`) holds its legs as columns (pools, sats after,
    tokens after) with the totals, the pool bytes and the amounts; the `Leg` objects are made
    only if something reads `legs` (tests, the CLI's plain JSON), never on the daemon's path.
    Equal to, and hashing as, the `Hop` of the same legs."""

    __slots__ = (
        "_aligned",
        "_amounts",
        "_columns",
        "_legs",
        "direction",
        "size",
        "token_id",
        "totals",
    )

    def __init__(
        self,
        token_id: str,
        direction: Direction,
        legs: tuple[Leg, ...] | None = (),
        totals: tuple[int, int] | None = None,
        size: int | None = None,
        *,
        columns: Columns | None = None,
        amounts: tuple[Sequence[int], Sequence[int]] | None = None,
        aligned: Aligned | None = None,
    ) -> None:
        self.token_id = token_id
        self.direction = direction
        # Made with the legs (`_Model.hop`), which the quote and the builder then ask for: the
        # totals in and out, and the bytes the pools add to the transaction.
        self.totals = totals
        self.size = size
        self._legs = legs  # None until made from the columns
        self._columns = columns
        # (amounts in, amounts out) of the legs, in order, when the route made them.
        self._amounts = amounts
        self._aligned = aligned

    @classmethod
    def of_columns(
        cls,
        token_id: str,
        direction: Direction,
        columns: Columns,
        totals: tuple[int, int],
        size: int,
        amounts: tuple[Sequence[int], Sequence[int]] | None = None,
        *,
        aligned: Aligned | None = None,
    ) -> Hop:
        return cls(
            token_id,
            direction,
            None,
            totals,
            size,
            columns=columns,
            amounts=amounts,
            aligned=aligned,
        )

    @property
    def legs(self) -> tuple[Leg, ...]:
        legs = self._legs
        if legs is None:
            pools, sats, tokens = self.columns()
            legs = self._legs = tuple(map(Leg, pools, map(PoolState, sats, tokens)))
        return legs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hop):
            return NotImplemented
        return (self.token_id, self.direction, self.legs) == (
            other.token_id,
            other.direction,
            other.legs,
        )

    def __hash__(self) -> int:
        return hash((self.token_id, self.direction, self.legs))

    def __repr__(self) -> str:
        return f"Hop(token_id={self.token_id!r}, direction={self.direction!r}, legs={self.legs!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied and pickled through `__init__`: compiled (`router.native`), the class has no
        `__new__` that makes an empty instance for the default protocol to fill."""
        return (
            _hop,
            (
                self.token_id,
                self.direction,
                self._legs,
                self.totals,
                self.size,
                self._columns,
                self._amounts,
                self._aligned,
            ),
        )

    def amounts(self) -> tuple[Sequence[int], Sequence[int]] | None:
        """Each leg's amount in and amount out (columns), when the route made this hop."""
        return self._amounts

    def aligned(self) -> Aligned | None:
        """The route model's per-pool table and the legs' positions in it, when the route
        made this hop (`_Model.pool_table`)."""
        return self._aligned

    def columns(self) -> Columns:
        """(pools, sats after, tokens after) of the legs, in order: what the builder, the gate
        and the JSON read."""
        found = self._columns
        if found is None:
            legs = self.legs
            afters = list(map(_after_of, legs))
            found = self._columns = (
                tuple(map(_pool_of, legs)),
                tuple(map(_sats_of, afters)),
                tuple(map(_tokens_of, afters)),
            )
        return found

    def count(self) -> int:
        """How many legs (pools)."""
        return len(self.columns()[0])

    @property
    def amount_in(self) -> int:
        if self.totals is not None:
            return self.totals[0]
        return sum(leg.amount_in for leg in self.legs)

    @property
    def amount_out(self) -> int:
        if self.totals is not None:
            return self.totals[1]
        return sum(leg.amount_out for leg in self.legs)

    @property
    def pool_bytes(self) -> int:
        """Bytes the hop's pools add to the transaction: each input and re-created output."""
        if self.size is not None:
            return self.size
        return sum(POOL_INPUT_SIZE + pool_output_size(leg.after.tokens) for leg in self.legs)


def _hop(
    token_id: str,
    direction: Direction,
    legs: tuple[Leg, ...] | None,
    totals: tuple[int, int] | None,
    size: int | None,
    columns: Columns | None,
    amounts: tuple[Sequence[int], Sequence[int]] | None,
    aligned: Aligned | None,
) -> Hop:
    """`Hop.__reduce__`'s maker."""
    return Hop(
        token_id, direction, legs, totals, size, columns=columns, amounts=amounts, aligned=aligned
    )


_pool_of = attrgetter("pool")
_after_of = attrgetter("after")
_sats_of = attrgetter("sats")
_tokens_of = attrgetter("tokens")
# A pool's input plus re-created output by its amount's width: `bisect_left(_WIDTH_TOPS, n)`
# is 0 for 1-byte amounts (n ≤ 252), 1 for 3-byte, 2 for 5-byte, 3 for 9-byte.
_WIDTH_TOPS = (0xFC, 0xFFFF, 0xFFFFFFFF)


# A pool's input plus its re-created output, by the CompactSize width of its token amount.
_TRADE_BY_WIDTH = tuple(
    POOL_INPUT_SIZE + pool_output_size(top) for top in (1, 0xFFFF, 0xFFFFFFFF, MAX_TOKEN_AMOUNT)
)
# (top of a width, bytes the next width adds): a leg holding more than `top` tokens is `step`
# bytes larger than one holding `top`.
_WIDTH_STEPS = tuple(
    (top, wider - narrower)
    for top, narrower, wider in zip(
        _WIDTH_TOPS, _TRADE_BY_WIDTH[:-1], _TRADE_BY_WIDTH[1:], strict=True
    )
)
