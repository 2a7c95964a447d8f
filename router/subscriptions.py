"""`tx.subscribe` and `route.subscribe`: re-route when the pools move, push only real changes.

A subscription names an order (the `tx.build` or `quote` params). Whenever the snapshot changes a
token the order trades (the only pools its route could use), the order is routed again on the
new book. A push goes out only when the outcome changed:
- `tx.subscribe`: the unsigned transaction bytes differ (new pools, amounts or funding), or the
  order stopped being buildable (an error push, once per distinct error), or became so again;
- `route.subscribe`: the quote's legs or amounts differ (not just the snapshot version).

Identical orders (same params, byte for byte after canonical JSON) are routed once and share
the result: a thousand wallets watching the same order cost one build per change. Distinct
orders are routed again only when the change could move them: each routing records the
footprint of its hops (`route.HopFootprint`: the pools the split admitted or traded, the
entry point a pool must reach to join, the route's value); a change whose pools all stay
outside it provably leaves the transaction as it was, so the order is not routed at all
(`footprints.footprint_holds`). Errors have no footprint: an order in error is routed on every
change of its tokens. Each push is
handed to the subscriber's `deliver` callback as ready-made bytes; the daemon keeps only the
latest one per subscription (see `daemon.Outbox`), so a slow subscriber never queues pushes.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from router import wire
from router.book import LiveBook
from router.build import build
from router.errors import RouterError, build_failed
from router.footprints import footprint_holds
from router.params import BuildRequest, QuoteRequest, RouterConfig
from router.pools import BCH, PoolBook, changed_pools
from router.quotes import quote
from router.route import HopFootprint

log = logging.getLogger("router.subscriptions")

Deliver = Callable[[str, bytes], None]  # (subscription id, complete push message)


class Kind(StrEnum):
    TX = "tx"
    ROUTE = "route"

    @property
    def push_method(self) -> str:
        return f"{self.value}.update"


@dataclass(slots=True)
class _Group:
    """Subscribers of one identical order, and the last outcome pushed to them."""

    kind: Kind
    request: BuildRequest | QuoteRequest
    tokens: frozenset[str]
    members: dict[str, Deliver] = field(default_factory=dict)
    fingerprint: bytes | None = None  # what "changed" compares (`evaluate`)
    body: bytes = b""  # the push's `"result": …` or `"error": …` member, serialized once
    book: PoolBook | None = None  # the book the outcome holds for
    footprints: tuple[HopFootprint, ...] | None = None  # None: route again on any change


def _tokens(request: QuoteRequest) -> frozenset[str]:
    return frozenset(a for a in (request.sell, request.buy) if a != BCH)


def _quote_of(request: BuildRequest | QuoteRequest) -> QuoteRequest:
    return request.quote if isinstance(request, BuildRequest) else request


_UNSTABLE = ("snapshot_version", "index_height")
ERROR_MARK = b"error:"  # an error's fingerprint starts with it: errors have no footprints


def _digest(outcome: bytes) -> bytes:
    """What a group keeps of an outcome (an order, a transaction, a route, an error) to compare
    it: 32 bytes instead of kilobytes, ten thousand subscriptions over."""
    return hashlib.blake2b(outcome, digest_size=32).digest()


def evaluate(
    kind: Kind,
    request: BuildRequest | QuoteRequest,
    book: PoolBook,
    config: RouterConfig,
    trace: list[HopFootprint] | None = None,
) -> tuple[bytes, bytes]:
    """(fingerprint, body) of the order on `book`: the body is the push's result or error
    member as JSON bytes; equal fingerprints (digests of the tx bytes, of the quote without its
    snapshot fields, or of the error) mean nothing a client acts on has changed. `trace`
    collects the footprints of the hops routed."""
    try:
        if isinstance(request, BuildRequest):
            result = build(book, request, config, trace=trace)
            return _digest(b"tx:" + result.tx.to_bytes()), wire.result_member(
                wire.build_bytes(result)
            )
        q = quote(book, request, config, trace=trace)
        doc = wire.quote_doc(q)
        stable = {k: v for k, v in doc.items() if k not in _UNSTABLE}
        return _digest(b"route:" + wire.canonical(stable)), wire.result_member(wire.quote_bytes(q))
    except RouterError as exc:
        error = exc
    except Exception:  # a router bug must not kill the subscription loop
        log.exception("re-routing a %s subscription failed", kind.value)
        error = build_failed("internal error while re-routing")
    body = wire.error_member(error)
    return ERROR_MARK + _digest(body), body


def push_message(kind: Kind, sub_id: str, body: bytes) -> bytes:
    """`{"method": "tx.update"|"route.update", "params": {"subscription": id, <body>}}`."""
    return wire.push(kind.push_method, sub_id, body)


class Subscriptions:
    """Every live subscription of one daemon, grouped by identical order."""

    def __init__(self, live: LiveBook, config: RouterConfig) -> None:
        self._live = live
        self._config = config
        self._groups: dict[tuple[Kind, bytes], _Group] = {}
        self._by_id: dict[str, tuple[Kind, bytes]] = {}
        self._by_token: dict[str, set[tuple[Kind, bytes]]] = {}
        self._counter = itertools.count(1)
        self._salt = secrets.token_hex(4)
        self.routed = 0  # orders routed again after a change (for tests and benchmarks)
        self.skipped = 0  # … and shown unchanged by their footprint instead

    def __len__(self) -> int:
        return len(self._by_id)

    def add(
        self,
        kind: Kind,
        request: BuildRequest | QuoteRequest,
        canonical: bytes,
        deliver: Deliver,
        *,
        before: Callable[[str], None] | None = None,
    ) -> str:
        """Subscribe; the current outcome is delivered at once (the first push), after
        `before(sub_id)` (the daemon uses it to hold the push until its reply is out)."""
        sub_id = f"{kind.value}-{self._salt}-{next(self._counter)}"
        if before is not None:
            before(sub_id)
        key = (kind, canonical)
        group = self._groups.get(key)
        if group is None:
            group = _Group(kind, request, _tokens(_quote_of(request)))
            self._evaluate(group, self._live.current())
            self._groups[key] = group
            for token in group.tokens:
                self._by_token.setdefault(token, set()).add(key)
        group.members[sub_id] = deliver
        self._by_id[sub_id] = key
        deliver(sub_id, push_message(kind, sub_id, group.body))
        return sub_id

    def remove(self, sub_id: str, kind: Kind | None = None) -> bool:
        """Unsubscribe; False if the id is unknown (or of another kind)."""
        key = self._by_id.get(sub_id)
        if key is None or (kind is not None and key[0] is not kind):
            return False
        del self._by_id[sub_id]
        group = self._groups[key]
        del group.members[sub_id]
        if not group.members:
            del self._groups[key]
            for token in group.tokens:
                keys = self._by_token.get(token)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_token[token]
        return True

    def remove_all(self, sub_ids: Iterable[str]) -> None:
        for sub_id in list(sub_ids):
            self.remove(sub_id)

    def push_all(self, body: bytes | None = None) -> int:
        """Push every subscription `body` (a push's `"result": …` or `"error": …` member; None:
        its group's current outcome), e.g. the daemon's stale_snapshot notice and the outcomes
        after it. Returns how many pushes went out."""
        pushed = 0
        for group in list(self._groups.values()):
            member_body = group.body if body is None else body
            for sub_id, deliver in list(group.members.items()):
                deliver(sub_id, push_message(group.kind, sub_id, member_body))
                pushed += 1
        return pushed

    def _evaluate(self, group: _Group, book: PoolBook) -> bool:
        """Route `group`'s order on `book`; True if the outcome changed."""
        trace: list[HopFootprint] = []
        fingerprint, body = evaluate(group.kind, group.request, book, self._config, trace)
        group.book = book
        group.footprints = None if fingerprint.startswith(ERROR_MARK) else tuple(trace)
        if fingerprint == group.fingerprint:
            return False
        group.fingerprint, group.body = fingerprint, body
        return True

    def _unmoved(self, group: _Group, book: PoolBook, diffs: _Diffs) -> bool:
        """Does `group`'s outcome provably hold on `book` too (no routing needed)?"""
        old = group.book
        if old is None or group.footprints is None:
            return False
        if old is book:
            return True
        for fp in group.footprints:
            if not footprint_holds(fp, old, book, diffs.get(old, book, fp.token_id)):
                return False
        return True

    def _refresh(self, key: tuple[Kind, bytes], book: PoolBook, diffs: _Diffs) -> int | None:
        """Bring one group up to `book`: None if it was shown unchanged without routing,
        else how many pushes went out."""
        group = self._groups.get(key)
        if group is None:
            return 0
        if self._unmoved(group, book, diffs):
            group.book = book
            self.skipped += 1
            return None
        self.routed += 1
        if not self._evaluate(group, book):
            return 0
        for sub_id, deliver in list(group.members.items()):
            deliver(sub_id, push_message(group.kind, sub_id, group.body))
        return len(group.members)

    def _affected(self, tokens: Iterable[str]) -> list[tuple[Kind, bytes]]:
        keys: set[tuple[Kind, bytes]] = set()
        for token in tokens:
            keys |= self._by_token.get(token, set())
        return list(keys)

    def on_change(self, tokens: Iterable[str]) -> int:
        """Bring every order trading one of `tokens` up to the current book (routing again
        only those the change could move); returns how many pushes went out."""
        keys = self._affected(tokens)
        if not keys:
            return 0
        book = self._live.current()
        diffs = _Diffs()
        return sum(self._refresh(key, book, diffs) or 0 for key in keys)

    async def on_change_async(self, tokens: Iterable[str], batch: int = 16) -> int:
        """`on_change`, yielding to the event loop after every `batch` orders routed, so a
        change that moves many orders does not starve other requests."""
        keys = self._affected(tokens)
        if not keys:
            return 0
        book = self._live.current()
        diffs = _Diffs()
        pushed = routed = 0
        for key in keys:
            n = self._refresh(key, book, diffs)
            if n is None:
                continue
            pushed += n
            routed += 1
            if routed % batch == 0:
                await asyncio.sleep(0)
        return pushed


class _Diffs:
    """`changed_pools` per (old book, token), computed once per change for all groups."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, str], list[tuple[str, int]]] = {}
        self._books: list[PoolBook] = []  # keeps ids valid while cached

    def get(self, old: PoolBook, new: PoolBook, token: str) -> list[tuple[str, int]]:
        key = (id(old), token)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = changed_pools(old, new, token)
            self._books.append(old)
        return found


def canonical_params(params: Any) -> bytes:
    """Identical orders share one routing: a digest of the params as sorted-key JSON (the key of
    their group, held as long as it lives)."""
    return _digest(wire.canonical(params))
