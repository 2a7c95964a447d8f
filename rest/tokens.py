"""Token references: a 64-hex category or a symbol, resolved through a pluggable registry.

A registry implements `TokenRegistry` (`by_symbol`, `metadata`, `revision`) and is passed in
`RestConfig.registry`; the default is the index's own (`rest.index_tokens.IndexRegistry`: the
on-chain BCMR entries the indexer fetched). `StaticRegistry` holds a fixed set (tests,
configuration files) and `EmptyRegistry` none. USD figures come from a `UsdOracle` the same way
(default: the indexed BCH/USD feed, `rest.index_tokens.IndexUsdOracle`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rest.errors import bad_parameter
from runtime.errors import ApiError

TOKEN_ID = re.compile(r"^[0-9a-fA-F]{64}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
# A symbol: 1–32 characters, none of them whitespace (spelled out: `\s` differs between
# Python's and JSON Schema's regular expressions), control characters or URL punctuation.
SYMBOL_CHAR = (
    r"[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff/:?#&=%,]"
)
SYMBOL = re.compile(f"^{SYMBOL_CHAR}{{1,32}}$")
MAX_SYMBOL_HEX = 32  # an all-hex text longer than this is a (malformed) token id, not a symbol


@dataclass(frozen=True, slots=True)
class TokenMetadata:
    """What a registry says about a token (any field may be unknown)."""

    token_id: str  # 64-hex category, display order, lower case
    symbol: str | None = None
    name: str | None = None
    decimals: int | None = None
    description: str | None = None
    icon: str | None = None
    web: str | None = None


class TokenRegistry(Protocol):
    @property
    def revision(self) -> int:
        """Changes whenever the registry's content does (answers are cached per revision)."""
        ...

    async def by_symbol(self, symbol: str) -> Sequence[TokenMetadata]:
        """Every token whose symbol equals `symbol`, case-insensitively."""
        ...

    async def metadata(self, token_ids: Collection[str]) -> Mapping[str, TokenMetadata]:
        """Metadata of those of `token_ids` the registry knows."""
        ...


class EmptyRegistry:
    """No metadata: every symbol is unknown, every name null."""

    revision = 0

    async def by_symbol(self, symbol: str) -> Sequence[TokenMetadata]:
        return ()

    async def metadata(self, token_ids: Collection[str]) -> Mapping[str, TokenMetadata]:
        return {}


class StaticRegistry:
    """A fixed set of entries (configuration files, tests)."""

    def __init__(self, entries: Iterable[TokenMetadata], revision: int = 1) -> None:
        self._by_id = {e.token_id.lower(): e for e in entries}
        self._revision = revision

    @property
    def revision(self) -> int:
        return self._revision

    async def by_symbol(self, symbol: str) -> Sequence[TokenMetadata]:
        wanted = symbol.casefold()
        return [
            e
            for e in self._by_id.values()
            if e.symbol is not None and e.symbol.casefold() == wanted
        ]

    async def metadata(self, token_ids: Collection[str]) -> Mapping[str, TokenMetadata]:
        return {t: self._by_id[t] for t in token_ids if t in self._by_id}


class UsdOracle(Protocol):
    async def usd_per_bch(self, time: int) -> float | None:
        """The BCH/USD price at `time` (Unix seconds), or None without data."""
        ...


class NoUsdOracle:
    """No feed: every USD field is null."""

    async def usd_per_bch(self, time: int) -> float | None:
        return None


class UnknownSymbolError(ApiError):
    """A well-formed symbol no token has: a 404 where a token must exist; the registry
    endpoints catch it and answer as for an unknown id (`null`, `[]`)."""

    def __init__(self, symbol: str) -> None:
        super().__init__(404, "unknown_token", f"no token with the symbol {symbol!r}")


def parse_token_id(name: str, text: str) -> str:
    """A 64-hex category (either case) → lower-case display hex, else 400."""
    if not TOKEN_ID.match(text):
        raise bad_parameter(name, f"must be a 64-character hex token id, got {_show(text)}")
    return text.lower()


def is_token_id_like(text: str) -> bool:
    return bool(_HEX.match(text)) and len(text) > MAX_SYMBOL_HEX


async def resolve_token(registry: TokenRegistry, name: str, text: str) -> str:
    """A token parameter (id or symbol) → its 64-hex id.

    All-hex text longer than a symbol may be must be a full id (so a 63-hex typo is a 400,
    not an unknown symbol). An unknown symbol is a 404 (`UnknownSymbolError`); a symbol shared
    by several tokens is a 400 listing them."""
    if TOKEN_ID.match(text):
        return text.lower()
    if is_token_id_like(text):
        raise bad_parameter(name, f"must be a 64-character hex token id, got {len(text)} hex")
    if not SYMBOL.match(text):
        raise bad_parameter(name, f"must be a 64-hex token id or a token symbol, got {_show(text)}")
    found = await registry.by_symbol(text)
    ids = sorted({m.token_id.lower() for m in found})
    if not ids:
        raise UnknownSymbolError(text)
    if len(ids) > 1:
        shown = {m.token_id.lower(): m for m in found}
        candidates = [
            {"token_id": t, "symbol": shown[t].symbol, "name": shown[t].name} for t in ids
        ]
        listing = ", ".join(f"{t} ({shown[t].name or '?'})" for t in ids)
        raise ApiError(
            400,
            "ambiguous_symbol",
            f"{name}: the symbol {text!r} names {len(ids)} tokens; use a token id: {listing}",
            fields={"parameter": name, "candidates": candidates},
        )
    return ids[0]


def _show(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")
