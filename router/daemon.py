"""The router's WebSocket JSON-RPC daemon: one JSON message per frame, over the live book.

    request  {"id", "method", "params": {…}}
    reply    {"id", "result"}  |  {"id", "error": {"code", "message", "data"?}}
    push     {"method": "tx.update" | "route.update",
              "params": {"subscription", "result" | "error"}}

Methods: `quote` (also `route.quote`), `tx.build`, `tx.subscribe` / `tx.unsubscribe`,
`route.subscribe` / `route.unsubscribe`, and `ping` (a no-op round trip, for health checks).
Limits, each answered in a way a client can act on: a frame over 1 MiB closes the connection
with 1009 (message too big); past `max_connections` the handshake gets HTTP 503; past the
per-connection request rate (a token bucket) a request gets `rate_limited`; unanswered pings
close the connection. Pushes never queue: each subscription has one slot holding its latest
push, so a slow reader skips the intermediate states (see `Outbox`).

Freshness: given the best tips heard (`heard`, the indexer's `TipWatch`), the daemon checks
every `FRESHNESS_INTERVAL` how far the snapshot lags (`indexer.freshness`). Beyond the bound
(`max_lag_blocks`, `max_lag_seconds`) it is stale: `quote`, `tx.build` and the subscribe methods
answer `stale_snapshot` (never a route from it), every subscription gets one `stale_snapshot`
error push and no other push until the snapshot is fresh again, when each gets its current
outcome. Plain HTTP `GET /health` and `GET /metrics` on the same port answer the daemon's state
and its Prometheus metrics (`router.health`).

Routing and building are synchronous and take milliseconds, so they run on the event loop:
no thread hand-off, and every request sees one consistent book.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from indexer.freshness import (
    DEFAULT_MAX_LAG_BLOCKS,
    DEFAULT_MAX_LAG_SECONDS,
    Bound,
    Heard,
    Lag,
    lag_of,
)
from router import wire
from router.book import LiveBook
from router.build import build
from router.errors import ErrorCode, RouterError, bad_request, build_failed
from router.health import health_response, is_plain_get, metrics_response
from router.metrics import RouterMetrics
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.quotes import quote
from router.subscriptions import Kind, Subscriptions, canonical_params
from runtime.heap import release_free_heap
from runtime.tasks import cancel_and_wait

log = logging.getLogger("router.daemon")

MAX_MESSAGE = 1 << 20  # 1 MiB: a 500-input tx.build request is about 110 kB
# Subscriptions hold kilobytes each (the push body), out of the C heap, which keeps freed memory
# below live blocks mapped: once this many have ended, garbage is collected and the heap's free
# pages are given back (`runtime.heap`), TRIM_DELAY seconds after the first, so a burst of
# closing connections costs one trim. Without it the resident size stays at the peak.
TRIM_AFTER = 100
TRIM_DELAY = 1.0
FRESHNESS_INTERVAL = 0.25  # seconds between two checks of the snapshot's lag
HeardSource = Callable[[], Heard]


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Connection-level limits (routing settings are `RouterConfig`)."""

    max_connections: int = 1000
    rate: float = 50.0  # requests per second per connection (token bucket refill)
    burst: int = 100  # bucket size: requests a connection may send at once
    max_subscriptions: int = 100  # per connection
    max_message: int = MAX_MESSAGE
    ping_interval: float | None = 20.0  # seconds; None disables keep-alive pings
    ping_timeout: float | None = 20.0
    close_timeout: float = 10.0  # how long a closing handshake may take before we drop it
    # Beyond either lag the snapshot is stale (only checked when the daemon hears tips).
    max_lag_blocks: int = DEFAULT_MAX_LAG_BLOCKS
    max_lag_seconds: float = DEFAULT_MAX_LAG_SECONDS

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if not self.rate > 0:
            raise ValueError("the request rate must be positive")
        if self.burst < 1:
            raise ValueError("the burst must be at least 1")
        Bound(self.max_lag_blocks, self.max_lag_seconds)  # raises ValueError when negative


class TokenBucket:
    """`rate` tokens per second up to `burst`; each request takes one."""

    __slots__ = ("_clock", "_last", "_level", "burst", "rate")

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._level = float(burst)
        self._last = clock()

    def take(self) -> float:
        """0 if a request may go now, else the seconds until one may."""
        now = self._clock()
        self._level = min(self.burst, self._level + (now - self._last) * self.rate)
        self._last = now
        if self._level >= 1.0:
            self._level -= 1.0
            return 0.0
        return (1.0 - self._level) / self.rate


