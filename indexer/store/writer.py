"""The writer connection in its own process, so SQLite works in parallel with the event loop.

With aiosqlite the writer's SQLite calls run on a thread of the indexer's process, and every
statement step releases and re-takes the GIL: while the event loop decodes the next block, the
SQLite thread waits for the GIL after nearly every row, and the two threads end up taking turns
(the initial sync's wall time becomes the *sum* of both threads' CPU: docs/benchmarks.md).
Here the connection lives in a child process (`writer_child.py`): the event loop serializes each
statement list onto a pipe (`marshal`, or `pickle` for what marshal cannot hold) and goes on;
the child runs it on another core. Requests are pipelined and run in order, so `submit` (no
answer: block writes) never waits, an awaited statement waits for its own answer, and `collect`
returns the first error among the submissions since the last `collect`.

`Writer` is the typed client of that process, and the only way the store and the decoders reach
the database: awaited statements (`execute`, `execute_fetchall`, `executemany`,
`executescript`) and queued ones (`submit`, `submit_many`, checked by `collect` and
`commit_queued`).

Crash safety is unchanged: the child commits only when told to, in the order the requests were
sent, and on end of input (the parent exited or was killed) it closes the database without
committing, which rolls back the open transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import marshal
import pickle
import sqlite3
import struct
import sys
from collections import deque
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

Step = tuple[Any, ...]

_LEN = struct.Struct("<I")
_REQUEST = struct.Struct("<IB")  # body length, body format
_MARSHAL, _PICKLE = 0, 1
_CHILD = Path(__file__).with_name("writer_child.py")


class WriterGone(sqlite3.OperationalError):
    """The writer process exited (or could not start)."""


@dataclass(frozen=True, slots=True)
class Executed:
    """What one statement left: its rows, how many rows it changed, the last inserted rowid."""

    rows: list[tuple[Any, ...]]
    rowcount: int
    lastrowid: int | None


def _params(parameters: Iterable[Any] | None) -> Any:
    if parameters is None:
        return ()
    return parameters if isinstance(parameters, tuple | list | dict) else list(parameters)


class Writer:
    """See the module doc. Open with `await Writer(path)`."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._in_tx = False
        self._posted = 0
        self._joined: list[Step] = []  # posted steps not yet sent
        self._gone: BaseException | None = None

    # --- life cycle ------------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, Writer]:
        return self._start().__await__()

    async def _start(self) -> Writer:
        if self._proc is None:
            self._proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-I", "-S", str(_CHILD), self._path),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            widen_pipe(self._proc.stdin.transport if self._proc.stdin else None)
            self._reader = asyncio.create_task(self._read_answers())
        return self

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None and self._gone is None:
            with contextlib.suppress(ConnectionError, WriterGone):
                self._send_posts()
                proc.stdin.write(_frame(("close", [])))
                await proc.stdin.drain()
                proc.stdin.close()
        await proc.wait()
        if self._reader is not None:
            await self._reader  # ends at the child's end of output
        self._fail(WriterGone("the writer connection is closed"))

    # --- requests ----------------------------------------------------------------------------

    def submit(self, steps: Sequence[Step]) -> None:
        """Queue `steps` (see `indexer.store.writer_child.run_steps`) and return at once: the
        event loop decodes the next block while SQLite writes this one, and anything sent
        later runs after them. Errors come back from `collect` (a failed write therefore never
        commits). Submissions are joined into one request until the next `pace` or request: a
        block's writes (the store's and every decoder's) cost one serialization and one pipe
        write."""
        if self._gone is not None:
            raise WriterGone(str(self._gone))
        self._joined.extend(steps)
        self._posted += 1

    def _send_posts(self) -> None:
        if self._joined:
            steps, self._joined = self._joined, []
            self._send(("post", steps))

    async def call(self, steps: Sequence[Step]) -> Any:
        """Run `steps` after everything sent before; their result (see `run_steps`)."""
        future = self._request(("call", list(steps)))
        await self._drain()
        return await future

    def submit_many(self, statements: Sequence[tuple[str, Sequence[Sequence[object]]]]) -> None:
        """`submit` one `executemany` per (sql, rows) with rows, all in one request; nothing is
        queued if every statement's rows are empty (a block without rows costs nothing).
        Refuses to run outside a transaction (SQLite may have ended it on an earlier error)."""
        todo: list[Step] = [("many", sql, rows, None, "") for sql, rows in statements if rows]
        if todo:
            self.submit([("need_tx", "no open transaction for the submitted writes"), *todo])

    async def collect(self) -> None:
        """Wait for every submitted write so far; raise the first one's error, if any."""
        future = self._request(("sync", []))
        self._posted = 0
        await self._drain()
        error = await future
        if error is not None:
            raise error

    def commit_queued(self) -> asyncio.Future[BaseException | None]:
        """Queue a COMMIT of the open transaction, made only if every write submitted since the
        last `collect` ran (else the child rolls back, and refuses every later submission and
        commit until the next `collect`); the future gives the error, or None. Awaiting it
        later, not now, lets the event loop go on while the child catches up."""
        return self._request(("commit", []))

    async def pace(self) -> None:
        """Let the event loop hand buffered requests to the pipe. The pipe is written when the
        loop reaches its selector, and a busy loop whose awaits all complete at once (blocks
        already fetched, no SQLite answer awaited) may not get there for a whole batch: the
        writer would sit idle, then get the batch at once. One loop turn when anything waits."""
        if self._gone is None:
            self._send_posts()
        proc = self._proc
        if proc is not None and proc.stdin and proc.stdin.transport.get_write_buffer_size():
            await asyncio.sleep(0)

    @property
    def pending(self) -> int:
        """Submissions since the last `collect`."""
        return self._posted

    @property
    def in_transaction(self) -> bool:
        """As of the last answer (exact right after any awaited request)."""
        return self._in_tx

    # --- awaited statements ------------------------------------------------------------------

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> Executed:
        rows, rowcount, lastrowid = await self.call([("exec", sql, _params(parameters))])
        return Executed(rows, rowcount, lastrowid)

    async def execute_fetchall(
        self, sql: str, parameters: Iterable[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        rows, _, _ = await self.call([("exec", sql, _params(parameters))])
        return cast(list[tuple[Any, ...]], rows)

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> None:
        await self.call([("many", sql, [_params(p) for p in parameters], None, "")])

    async def executescript(self, sql_script: str) -> None:
        await self.call([("script", sql_script)])

    async def __aenter__(self) -> Writer:
        return await self._start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the pipe ----------------------------------------------------------------------------

    def _send(self, request: tuple[str, list[Step]]) -> None:
        if self._gone is not None:
            raise WriterGone(str(self._gone))
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise WriterGone("the writer connection is not open")
        proc.stdin.write(_frame(request))

    def _request(self, request: tuple[str, list[Step]]) -> asyncio.Future[Any]:
        self._send_posts()  # everything posted before runs first
        self._send(request)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return future

    async def _drain(self) -> None:
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            try:
                await proc.stdin.drain()
            except ConnectionError as exc:
                self._fail(WriterGone(f"the writer process is gone: {exc}"))

    async def _read_answers(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        out = proc.stdout
        try:
            while True:
                head = await out.readexactly(4)
                ok, value, in_tx = pickle.loads(await out.readexactly(_LEN.unpack(head)[0]))
                self._in_tx = in_tx
                future = self._waiting.popleft()
                if future.done():  # its caller was cancelled; the order still holds
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except (asyncio.IncompleteReadError, ConnectionError):
            self._fail(WriterGone("the writer process exited"))
        except Exception as exc:  # an answer that does not load, or with no request waiting:
            # the pipe cannot be trusted any more, and no request may wait forever
            self._fail(WriterGone(f"the writer's answers broke off: {exc!r}"))
            if self._proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()

    def _fail(self, error: BaseException) -> None:
        self._gone = self._gone or error
        self._in_tx = False
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(WriterGone(str(error)))


def widen_pipe(transport: asyncio.BaseTransport | None) -> None:
    """Give a pipe 1 MiB instead of Linux's default 64 KiB (where allowed): the writer's
    requests of a few hundred blocks, or the fetch process's blocks, then fit without waiting
    for the reading side to come round."""
    if transport is None or not hasattr(fcntl, "F_SETPIPE_SZ"):
        return
    with contextlib.suppress(OSError, AttributeError, ValueError):
        fcntl.fcntl(transport.get_extra_info("pipe").fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)


def _frame(request: tuple[str, list[Step]]) -> bytes:
    """A request for the child: its length, its format, then its body. Rows are tuples of
    bytes, ints, None and strings, which `marshal` writes 2.7x and the child reads 1.4x as fast
    as `pickle` (docs/benchmarks.md; a bytearray arrives as bytes, the same blob); anything
    marshal cannot hold (another type, even a subclass of one it can) is pickled."""
    try:
        body, kind = marshal.dumps(request, 4), _MARSHAL
    except ValueError:
        body, kind = pickle.dumps(request, pickle.HIGHEST_PROTOCOL), _PICKLE
    return _REQUEST.pack(len(body), kind) + body
