"""Strict parsing of query and path parameters: anything doubtful is a 400 that names the
parameter and says why, before any database work.

Integers are plain decimal digits (no sign, no spaces, no exponent); negative numbers, unknown
or repeated parameters and empty values are refused rather than guessed at. Bounds live here
so that `docs/api.md` and the OpenAPI document can quote them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from starlette.datastructures import QueryParams

from rest.errors import ApiError

MAX_TIME = 32_503_680_000  # year 3000: anything later is a typo
DAY = 86_400
DEFAULT_VOLUME_SPAN = DAY  # /dex/volume, list_by_volume: the last 24 h
DEFAULT_SERIES_SPAN = 30 * DAY  # price history, candlesticks, APY: the last 30 days
DEFAULT_STEP = 3_600
MIN_STEP = 60
MAX_STEP = 366 * DAY
MAX_INTERVALS = 50_000  # (end - start) / stepsize for history and candlesticks
MIN_APY_WINDOW = 3_600
MAX_OFFSET = 100_000
IGNORED = frozenset({"_"})  # cache busters some HTTP clients append

_DIGITS = re.compile(r"^[0-9]+$")
_NEGATIVE = re.compile(r"^-[0-9]+$")
_PKH = re.compile(r"^[0-9a-fA-F]{40}$")
_POOL_ID = re.compile(r"^([0-9a-fA-F]{64}):(0|[1-9][0-9]{0,9})$")


@dataclass(frozen=True, slots=True)
class Limit:
    default: int
    maximum: int


TX_LATEST_LIMIT = Limit(50, 500)
TOKEN_LIST_LIMIT = Limit(100, 1_000)
SEARCH_LIMIT = Limit(20, 100)
POOLS_LIMIT = Limit(1_000, 10_000)
MAX_IDS = 100


class Query:
    """A request's query string, checked against the parameters an endpoint accepts."""

    def __init__(self, params: QueryParams, allowed: Collection[str]) -> None:
        self._values: dict[str, str] = {}
        for name, value in params.multi_items():
            if name in IGNORED:
                continue
            if name not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                raise ApiError(
                    400,
                    "unknown_parameter",
                    f"{name}: not a parameter of this endpoint (accepted: {known})",
                    parameter=name,
                )
            if name in self._values:
                raise ApiError.bad(name, "given more than once")
            if value == "":
                raise ApiError.bad(name, "is empty")
            self._values[name] = value

    def get(self, name: str) -> str | None:
        return self._values.get(name)

    def integer(
        self, name: str, *, default: int | None = None, minimum: int = 0, maximum: int = MAX_TIME
    ) -> int | None:
        text = self._values.get(name)
        return default if text is None else parse_int(name, text, minimum, maximum)

    def limit(self, spec: Limit) -> int:
        value = self.integer("limit", default=spec.default, minimum=1, maximum=spec.maximum)
        assert value is not None
        return value

    def offset(self) -> int:
        value = self.integer("offset", default=0, maximum=MAX_OFFSET)
        assert value is not None
        return value

    def choice(self, name: str, choices: Collection[str], default: str) -> str:
        text = self._values.get(name)
        if text is None:
            return default
        if text not in choices:
            raise ApiError.bad(name, f"must be one of {', '.join(choices)}, got {_show(text)}")
        return text

    def window(self, now: int, span: int) -> tuple[int, int]:
        """(start, end): defaults end = now, start = end - span; start > end is a 400."""
        end = self.integer("end")
        start = self.integer("start")
        if end is None:
            end = max(now, start) if start is not None else now
        if start is None:
            start = max(0, end - span)
        if start > end:
            raise ApiError.bad("start", f"must not be after end ({start} > {end})")
        return start, end


def parse_int(name: str, text: str, minimum: int = 0, maximum: int = MAX_TIME) -> int:
    if _NEGATIVE.match(text):
        raise ApiError.bad(name, f"must not be negative, got {text}")
    if not _DIGITS.match(text):
        raise ApiError.bad(name, f"must be a non-negative integer, got {_show(text)}")
    if len(text) > 20:
        raise ApiError.bad(name, f"must be at most {maximum}")
    value = int(text)
    if value < minimum:
        raise ApiError.bad(name, f"must be at least {minimum}, got {value}")
    if value > maximum:
        raise ApiError.bad(name, f"must be at most {maximum}, got {value}")
    return value


def parse_pkh(name: str, text: str) -> str:
    if not _PKH.match(text):
        raise ApiError.bad(name, f"must be a 40-character hex public key hash, got {_show(text)}")
    return text.lower()


def parse_pool_id(text: str) -> str:
    """`<64-hex txid>:<vout>` (the lineage's first outpoint) → normalised (lower case)."""
    m = _POOL_ID.match(text)
    if m is None or int(m.group(2)) > 0xFFFFFFFF:
        raise ApiError.bad("pool_id", f"must be <64-hex txid>:<output index>, got {_show(text)}")
    return f"{m.group(1).lower()}:{m.group(2)}"


def stepsize(query: Query, start: int, end: int) -> int:
    step = query.integer("stepsize", default=DEFAULT_STEP, minimum=MIN_STEP, maximum=MAX_STEP)
    assert step is not None
    intervals = (end - start) // step + 1
    if intervals > MAX_INTERVALS:
        raise ApiError.bad(
            "stepsize",
            f"{intervals} intervals between start and end; at most {MAX_INTERVALS} "
            "(use a larger stepsize or a shorter window)",
        )
    return step


def _show(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")
