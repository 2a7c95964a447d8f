"""One connection to one Electrum server: version negotiation, request ids, batches, timeouts,
notifications and keep-alive pings.

`server.version` is the first message on every new connection and is never sent again on it
(servers refuse a second one); `request("server.version")` is therefore refused locally.
Request ids are integers counted per connection (never floats, which servers reject). Responses
are matched by id. A request given up on (timed out, or cancelled, e.g. the other fetches of a
block pipeline when one fails) is remembered as abandoned: its late response is expected and
dropped quietly (counted in `late_responses`). A response with an id never sent is a server
fault, logged as a warning at most once per `WARN_INTERVAL` with the count in between.
Notifications are handed, in arrival order, to `on_notification`, which is called from the
reading task and must not block (the pool queues them for its dispatcher).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from indexer.electrum.address import ServerAddress
from indexer.electrum.errors import (
    ElectrumConnectionError,
    ElectrumError,
    ElectrumProtocolError,
    ElectrumTimeout,
    error_of,
)
from indexer.electrum.transport import MAX_MESSAGE, Transport, open_transport
from runtime.tasks import cancel_and_wait

if TYPE_CHECKING:
    from indexer.electrum.capabilities import Capabilities

log = logging.getLogger(__name__)

PROTOCOL_RANGE = ("1.5", "1.6")  # below 1.5 servers silently hide token UTXOs
DEFAULT_TIMEOUT = 30.0
DEFAULT_PING_INTERVAL = 60.0  # servers drop clients idle for ~10 minutes
MAX_BATCH = 300  # Fulcrum's default limit is 345 per batch
MAX_ABANDONED = 100_000  # ids of given-up requests remembered (oldest forgotten first)
WARN_INTERVAL = 10.0  # seconds between two warnings of one kind on a connection

NotificationHandler = Callable[[str, list[Any]], None]
RpcCall = tuple[str, Sequence[Any]]


def parse_version(text: str) -> tuple[int, ...]:
    """'1.5' → (1, 5); ValueError when it is not a dotted version."""
    parts = tuple(int(p) for p in text.split("."))
    if not parts or any(p < 0 for p in parts):
        raise ValueError(f"invalid protocol version {text!r}")
    return parts


def _pad(version: tuple[int, ...]) -> tuple[int, ...]:
    return (*version, 0, 0, 0)[:3]


def _error_of(obj: object, method: str) -> ElectrumError:
    """The `error` member of a response as an ElectrumError, tolerating odd shapes."""
    if isinstance(obj, dict):
        code, message = obj.get("code"), obj.get("message")
        if isinstance(code, int) and not isinstance(code, bool) and isinstance(message, str):
            return error_of(code, message, method)
        code_int = code if isinstance(code, int) and not isinstance(code, bool) else 0
        return error_of(code_int, str(message if message is not None else obj), method)
    return ElectrumError(0, str(obj), method)


def _outcome(response: dict[str, Any], method: str) -> Any:
    error = response.get("error")
    if error is not None:
        return _error_of(error, method)
    return response.get("result")


class ElectrumConnection:
    """Use `await ElectrumConnection.open(address)`; the constructor takes a live transport."""

    def __init__(
        self,
        transport: Transport,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        max_batch: int = MAX_BATCH,
        on_notification: NotificationHandler | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.address = transport.address
        self.timeout = timeout
        self.ping_interval = ping_interval
        self.max_batch = max_batch
        self.server_software = ""
        self.protocol: tuple[int, ...] = ()
        self.capabilities: Capabilities | None = None  # filled by capabilities.detect
        self.close_reason: ElectrumConnectionError | None = None
        self._transport = transport
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._abandoned: dict[int, None] = {}  # insertion-ordered set
        self.late_responses = 0  # responses to abandoned requests, dropped
        self._unknown_ids = 0  # responses with ids never sent, since the last warning
        self._unknown_warned = -WARN_INTERVAL
        self._send_lock = asyncio.Lock()
        self._closed = asyncio.Event()
        self._negotiated = False
        loop = asyncio.get_running_loop()
        self._last_sent = loop.time()
        self._reader = loop.create_task(self._read_loop(), name=f"electrum-read {self.address}")
        self._pinger: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        address: ServerAddress | str,
        *,
        client_name: str = "ladle",
        versions: tuple[str, str] = PROTOCOL_RANGE,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 10.0,
        ping_interval: float | None = DEFAULT_PING_INTERVAL,
        max_batch: int = MAX_BATCH,
        ssl_ctx: ssl.SSLContext | None = None,
        max_message: int = MAX_MESSAGE,
        on_notification: NotificationHandler | None = None,
    ) -> ElectrumConnection:
        """Connect and negotiate the protocol; raises ElectrumConnectionError if either fails."""
        addr = ServerAddress.parse(address) if isinstance(address, str) else address
        transport = await open_transport(
            addr, timeout=connect_timeout, ssl_ctx=ssl_ctx, max_message=max_message
        )
        conn = cls(
            transport,
            timeout=timeout,
            ping_interval=ping_interval,
            max_batch=max_batch,
            on_notification=on_notification,
        )
        try:
            await conn._negotiate(client_name, versions, connect_timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    # --- state --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    @property
    def protocol_version(self) -> str:
        return ".".join(str(p) for p in self.protocol)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"protocol {self.protocol_version}"
        return f"<ElectrumConnection {self.address} {self.server_software!r} {state}>"

    # --- requests -----------------------------------------------------------------------------

    async def request(self, method: str, *params: Any, timeout: float | None = None) -> Any:
        """Call `method`; its result, or ElectrumError / ElectrumTimeout /
        ElectrumConnectionError."""
        if method == "server.version":
            raise ValueError("server.version is sent once per connection, by the connection")
        outcome = await self._call(method, list(params), timeout)
        if isinstance(outcome, ElectrumError):
            raise outcome
        return outcome

    async def batch(
        self, calls: Sequence[RpcCall], *, timeout: float | None = None
    ) -> list[Any | ElectrumError]:
        """Send `calls` as JSON-RPC batches of at most `max_batch` requests (one after the other;
        `timeout` applies to each). Returns each call's result or its ElectrumError, in order."""
        if any(method == "server.version" for method, _ in calls):
            raise ValueError("server.version is sent once per connection, by the connection")
        out: list[Any | ElectrumError] = []
        for start in range(0, len(calls), self.max_batch):
            out.extend(await self._batch(calls[start : start + self.max_batch], timeout))
        return out

    async def _call(self, method: str, params: list[Any], timeout: float | None) -> Any:
        limit = self.timeout if timeout is None else timeout
        req_id, fut = self._register()
        try:
            async with asyncio.timeout(limit):
                message = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
                await self._send(message)
                response = await fut
        except TimeoutError:
            raise ElectrumTimeout(f"{self.address}: {method} timed out after {limit}s") from None
        finally:
            self._release(req_id)
        return _outcome(response, method)

    async def _batch(self, calls: Sequence[RpcCall], timeout: float | None) -> list[Any]:
        limit = self.timeout if timeout is None else timeout
        registered = [self._register() for _ in calls]
        message = [
            {"jsonrpc": "2.0", "id": req_id, "method": method, "params": list(params)}
            for (req_id, _), (method, params) in zip(registered, calls, strict=True)
        ]
        try:
            async with asyncio.timeout(limit):
                await self._send(message)
                responses = [await fut for _, fut in registered]
        except TimeoutError:
            raise ElectrumTimeout(
                f"{self.address}: batch of {len(calls)} ({calls[0][0]}, …) timed out after {limit}s"
            ) from None
        finally:
            for req_id, fut in registered:
                self._release(req_id)
                if fut.done() and not fut.cancelled():
                    fut.exception()  # mark retrieved: only the first failure is raised
        return [_outcome(r, m) for r, (m, _) in zip(responses, calls, strict=True)]

    def _release(self, req_id: int) -> None:
        """Forget a request; one still unanswered is abandoned (its answer may yet arrive).
        A waiter's cancellation (a timeout included) cancels the future it awaited."""
        fut = self._pending.pop(req_id, None)
        unanswered = fut is not None and (fut.cancelled() or not fut.done())
        if unanswered and self.close_reason is None:
            self._abandoned[req_id] = None
            if len(self._abandoned) > MAX_ABANDONED:
                del self._abandoned[next(iter(self._abandoned))]

    def _gone(self) -> ElectrumConnectionError:
        """A fresh exception for each caller (one shared instance would pile up tracebacks)."""
        return ElectrumConnectionError(str(self.close_reason))

    def _register(self) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        if self.close_reason is not None:
            raise self._gone()
        req_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        return req_id, fut

    async def _send(self, message: object) -> None:
        data = orjson.dumps(message)
        async with self._send_lock:
            if self.close_reason is not None:
                raise self._gone()
            self._last_sent = asyncio.get_running_loop().time()
            try:
                await self._transport.send(data)
            except ElectrumConnectionError as exc:
                self._shutdown(exc)
                raise

    # --- negotiation and keep-alive -----------------------------------------------------------

    async def _negotiate(self, client_name: str, versions: tuple[str, str], timeout: float) -> None:
        if self._negotiated:
            raise RuntimeError("server.version was already sent on this connection")
        self._negotiated = True
        low, high = (_pad(parse_version(v)) for v in versions)
        try:
            outcome = await self._call("server.version", [client_name, list(versions)], timeout)
        except ElectrumTimeout as exc:
            raise ElectrumConnectionError(f"{self.address}: no answer to server.version") from exc
        if isinstance(outcome, ElectrumError):
            raise ElectrumConnectionError(
                f"{self.address}: server.version refused: {outcome.message}"
            )
        if (
            not isinstance(outcome, list)
            or len(outcome) != 2
            or not all(isinstance(x, str) for x in outcome)
        ):
            raise ElectrumConnectionError(f"{self.address}: bad server.version answer {outcome!r}")
        software, protocol = outcome
        try:
            chosen = parse_version(protocol)
        except ValueError:
            raise ElectrumConnectionError(
                f"{self.address}: bad protocol version {protocol!r}"
            ) from None
        if not low <= _pad(chosen) <= high:
            raise ElectrumConnectionError(
                f"{self.address}: server negotiated protocol {protocol}, outside {versions}"
            )
        self.server_software, self.protocol = software, chosen
        if self.ping_interval is not None and self.close_reason is None:
            self._pinger = asyncio.get_running_loop().create_task(
                self._ping_loop(self.ping_interval), name=f"electrum-ping {self.address}"
            )

    async def _ping_loop(self, interval: float) -> None:
        """Ping when nothing was sent for `interval` seconds; a ping that gets no answer means a
        dead connection, which is closed (the pool then reconnects)."""
        loop = asyncio.get_running_loop()
        while self.close_reason is None:
            wait = self._last_sent + interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self._call("server.ping", [], None)
            except ElectrumTimeout:
                self._shutdown(ElectrumConnectionError(f"{self.address}: keep-alive timed out"))
            except ElectrumConnectionError:
                return

    # --- receiving ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        reason: ElectrumConnectionError
        try:
            while True:
                raw = await self._transport.recv()
                try:
                    message = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    raise ElectrumProtocolError(
                        f"{self.address}: not JSON: {raw[:200]!r}"
                    ) from None
                if isinstance(message, list):
                    for item in message:
                        self._route(item)
                else:
                    self._route(message)
        except ElectrumConnectionError as exc:
            reason = exc
        except ElectrumProtocolError as exc:
            reason = ElectrumConnectionError(str(exc))
        except asyncio.CancelledError:
            reason = ElectrumConnectionError(f"{self.address}: connection closed")
        except Exception as exc:  # a bug in routing must not leave requests hanging
            log.exception("%s: reader failed", self.address)
            reason = ElectrumConnectionError(f"{self.address}: reader failed: {exc}")
        self._shutdown(reason)

    def _route(self, item: object) -> None:
        if not isinstance(item, dict):
            log.warning("%s: dropped a message that is not an object: %.200r", self.address, item)
            return
        req_id = item.get("id")
        if req_id is not None:
            fut = self._pending.get(req_id) if type(req_id) is int else None
            if fut is not None and not fut.done():
                fut.set_result(item)
            elif type(req_id) is int and req_id in self._abandoned:
                del self._abandoned[req_id]
                self.late_responses += 1
                log.debug("%s: late response to abandoned request %d", self.address, req_id)
            else:
                self._unknown_id(req_id)
            return
        method = item.get("method")
        if isinstance(method, str):
            params = item.get("params")
            args = params if isinstance(params, list) else [] if params is None else [params]
            if self._on_notification is None:
                log.debug("%s: unhandled notification %s", self.address, method)
                return
            try:
                self._on_notification(method, args)
            except Exception:
                log.exception("%s: notification handler failed for %s", self.address, method)
            return
        log.warning("%s: dropped a message without id or method: %.200r", self.address, item)

    def _unknown_id(self, req_id: object) -> None:
        """A response to nothing we sent: warn, but at most once per WARN_INTERVAL."""
        self._unknown_ids += 1
        now = asyncio.get_running_loop().time()
        if now - self._unknown_warned < WARN_INTERVAL:
            return
        log.warning(
            "%s: dropped %d response(s) with unknown ids (last %.80r)",
            self.address,
            self._unknown_ids,
            req_id,
        )
        self._unknown_ids, self._unknown_warned = 0, now

    # --- closing ------------------------------------------------------------------------------

    def _shutdown(self, reason: ElectrumConnectionError) -> None:
        """Mark closed, fail everything in flight, stop the tasks; the socket closes after."""
        if self.close_reason is not None:
            return
        self.close_reason = reason
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(self._gone())
        self._pending.clear()
        current = asyncio.current_task()
        for task in (self._reader, self._pinger):
            if task is not None and task is not current:
                task.cancel()
        self._closer = asyncio.get_running_loop().create_task(self._finish())

    async def _finish(self) -> None:
        try:
            await self._transport.close()
        finally:
            self._closed.set()

    async def close(self) -> None:
        """Close the connection; requests in flight fail with ElectrumConnectionError."""
        self._shutdown(ElectrumConnectionError(f"{self.address}: connection closed by client"))
        tasks = [t for t in (self._reader, self._pinger) if t is not None]
        current = asyncio.current_task()
        await cancel_and_wait(t for t in tasks if t is not current)
        await self._closed.wait()