class Outbox:
    """A connection's pending pushes: one slot per subscription holding only its latest push.
    A writer task drains the slots; a push arriving while the client is slow replaces the
    unsent one, so memory stays bounded by the number of subscriptions. A new subscription is
    held until its `{"subscription": id}` reply is sent, so the first push never precedes it."""

    def __init__(self, ws: ServerConnection) -> None:
        self._ws = ws
        self._slots: dict[str, bytes] = {}
        self._held: set[str] = set()
        self._ready = asyncio.Event()
        self.replaced = 0  # pushes dropped for a newer one (visible to tests and logs)

    def put(self, sub_id: str, message: bytes) -> None:
        if sub_id in self._slots:
            self.replaced += 1
        self._slots[sub_id] = message
        if sub_id not in self._held:
            self._ready.set()

    def hold(self, sub_id: str) -> None:
        self._held.add(sub_id)

    def release(self) -> None:
        if self._held:
            self._held.clear()
            self._ready.set()

    def drop(self, sub_id: str) -> None:
        self._slots.pop(sub_id, None)
        self._held.discard(sub_id)

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while True:
                sub_id = next((s for s in self._slots if s not in self._held), None)
                if sub_id is None:
                    break
                message = self._slots.pop(sub_id)
                await self._ws.send(message, text=True)  # orjson bytes are UTF-8


def not_found(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.NOT_FOUND, message, data or None)


def stale_snapshot(lag: Lag, bound: Bound) -> RouterError:
    behind = "unknown" if lag.lag_blocks is None else str(lag.lag_blocks)
    seconds = "unknown" if lag.lag_seconds is None else f"{lag.lag_seconds:.1f}"
    return RouterError(
        ErrorCode.STALE_SNAPSHOT,
        f"the pool snapshot is stale ({behind} blocks, {seconds} s behind the best tip heard; "
        f"at most {bound.max_lag_blocks} blocks and {bound.max_lag_seconds:g} s are served); "
        "retry later",
        {
            "index_height": lag.index_height,
            "best_height": lag.best_height,
            "lag_blocks": lag.lag_blocks,
            "lag_seconds": None if lag.lag_seconds is None else round(lag.lag_seconds, 3),
            "connected": lag.connected,
        },
    )


