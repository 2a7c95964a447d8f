"""`tx.subscribe` and `route.subscribe`: re-route when the pools move, push only real changes.

A subscription names an order (the `tx.build` or `quote` params). Whenever the snapshot changes a
token the order trades (the only pools its route could use), the order is routed again on the
new book. A push goes out only when the outcome changed:
- `tx.subscribe`: the unsigned transaction bytes differ (new pools, amounts or funding), or the
  order stopped being buildable (an error push, once per distinct error), or became so again;
- `route.subscribe`: the quote's legs or amounts differ (not just the snapshot version).

Identical orders (same params, byte for byte after canonical JSON) are routed once and share
the result: a thousand wallets watching the same order cost one build per change. Each push is
handed to the subscriber's `deliver` callback as ready-made bytes; the daemon keeps only the
latest one per subscription (see `daemon.Outbox`), so a slow subscriber never queues pushes.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from router.book import LiveBook
from router.build import build
from router.errors import RouterError, build_failed
from router.params import BuildRequest, QuoteRequest, RouterConfig
from router.pools import BCH, PoolBook
from router.quotes import quote

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
    fingerprint: bytes | None = None  # what "changed" compares: tx bytes, legs, or the error
    body: bytes = b""  # the push's `"result": …` or `"error": …` member, serialized once


def _tokens(request: QuoteRequest) -> frozenset[str]:
    return frozenset(a for a in (request.sell, request.buy) if a != BCH)


def _quote_of(request: BuildRequest | QuoteRequest) -> QuoteRequest:
    return request.quote if isinstance(request, BuildRequest) else request


_UNSTABLE = ("snapshot_version", "index_height")


def evaluate(
    kind: Kind, request: BuildRequest | QuoteRequest, book: PoolBook, config: RouterConfig
) -> tuple[bytes, bytes]:
    """(fingerprint, body) of the order on `book`: the body is the push's result or error
    member as JSON bytes; equal fingerprints mean nothing a client acts on has changed."""
    try:
        if isinstance(request, BuildRequest):
            result = build(book, request, config)
            doc = result.to_json()
            return b"tx:" + result.tx.to_bytes(), b'"result":' + orjson.dumps(doc)
        q = quote(book, request, config)
        doc = q.to_json()
        stable = {k: v for k, v in doc.items() if k not in _UNSTABLE}
        return b"route:" + orjson.dumps(stable), b'"result":' + orjson.dumps(doc)
    except RouterError as exc:
        error = exc.to_json()
    except Exception:  # a router bug must not kill the subscription loop
        log.exception("re-routing a %s subscription failed", kind.value)
        error = build_failed("internal error while re-routing").to_json()
    return b"error:" + orjson.dumps(error), b'"error":' + orjson.dumps(error)


def push_message(kind: Kind, sub_id: str, body: bytes) -> bytes:
    """`{"method": "tx.update"|"route.update", "params": {"subscription": id, <body>}}`."""
    return (
        b'{"method":"'
        + kind.push_method.encode()
        + b'","params":{"subscription":'
        + orjson.dumps(sub_id)
        + b","
        + body
        + b"}}"
    )


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
            group.fingerprint, group.body = evaluate(
                kind, request, self._live.current(), self._config
            )
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

    def on_change(self, tokens: Iterable[str]) -> int:
        """Re-route every order trading one of `tokens`; returns how many pushes went out."""
        keys: set[tuple[Kind, bytes]] = set()
        for token in tokens:
            keys |= self._by_token.get(token, set())
        if not keys:
            return 0
        book = self._live.current()
        pushed = 0
        for key in keys:
            group = self._groups.get(key)
            if group is None:
                continue
            fingerprint, body = evaluate(group.kind, group.request, book, self._config)
            if fingerprint == group.fingerprint:
                continue
            group.fingerprint, group.body = fingerprint, body
            for sub_id, deliver in list(group.members.items()):
                deliver(sub_id, push_message(group.kind, sub_id, body))
                pushed += 1
        return pushed


def canonical_params(params: Any) -> bytes:
    """Identical orders share one routing: the params as sorted-key JSON."""
    return orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
