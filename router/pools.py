"""The pools a route may use: the `Pool` value, the offline pools file, and `PoolBook`, an
immutable snapshot of tradable pools grouped by token.

A pool is kept only if the router can re-create it as a standard output: at least the dust
threshold of its own output (`pool_reserve`, 681–705 sats: the token amount's CompactSize width
sets the output's size) and at least one token (a token-less output would have an empty
category and fail the contract). Everything else in a snapshot (drained pools, dust — legal on
chain, but not continuable) is silently left out, as if it did not exist.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from bch.encoding import compact_size_len
from bch.policy import dust_threshold
from bch.token import MAX_TOKEN_AMOUNT, TokenData
from bch.tx import MAX_SATS, TxOutput
from protocols.cauldron.contract import TRADE_UNLOCK_LEN, pool_locking_bytecode
from protocols.cauldron.formulas import PoolState, buy_tokens_exact_in, sell_tokens_exact_in

BCH = "bch"

# Serialized sizes (bytes) for fee and standard-size arithmetic.
POOL_INPUT_SIZE = 32 + 4 + 1 + TRADE_UNLOCK_LEN + 4  # 110: outpoint, length, redeem push, seq.
_POOL_OUTPUT_FIXED = 8 + 1 + 35 + 1 + 32 + 1  # value, script length, P2SH32, ef‖category‖bits

_HEX = frozenset("0123456789abcdef")

T = TypeVar("T")


def pool_output_size(tokens: int) -> int:
    """Bytes of a re-created pool output holding `tokens` (79–87: the amount's CompactSize)."""
    return _POOL_OUTPUT_FIXED + compact_size_len(tokens)


def _reserve_at(tokens: int) -> int:
    output = TxOutput(0, pool_locking_bytecode(bytes(20)), TokenData(bytes(32), tokens))
    return dust_threshold(output)


# (largest token amount of a CompactSize width, the dust threshold of a pool output holding it),
# widest last: 252 → 681, 2^16−1 → 687, 2^32−1 → 693, 2^63−1 → 705 sats.
RESERVE_STEPS: tuple[tuple[int, int], ...] = tuple(
    (top, _reserve_at(top)) for top in (0xFC, 0xFFFF, 0xFFFFFFFF, MAX_TOKEN_AMOUNT)
)


_RESERVE_1, _RESERVE_3, _RESERVE_5, _RESERVE_9 = (reserve for _, reserve in RESERVE_STEPS)


def pool_reserve(tokens: int) -> int:
    """Least sats a pool output holding `tokens` may carry: its dust threshold (`bch.policy`),
    which grows with the token amount's CompactSize width. A trade must leave a pool at least
    this for its token amount *after* the trade, or the re-created output is non-standard.
    (`RESERVE_STEPS` unrolled: the gate asks once per leg.)"""
    if tokens <= 0xFC:
        return _RESERVE_1
    if tokens <= 0xFFFF:
        return _RESERVE_3
    if tokens <= 0xFFFFFFFF:
        return _RESERVE_5
    return _RESERVE_9


def sell_out_cap(sats: int, tokens: int) -> int:
    """Most sats one sale may take from a pool (sats, tokens): the pool keeps `pool_reserve` of
    its token amount after the sale, and that amount stays ≤ 2^63−1.

    The tokens a payout needs grow with it, so the reserve steps up where they cross a width;
    for each width the best payout is the smaller of "sats less that width's reserve" and
    "what the tokens that fill the width buy" (`sell_tokens_exact_in`), and the cap is the
    largest over the widths (every candidate is feasible: a payout landing in a narrower
    width needs a smaller reserve)."""
    best = 0
    state = PoolState(sats, tokens)
    for top, reserve in RESERVE_STEPS:
        if top < tokens:
            continue
        keep = sats - reserve
        if keep <= best:
            break  # reserves only grow with the width
        room = top - tokens
        best = max(best, min(keep, sell_tokens_exact_in(state, room) if room > 0 else 0))
    return best


def sell_input_limit(sats: int, tokens: int) -> int:
    """Most tokens one sale may pay into a pool whatever it takes out: its token amount after
    the sale stays ≤ 2^63−1 and in a width whose reserve its sats still cover."""
    limit = 0
    for top, reserve in RESERVE_STEPS:
        if top >= tokens and sats >= reserve:
            limit = top - tokens
    return limit


def buy_out_cap(sats: int, tokens: int) -> int:
    """Most tokens one purchase may take from a pool (sats, tokens): the pool keeps one token,
    and the sats paid keep it within the 21e14 sats an output can hold."""
    cap = max(0, tokens - 1)
    room = MAX_SATS - sats
    if room < 1:
        return 0
    if cap:
        cap = min(cap, buy_tokens_exact_in(PoolState(sats, tokens), room))
    return cap


def pool_sell_cap(sats: int, tokens: int) -> int:
    """`sell_out_cap` of a pool that can sell at all (≥ 1 token and some sats), else 0."""
    return sell_out_cap(sats, tokens) if tokens >= 1 and sats else 0


def is_hex_id(text: object) -> bool:
    """A 64-character lowercase hex id (txid or token category, display order)."""
    return isinstance(text, str) and len(text) == 64 and _HEX.issuperset(text)


@dataclass(frozen=True, slots=True)
class Pool:
    """One pool UTXO as the router sees it: its on-chain data (ids are display-order lowercase
    hex). What routing derives from it lives with the solver's model (`router.solve.model`);
    its transaction and JSON encodings live with the book (`router.book.Encodings`)."""

    txid: str
    vout: int
    owner_pkh: bytes
    token_id: str
    sats: int
    tokens: int

    def __post_init__(self) -> None:
        if not is_hex_id(self.txid):
            raise ValueError(f"pool txid must be 64 lowercase hex characters: {self.txid!r}")
        if not is_hex_id(self.token_id):
            raise ValueError(f"token_id must be 64 lowercase hex characters: {self.token_id!r}")
        if not 0 <= self.vout <= 0xFFFFFFFF:
            raise ValueError(f"tx_pos out of range: {self.vout}")
        if len(self.owner_pkh) != 20:
            raise ValueError("owner_pkh must be 20 bytes")
        if not 0 <= self.sats <= MAX_SATS:
            raise ValueError(f"pool sats out of range: {self.sats}")
        if not 0 <= self.tokens <= MAX_TOKEN_AMOUNT:
            raise ValueError(f"pool tokens out of range: {self.tokens}")

    @property
    def state(self) -> PoolState:
        return PoolState(self.sats, self.tokens)

    @property
    def key(self) -> tuple[str, int]:
        return (self.txid, self.vout)

    @property
    def trade_size(self) -> int:
        """Bytes this pool adds to a trade: its input plus its re-created output."""
        return POOL_INPUT_SIZE + pool_output_size(self.tokens)


def is_tradable(pool: Pool) -> bool:
    """Can the router trade against this pool at all? (≥ 1 token, and sats ≥ the dust
    threshold of its own output: a buy leaves it as wide or narrower and with more sats, so
    the reserve keeps holding; a sale is capped by `sell_out_cap`.)"""
    return pool.tokens >= 1 and pool.sats >= pool_reserve(pool.tokens)


class PoolsFileError(ValueError):
    """The pools file (or JSON array) is malformed; the message names the entry and field."""


def _int_field(entry: Mapping[str, Any], name: str, where: str) -> int:
    value = entry.get(name)
    if isinstance(value, bool):
        raise PoolsFileError(f"{where}: {name} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise PoolsFileError(f"{where}: {name} must be an integer or an integer string")


def pool_from_json(entry: object, where: str = "pool") -> Pool:
    """One `{txid, tx_pos, owner_pkh, token_id, sats, tokens}` object (amounts: int or string)."""
    if not isinstance(entry, dict):
        raise PoolsFileError(f"{where}: expected an object")
    txid = entry.get("txid")
    token_id = entry.get("token_id")
    pkh = entry.get("owner_pkh")
    if not isinstance(txid, str) or not is_hex_id(txid.lower()):
        raise PoolsFileError(f"{where}: txid must be 64 hex characters")
    if not isinstance(token_id, str) or not is_hex_id(token_id.lower()):
        raise PoolsFileError(f"{where}: token_id must be 64 hex characters")
    if not isinstance(pkh, str) or len(pkh) != 40:
        raise PoolsFileError(f"{where}: owner_pkh must be 40 hex characters")
    try:
        owner = bytes.fromhex(pkh)
    except ValueError:
        raise PoolsFileError(f"{where}: owner_pkh is not hex") from None
    try:
        return Pool(
            txid.lower(),
            _int_field(entry, "tx_pos", where),
            owner,
            token_id.lower(),
            _int_field(entry, "sats", where),
            _int_field(entry, "tokens", where),
        )
    except ValueError as exc:
        raise PoolsFileError(f"{where}: {exc}") from None


def parse_pools(data: object) -> list[Pool]:
    """Every pool in a JSON array, tradable or not; a repeated outpoint is an error."""
    if not isinstance(data, list):
        raise PoolsFileError("the pools file must hold a JSON array of pools")
    pools = [pool_from_json(entry, f"pool {i}") for i, entry in enumerate(data)]
    seen: set[tuple[str, int]] = set()
    for i, pool in enumerate(pools):
        if pool.key in seen:
            raise PoolsFileError(f"pool {i}: outpoint {pool.txid}:{pool.vout} appears twice")
        seen.add(pool.key)
    return pools


def load_pools(path: str | Path) -> list[Pool]:
    """Read the offline pools file (OSError if unreadable, PoolsFileError if malformed)."""
    raw = Path(path).read_bytes()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise PoolsFileError(f"{path}: not valid JSON: {exc}") from None
    return parse_pools(data)


class PoolBook:
    """An immutable snapshot of tradable pools, grouped by token, plus a memo for the route
    search's per-token precomputation (sorting 2,000 pools once per snapshot, not per order).

    `version` and `height` identify the snapshot to clients (`snapshot_version`,
    `index_height`); the offline CLI has neither.
    """

    __slots__ = ("_by_token", "_lock", "_memo", "height", "version")

    def __init__(
        self,
        pools: Iterable[Pool],
        *,
        version: int | str | None = None,
        height: int | None = None,
    ) -> None:
        by_token: dict[str, list[Pool]] = {}
        for pool in pools:
            if is_tradable(pool):
                by_token.setdefault(pool.token_id, []).append(pool)
        self._by_token: dict[str, tuple[Pool, ...]] = {
            token: tuple(sorted(group, key=lambda p: p.key)) for token, group in by_token.items()
        }
        self._memo: dict[object, object] = {}
        self._lock = threading.Lock()
        self.version = version
        self.height = height

    def replaced(
        self,
        changes: Mapping[str, tuple[Iterable[Pool], Iterable[Pool]]],
        *,
        version: int | str | None = None,
        height: int | None = None,
    ) -> tuple[PoolBook, dict[str, tuple[list[Pool], list[Pool]]]]:
        """This book with, per token, the pools `removed` taken out and `added` put in
        (`changes[token] = (removed, added)`, tradable or not; the caller's promise: removed
        pools are in this book or untradable, added ones have outpoints not left in it).

        The other tokens' groups are shared as they are, and a changed token's group keeps
        its outpoint order by deleting and re-inserting with bisect, so one traded pool does
        not re-sort 20,000. Also returns the tradable pools each token lost and gained (what
        `route.update_models` needs). The memo starts empty."""
        book = PoolBook(())
        by_token = dict(self._by_token)
        moved: dict[str, tuple[list[Pool], list[Pool]]] = {}
        for token, (removed, added) in changes.items():
            group = list(by_token.get(token, ()))
            lost: list[Pool] = []
            for pool in removed:
                if not group or not is_tradable(pool):
                    continue
                i = bisect_left(group, pool.key, key=_outpoint)
                if i < len(group) and group[i] is pool:
                    del group[i]
                    lost.append(pool)
            gained = [pool for pool in added if is_tradable(pool)]
            for pool in gained:
                insort(group, pool, key=_outpoint)
            moved[token] = (lost, gained)
            if group:
                by_token[token] = tuple(group)
            else:
                by_token.pop(token, None)
        book._by_token = by_token
        book.version = version
        book.height = height
        return book, moved

    def pools(self, token_id: str) -> Sequence[Pool]:
        """The token's tradable pools (empty if the token has none)."""
        return self._by_token.get(token_id, ())

    def tokens(self) -> list[str]:
        return sorted(self._by_token)

    def find(self, token_id: str, key: tuple[str, int]) -> Pool | None:
        """The token's tradable pool at outpoint `key` (txid hex, vout), if any: a bisection
        of the group, which is kept in outpoint order."""
        group = self._by_token.get(token_id, ())
        i = bisect_left(group, key, key=_outpoint)
        if i < len(group) and group[i].key == key:
            return group[i]
        return None

    def __len__(self) -> int:
        return sum(len(group) for group in self._by_token.values())

    def peek(self, key: object) -> object | None:
        """What `memo` holds for `key`, without computing it (None when absent)."""
        return self._memo.get(key)

    def memo(self, key: object, factory: Callable[[], T]) -> T:
        """Compute `factory()` once per key for this snapshot (thread-safe)."""
        try:
            return self._memo[key]  # type: ignore[return-value]
        except KeyError:
            pass
        value = factory()
        with self._lock:
            return self._memo.setdefault(key, value)  # type: ignore[return-value]


def _outpoint(pool: Pool) -> tuple[str, int]:
    return pool.key


def changed_pools(old: PoolBook, new: PoolBook, token_id: str) -> list[tuple[str, int]]:
    """Outpoints of `token_id`'s pools that differ between two books: gone, new, or with
    another state (a pool the live book kept is the same object, so this is mostly `is`)."""
    a, b = old.pools(token_id), new.pools(token_id)
    if a is b or (len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))):
        return []
    before = {p.key: p for p in a}
    after = {p.key: p for p in b}
    changed: list[tuple[str, int]] = []
    for key in before.keys() | after.keys():
        x, y = before.get(key), after.get(key)
        if x is not y and x != y:
            changed.append(key)
    return sorted(changed)