class RouterDaemon:
    """The protocol over a `LiveBook`; `serve()` binds it to a socket."""

    def __init__(
        self,
        live: LiveBook,
        config: RouterConfig,
        limits: DaemonConfig | None = None,
        heard: HeardSource | None = None,
    ) -> None:
        """`heard`: the best tips heard of (None: freshness is not checked, e.g. over a
        snapshot no indexer follows)."""
        self.live = live
        self.config = config
        self.limits = limits or DaemonConfig()
        self.subscriptions = Subscriptions(live, config)
        self.sessions: dict[ServerConnection, _Session] = {}
        self.heard = heard
        self.bound = Bound(self.limits.max_lag_blocks, self.limits.max_lag_seconds)
        self.lag: Lag | None = None  # as of the last check
        self.stale: Lag | None = None  # the lag, while beyond the bound
        self.metrics = RouterMetrics()
        self.started = time.time()
        self._watch_task: asyncio.Task[None] | None = None
        self._ended = 0  # subscriptions ended since the heap was last trimmed
        self._trim: asyncio.TimerHandle | None = None
        self.trims = 0  # heap trims done (for tests)
        self._freshness_task: asyncio.Task[None] | None = None
        self._methods: dict[str, Callable[[_Session, Any], Any]] = {
            "quote": self._quote,
            "route.quote": self._quote,
            "tx.build": self._build,
            "tx.subscribe": self._tx_subscribe,
            "tx.unsubscribe": self._tx_unsubscribe,
            "route.subscribe": self._route_subscribe,
            "route.unsubscribe": self._route_unsubscribe,
            "ping": self._ping,
        }

    @property
    def connections(self) -> list[ServerConnection]:
        return list(self.sessions)

    # --- server ---------------------------------------------------------------------------------

    async def serve(self, host: str, port: int) -> Server:
        """Listen on host:port (0: any free port) and follow the snapshot's changes."""
        self.start_watching()
        return await serve(
            self.handle,
            host,
            port,
            max_size=self.limits.max_message,
            ping_interval=self.limits.ping_interval,
            ping_timeout=self.limits.ping_timeout,
            close_timeout=self.limits.close_timeout,
            process_request=self._admit,
            compression=None,
        )

    def start_watching(self) -> None:
        if self._watch_task is None:
            self._watch_task = asyncio.create_task(self._watch(), name="router-watch")
        if self._freshness_task is None and self.heard is not None:
            self.check_freshness()
            self._freshness_task = asyncio.create_task(
                self._watch_freshness(), name="router-freshness"
            )

    async def stop_watching(self) -> None:
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        tasks = [t for t in (self._watch_task, self._freshness_task) if t is not None]
        self._watch_task = self._freshness_task = None
        await cancel_and_wait(tasks)

    async def _watch_freshness(self) -> None:
        while True:
            await asyncio.sleep(FRESHNESS_INTERVAL)
            try:
                self.check_freshness()
            except Exception:
                log.exception("checking the snapshot's freshness failed")

    def check_freshness(self) -> None:
        """Measure the lag; on becoming stale, tell every subscriber once (then hold their
        pushes); on becoming fresh, push each its current outcome."""
        if self.heard is None:
            return
        lag = self.lag = lag_of(self.live.snapshot.height, self.heard(), time.time())
        stale = lag if self.bound.stale(lag) else None
        was, self.stale = self.stale, None
        if stale is not None and was is None:
            error = stale_snapshot(lag, self.bound)
            log.warning("the snapshot is stale: %s", error.message, extra={"lag": lag.to_json()})
            self.subscriptions.push_all(wire.error_member(error))
        elif stale is None and was is not None:
            log.info("the snapshot is fresh again", extra={"lag": lag.to_json()})
            self.subscriptions.push_all()
        self.stale = stale

    async def _watch(self) -> None:
        """Coalesced snapshot changes → re-route the subscriptions on the changed tokens."""
        watcher = self.live.snapshot.watch()
        try:
            async for changes in watcher:
                tokens = {c.token for c in changes}
                try:
                    self.live.current()  # rebuild + prewarm even with no subscriber
                    await self.subscriptions.on_change_async(tokens)
                except Exception:
                    log.exception("re-routing after a snapshot change failed")
        finally:
            watcher.close()

    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        if is_plain_get(request, "/health"):
            return health_response(self.health())
        if is_plain_get(request, "/metrics"):
            return metrics_response(
                self.metrics.render(
                    connections=len(self.sessions),
                    subscriptions=len(self.subscriptions),
                    height=self.live.snapshot.height,
                    lag=self.lag,
                    stale=self.stale is not None,
                )
            )
        if len(self.sessions) >= self.limits.max_connections:
            response = connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, "too many connections, retry later\n"
            )
            response.headers["Retry-After"] = "1"
            return response
        return None

    async def handle(self, ws: ServerConnection) -> None:
        session = _Session(self, ws)
        self.sessions[ws] = session
        writer = asyncio.create_task(session.outbox.run())
        try:
            async for message in ws:
                out = self.dispatch(session, message)
                await ws.send(out, text=True)
                session.outbox.release()
        except ConnectionClosed:
            pass
        finally:
            self.sessions.pop(ws, None)
            self.subscriptions.remove_all(session.subs)
            self._ended_subscriptions(len(session.subs))
            await cancel_and_wait([writer])

    def health(self) -> dict[str, Any]:
        """`GET /health`: `ok`, or `stale` while requests get `stale_snapshot` (docs/router.md)."""
        snapshot = self.live.snapshot
        return {
            "status": "ok" if self.stale is None else "stale",
            "index_height": snapshot.height,
            "pools": len(snapshot),
            "connections": len(self.sessions),
            "subscriptions": len(self.subscriptions),
            "freshness": None if self.lag is None else self.lag.to_json(),
            "max_lag_blocks": self.bound.max_lag_blocks,
            "max_lag_seconds": self.bound.max_lag_seconds,
            "uptime_seconds": int(time.time() - self.started),
        }

    # --- one request ----------------------------------------------------------------------------

    def dispatch(self, session: _Session, message: str | bytes) -> bytes:
        """One frame → its reply (always one, even to garbage: a client must learn why). Every
        frame counts toward the rate, garbage included, so bad frames cannot be sent for free."""
        began = time.perf_counter()
        label, outcome = "invalid", "ok"
        malformed: orjson.JSONDecodeError | None = None
        try:
            doc = orjson.loads(message)
        except orjson.JSONDecodeError as exc:
            doc, malformed = None, exc
        req_id = doc.get("id") if isinstance(doc, dict) else None
        if isinstance(req_id, (dict, list)):
            req_id = None
        method = doc.get("method") if isinstance(doc, dict) else None
        if isinstance(method, str) and method in self._methods:
            label = method
        try:
            return self._dispatch(session, doc, req_id, malformed)
        except RouterError as exc:
            outcome = exc.code.value
            return wire.error_reply(req_id, exc)
        finally:
            self.metrics.observe(label, outcome, time.perf_counter() - began)

    def _dispatch(
        self,
        session: _Session,
        doc: Any,
        req_id: Any,
        malformed: orjson.JSONDecodeError | None,
    ) -> bytes:
        """The reply to one decoded frame; raises RouterError for the caller to answer."""
        wait = session.bucket.take()
        if wait:
            raise RouterError(
                ErrorCode.RATE_LIMITED,
                f"more than {self.limits.rate:g} requests per second; retry in {wait:.3f} s",
                {"retry_after": round(wait, 3)},
            )
        try:
            if malformed is not None:
                raise bad_request(f"malformed JSON: {malformed}")
            if not isinstance(doc, dict):
                raise bad_request("a request must be a JSON object {id, method, params}")
            if isinstance(doc.get("id"), (dict, list)):
                raise bad_request("id must be a string, a number or null")
            method = doc.get("method")
            if not isinstance(method, str):
                raise bad_request("method must be a string", field="method")
            handler = self._methods.get(method)
            if handler is None:
                raise not_found(f"unknown method {method!r}", method=method)
            unknown = sorted(set(doc) - {"id", "method", "params", "jsonrpc"})
            if unknown:
                raise bad_request(f"unknown request member(s): {', '.join(unknown)}")
            params = doc.get("params", {})
            return wire.reply(req_id, handler(session, params))
        except RouterError as exc:
            if exc.code is ErrorCode.BUILD_FAILED:
                log.warning("build_failed: %s %s", exc.message, exc.data)
            raise
        except Exception:
            log.exception("request failed")
            raise build_failed("internal error; it has been logged") from None

    # --- methods --------------------------------------------------------------------------------

    def _ping(self, session: _Session, params: Any) -> Any:
        return "pong"

    def _quote(self, session: _Session, params: Any) -> Any:
        request = parse_quote_params(params)
        if self.stale is not None:
            raise stale_snapshot(self.stale, self.bound)
        return orjson.Fragment(wire.quote_bytes(quote(self.live.current(), request, self.config)))

    def _build(self, session: _Session, params: Any) -> Any:
        request = parse_build_params(params, self.config)
        if self.stale is not None:
            raise stale_snapshot(self.stale, self.bound)
        return orjson.Fragment(wire.build_bytes(build(self.live.current(), request, self.config)))

    def _subscribe(self, session: _Session, kind: Kind, params: Any) -> Any:
        if len(session.subs) >= self.limits.max_subscriptions:
            raise bad_request(
                f"at most {self.limits.max_subscriptions} subscriptions per connection"
            )
        request = (
            parse_build_params(params, self.config)
            if kind is Kind.TX
            else parse_quote_params(params)
        )
        if self.stale is not None:
            raise stale_snapshot(self.stale, self.bound)
        outbox = session.outbox
        sub_id = self.subscriptions.add(
            kind, request, canonical_params(params), session.deliver, before=outbox.hold
        )
        session.subs.add(sub_id)
        return {"subscription": sub_id}

    def _unsubscribe(self, session: _Session, kind: Kind, params: Any) -> Any:
        sub_id = params.get("subscription") if isinstance(params, dict) else None
        if not isinstance(sub_id, str):
            raise bad_request("params.subscription must be a subscription id string")
        if sub_id not in session.subs or not self.subscriptions.remove(sub_id, kind):
            raise not_found(f"no {kind.value} subscription {sub_id!r} on this connection")
        session.subs.discard(sub_id)
        session.outbox.drop(sub_id)
        self._ended_subscriptions(1)
        return True

    def _ended_subscriptions(self, n: int) -> None:
        self._ended += n
        if self._ended >= TRIM_AFTER and self._trim is None:
            self._trim = asyncio.get_running_loop().call_later(TRIM_DELAY, self._trim_heap)

    def _trim_heap(self) -> None:
        self._trim, self._ended = None, 0
        # A closed connection is a reference cycle (connection, protocol, tasks) holding its
        # buffers, freed only by a full collection, which the frozen book makes rare: collect
        # it first, or its memory is not free yet when the heap is trimmed.
        gc.collect()
        if release_free_heap():
            self.trims += 1

    def _tx_subscribe(self, session: _Session, params: Any) -> Any:
        return self._subscribe(session, Kind.TX, params)

    def _route_subscribe(self, session: _Session, params: Any) -> Any:
        return self._subscribe(session, Kind.ROUTE, params)

    def _tx_unsubscribe(self, session: _Session, params: Any) -> Any:
        return self._unsubscribe(session, Kind.TX, params)

    def _route_unsubscribe(self, session: _Session, params: Any) -> Any:
        return self._unsubscribe(session, Kind.ROUTE, params)


class _Session:
    """Per-connection state: the rate limiter, the subscriptions and their push slots."""

    __slots__ = ("bucket", "daemon", "outbox", "subs", "ws")

    def __init__(self, daemon: RouterDaemon, ws: ServerConnection) -> None:
        self.daemon = daemon
        self.ws = ws
        self.bucket = TokenBucket(daemon.limits.rate, daemon.limits.burst)
        self.outbox = Outbox(ws)
        self.subs: set[str] = set()

    def deliver(self, sub_id: str, message: bytes) -> None:
        """A subscription's push, held back while the snapshot is stale (the subscriber was
        told; it gets the current outcome when the snapshot is fresh again)."""
        if self.daemon.stale is None:
            self.outbox.put(sub_id, message)


StopFn = Callable[[], Awaitable[None]]
