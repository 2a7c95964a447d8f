"""Failover across a list of Electrum servers: one active connection at a time, chosen by health.

- The active connection is opened lazily (or by `start()`, which first probes every server) to
  the available server with the best health score; a server whose connection failed is not
  retried before its backoff expires (exponential, with jitter; see `health`).
- A request that fails because the connection is lost is retried (up to `retries` more times)
  on a new connection, which may be to another server. A timeout is retried too; after
  `max_timeouts` in a row the connection is considered dead and replaced. Server errors
  (ElectrumError) are answers and are never retried. `retry=False` is for calls whose repetition
  the caller wants to decide on itself (broadcasts).
- Subscriptions are remembered. After every (re)connection they are renewed on the new
  connection, and a renewed value that differs from the last one delivered is delivered to the
  listeners as if notified, so nothing that happened while disconnected is missed. When the
  connection is lost while subscriptions exist, the pool reconnects in the background.
- Listeners run one at a time, in notification order, in the pool's dispatcher task (never in
  the socket reader), so a listener may itself await requests on the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from indexer.electrum.address import ServerAddress
from indexer.electrum.capabilities import Capabilities, detect
from indexer.electrum.connection import (
    DEFAULT_PING_INTERVAL,
    DEFAULT_TIMEOUT,
    MAX_BATCH,
    ElectrumConnection,
    RpcCall,
)
from indexer.electrum.errors import (
    EXCESSIVE_FLOOD,
    INTERNAL_ERROR,
    LIMIT_EXCEEDED,
    ElectrumClientError,
    ElectrumConnectionError,
    ElectrumError,
    ElectrumProtocolError,
    ElectrumTimeout,
    ServerBusy,
)
from indexer.electrum.health import Backoff, ServerHealth
from indexer.electrum.transport import MAX_MESSAGE
from runtime.lifecycle import Service
from runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")
MaybeAwaitable = Awaitable[None] | None
Listener = Callable[[list[Any]], MaybeAwaitable]  # receives the notification's params
ConnectListener = Callable[[ElectrumConnection], MaybeAwaitable]
OVERLOAD_CODES = frozenset({INTERNAL_ERROR, EXCESSIVE_FLOOD, LIMIT_EXCEEDED})


def _key(method: str, params: Sequence[Any]) -> str:
    return method + orjson.dumps(list(params)).decode()


@dataclass(eq=False, slots=True)
class Subscription:
    """A subscription `method(*params)`. Its notifications carry `[*params, value]`."""

    method: str
    params: tuple[Any, ...]
    listeners: list[Listener] = field(default_factory=list)
    last: list[Any] | None = None  # the last notification delivered (or the initial result)
    version: int = 0  # bumped on every delivery: detects a notification overtaking a result

    def notification(self, result: Any) -> list[Any]:
        return [*self.params, result]


class ElectrumPool(Service):
    def __init__(
        self,
        servers: Sequence[str | ServerAddress],
        *,
        client_name: str = "ladle",
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        max_batch: int = MAX_BATCH,
        retries: int = 2,
        max_timeouts: int = 2,
        backoff: Backoff | None = None,
        give_up_after: float | None = 60.0,
        ssl_ctx: ssl.SSLContext | None = None,
        max_message: int = MAX_MESSAGE,
        extensions: bool = True,
        genesis_hash: str | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`give_up_after`: seconds without reaching any server before ElectrumConnectionError
        (None: keep trying). `extensions=False` never uses Rostrum's methods (the Fulcrum
        fallback is used everywhere). `genesis_hash` (display hex), when given, rejects servers
        that report another chain."""
        addresses: list[ServerAddress] = []
        for server in servers:
            addr = ServerAddress.parse(server) if isinstance(server, str) else server
            if addr not in addresses:
                addresses.append(addr)
        if not addresses:
            raise ValueError("at least one Electrum server is needed")
        self.servers: tuple[ServerAddress, ...] = tuple(addresses)
        self.health = {a: ServerHealth(a) for a in addresses}
        self.client_name = client_name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.ping_interval = ping_interval
        self.max_batch = max_batch
        self.retries = retries
        self.max_timeouts = max_timeouts
        self.backoff = backoff or Backoff()
        self.give_up_after = give_up_after
        self.ssl_ctx = ssl_ctx
        self.max_message = max_message
        self.extensions = extensions
        self.genesis_hash = genesis_hash.lower() if genesis_hash else None
        self._rng = rng or random.Random()
        self._conn: ElectrumConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._subs: dict[str, Subscription] = {}
        self._connect_listeners: list[ConnectListener] = []
        self._queue: asyncio.Queue[Callable[[], MaybeAwaitable]] = asyncio.Queue()
        self._dispatcher: asyncio.Task[None] | None = None
        self._reconnector: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._timeouts_in_row = 0
        self._closing = False

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, probe: bool = True) -> None:
        """Probe every server (when there are several) and connect to the best one."""
        if probe and len(self.servers) > 1:
            await self.probe()
        await self.connection()

    async def close(self) -> None:
        self._closing = True
        tasks = [t for t in (self._reconnector, self._dispatcher) if t is not None]
        tasks += list(self._background)
        await cancel_and_wait(tasks)
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    # --- server choice ------------------------------------------------------------------------

    @property
    def current_server(self) -> ServerAddress | None:
        conn = self._conn
        return conn.address if conn is not None and conn.close_reason is None else None

    def ranking(self) -> list[ServerAddress]:
        """Servers in the order they would be tried: available ones by score (best first, ties
        in configured order), then those backing off, soonest first."""
        now = time.monotonic()
        ready = [a for a in self.servers if self.health[a].available(now)]
        waiting = [a for a in self.servers if not self.health[a].available(now)]
        ready.sort(key=lambda a: self.health[a].score(now))
        waiting.sort(key=lambda a: self.health[a].retry_at)
        return ready + waiting

    def status(self) -> list[dict[str, object]]:
        now = time.monotonic()
        current = self.current_server
        return [{**self.health[a].snapshot(now), "active": a == current} for a in self.ranking()]

    async def probe(self) -> None:
        """Measure every available server (connect, negotiate, ping) to seed the health scores."""

        async def one(addr: ServerAddress) -> None:
            health = self.health[addr]
            try:
                conn = await self._open(addr)
            except ElectrumConnectionError as exc:
                self._failed(addr, exc)
                return
            try:
                started = time.monotonic()
                await conn.request("server.ping")
                health.record_latency(time.monotonic() - started)
                health.record_connected()
            except ElectrumTimeout:
                health.record_timeout(time.monotonic())
            except ElectrumClientError as exc:
                self._failed(addr, exc)
            finally:
                await conn.close()

        now = time.monotonic()
        await asyncio.gather(*(one(a) for a in self.servers if self.health[a].available(now)))

    # --- connecting ---------------------------------------------------------------------------

    async def connection(self) -> ElectrumConnection:
        """The active connection, (re)connecting first when there is none."""
        if self._closing:
            raise ElectrumConnectionError("the Electrum pool is closed")
        conn = self._conn
        if conn is not None and conn.close_reason is None:
            return conn
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and conn.close_reason is None:
                return conn
            if conn is not None:
                self._lost(conn)
            conn = await self._connect_any()
            if self._closing:
                await conn.close()
                raise ElectrumConnectionError("the Electrum pool is closed")
            self._conn = conn
            self._timeouts_in_row = 0
            self._spawn(self._watch(conn))
            for listener in self._connect_listeners:
                self._enqueue(functools.partial(listener, conn))
            return conn

    async def _open(self, addr: ServerAddress) -> ElectrumConnection:
        return await ElectrumConnection.open(
            addr,
            client_name=self.client_name,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            ping_interval=self.ping_interval,
            max_batch=self.max_batch,
            ssl_ctx=self.ssl_ctx,
            max_message=self.max_message,
            on_notification=self._on_notification,
        )

    async def _connect_any(self) -> ElectrumConnection:
        start = time.monotonic()
        deadline = None if self.give_up_after is None else start + self.give_up_after
        while True:
            for addr in self.ranking():
                if self._closing:
                    raise ElectrumConnectionError("the Electrum pool is closed")
                if not self.health[addr].available(time.monotonic()):
                    continue
                conn = await self._try(addr)
                if conn is not None:
                    return conn
            now = time.monotonic()
            next_try = min(h.retry_at for h in self.health.values())
            if deadline is not None and max(now, next_try) > deadline:
                raise ElectrumConnectionError(
                    f"no Electrum server reachable within {self.give_up_after}s "
                    f"({', '.join(a.url for a in self.servers)})"
                )
            await asyncio.sleep(max(0.0, next_try - now))

    async def _try(self, addr: ServerAddress) -> ElectrumConnection | None:
        try:
            conn = await self._open(addr)
        except ElectrumConnectionError as exc:
            self._failed(addr, exc)
            return None
        try:
            await self._setup(conn)
        except ElectrumClientError as exc:
            await conn.close()
            self._failed(addr, exc)
            return None
        self.health[addr].record_connected()
        log.info(
            "connected to %s (%s, protocol %s)", addr, conn.server_software, conn.protocol_version
        )
        return conn

    async def _setup(self, conn: ElectrumConnection) -> None:
        """Capabilities, chain check, then renew the subscriptions on the new connection."""
        caps = await detect(conn, extensions=self.extensions)
        if self.genesis_hash is not None and caps.genesis_hash != self.genesis_hash:
            raise ElectrumConnectionError(
                f"{conn.address}: follows another chain (genesis {caps.genesis_hash})"
            )
        subs = [s for s in self._subs.values() if s.last is not None]
        if not subs:
            return
        seen = [s.version for s in subs]
        results = await conn.batch([(s.method, list(s.params)) for s in subs])
        for sub, version, result in zip(subs, seen, results, strict=True):
            if isinstance(result, ElectrumError):
                log.warning("%s: renewing %s failed: %s", conn.address, sub.method, result)
            elif sub.version == version:  # else a notification already brought newer news
                self._deliver(sub, sub.notification(result))

    def _failed(self, addr: ServerAddress, exc: BaseException | str) -> None:
        delay = self.health[addr].record_failure(time.monotonic(), self.backoff, self._rng)
        log.warning("%s: %s (next attempt in %.2fs)", addr, exc, delay)

    def _lost(self, conn: ElectrumConnection) -> None:
        """`conn` (if still the active one) failed: count it, close it, reconnect if needed."""
        if conn is not self._conn or self._closing:
            return
        self._conn = None
        self._failed(conn.address, conn.close_reason or "connection abandoned")
        self._spawn(conn.close())
        wanted = bool(self._subs or self._connect_listeners)
        if wanted and (self._reconnector is None or self._reconnector.done()):
            self._reconnector = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._closing:
            try:
                await self.connection()
                return
            except ElectrumConnectionError as exc:
                log.warning("reconnecting: %s", exc)
                await asyncio.sleep(self.backoff.base)

    async def _watch(self, conn: ElectrumConnection) -> None:
        await conn.wait_closed()
        self._lost(conn)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- requests -----------------------------------------------------------------------------

    async def run(
        self, op: Callable[[ElectrumConnection], Awaitable[T]], *, retry: bool = True
    ) -> T:
        """Run `op` on the active connection; on a lost connection or a timeout, run it again
        (up to `retries` more times) on a fresh connection, possibly to another server."""
        attempt = 0
        while True:
            conn = await self.connection()
            try:
                result = await op(conn)
            except ElectrumTimeout:
                self.health[conn.address].record_timeout(time.monotonic())
                self._timeouts_in_row += 1
                if self._timeouts_in_row >= self.max_timeouts:
                    log.warning("%s: %d timeouts in a row", conn.address, self._timeouts_in_row)
                    self._lost(conn)
                if not retry or attempt >= self.retries:
                    raise
            except ElectrumConnectionError:
                self._lost(conn)
                if not retry or attempt >= self.retries:
                    raise
            except ElectrumError as exc:
                self._timeouts_in_row = 0
                if isinstance(exc, ServerBusy) or exc.code in OVERLOAD_CODES:
                    self.health[conn.address].record_error(time.monotonic())
                raise
            except ElectrumProtocolError:
                self.health[conn.address].record_error(time.monotonic())
                raise
            else:
                self._timeouts_in_row = 0
                return result
            attempt += 1

    async def request(
        self, method: str, *params: Any, timeout: float | None = None, retry: bool = True
    ) -> Any:
        async def op(conn: ElectrumConnection) -> Any:
            started = time.monotonic()
            try:
                result = await conn.request(method, *params, timeout=timeout)
            except ElectrumError:  # an answer all the same: it measures the round trip
                self.health[conn.address].record_latency(time.monotonic() - started)
                raise
            self.health[conn.address].record_latency(time.monotonic() - started)
            return result

        return await self.run(op, retry=retry)

    async def batch(
        self, calls: Sequence[RpcCall], *, timeout: float | None = None, retry: bool = True
    ) -> list[Any | ElectrumError]:
        """Each call's result or ElectrumError, in order (see ElectrumConnection.batch)."""
        return await self.run(lambda conn: conn.batch(calls, timeout=timeout), retry=retry)

    async def capabilities(self) -> Capabilities:
        conn = await self.connection()
        assert conn.capabilities is not None  # set by _setup before a connection is used
        return conn.capabilities

    # --- subscriptions ------------------------------------------------------------------------

    async def subscribe(self, method: str, params: Sequence[Any], listener: Listener) -> Any:
        """Subscribe (once per distinct `method(*params)`, however many listeners) and return
        the current value; `listener` then receives each notification's params."""
        key = _key(method, params)
        sub = self._subs.get(key)
        if sub is None:
            sub = self._subs[key] = Subscription(method, tuple(params))
        sub.listeners.append(listener)
        self._ensure_dispatcher()
        if sub.last is not None:
            return sub.last[-1]
        seen = sub.version
        try:
            result = await self.request(method, *params)
        except BaseException:
            sub.listeners.remove(listener)
            if not sub.listeners and self._subs.get(key) is sub:
                del self._subs[key]
            raise
        if sub.version == seen:
            sub.last = sub.notification(result)
            sub.version += 1
        return result

    async def unsubscribe(self, method: str, params: Sequence[Any]) -> None:
        """Drop every listener of `method(*params)` and tell the server."""
        sub = self._subs.pop(_key(method, params), None)
        conn = self._conn
        if sub is None or conn is None or conn.close_reason is not None:
            return
        name = method.removesuffix("subscribe") + "unsubscribe"
        with contextlib.suppress(ElectrumClientError):
            await conn.request(name, *params)

    def add_connect_listener(self, listener: ConnectListener) -> None:
        """Called (in the dispatcher) after every new connection, e.g. to re-read the mempool."""
        self._connect_listeners.append(listener)
        self._ensure_dispatcher()

    def _on_notification(self, method: str, params: list[Any]) -> None:
        sub = self._subs.get(_key(method, params[:-1]))
        if sub is None:
            log.debug("notification for no subscription: %s %.200r", method, params)
            return
        self._deliver(sub, params)

    def _deliver(self, sub: Subscription, params: list[Any]) -> None:
        if params == sub.last:
            return
        sub.last = params
        sub.version += 1
        for listener in list(sub.listeners):
            self._enqueue(functools.partial(listener, params))

    def _enqueue(self, thunk: Callable[[], MaybeAwaitable]) -> None:
        self._queue.put_nowait(thunk)

    def _ensure_dispatcher(self) -> None:
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def _dispatch(self) -> None:
        while True:
            thunk = await self._queue.get()
            try:
                outcome = thunk()
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("an Electrum listener failed")
