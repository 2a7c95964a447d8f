"""libauth as the independent verifier of every transaction we build or accept.

Our `bch` layer must not be the only judge of its own output, so a long-lived Node process
(`verifier.mjs`) runs libauth's BCH virtual machines and answers JSON lines. Starting Node and
building a VM costs far more than verifying a transaction, hence one process for many requests.

Callers must fail closed: `VerifierUnavailable` means "unknown", never "valid".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import selectors
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import orjson

from bch.tx import Transaction, TxOutput, encode_outputs
from runtime.lifecycle import Closing

SCRIPT = Path(__file__).with_name("verifier.mjs")
VMS = (2025, 2026)
_MAX_LINE = 1 << 24  # replies are short; this only bounds a misbehaving helper


class VerifierUnavailable(RuntimeError):  # noqa: N818 (the name callers know)
    """The helper cannot give an answer (Node or libauth missing, process dead or stuck)."""


@dataclass(frozen=True, slots=True)
class VerifyResult:
    valid: bool
    error: str | None = None


class _HelperDiedError(Exception):
    """The helper process went away mid-request; worth one restart."""


def _tx_hex(tx: Transaction | str) -> str:
    return tx if isinstance(tx, str) else tx.hex()


def _outputs_hex(source_outputs: Sequence[TxOutput] | str) -> str:
    if isinstance(source_outputs, str):
        return source_outputs
    return encode_outputs(source_outputs).hex()


def _encode_request(
    request_id: int,
    tx: Transaction | str,
    source_outputs: Sequence[TxOutput] | str,
    vm: int,
    standard: bool,
) -> bytes:
    if vm not in VMS:
        raise ValueError(f"vm must be one of {VMS}, got {vm!r}")
    body = {
        "id": request_id,
        "tx": _tx_hex(tx),
        "source_outputs": _outputs_hex(source_outputs),
        "vm": vm,
        "standard": bool(standard),
    }
    return orjson.dumps(body) + b"\n"


def _decode_reply(line: bytes) -> tuple[object, VerifyResult]:
    """Parse one reply line; anything unexpected means the helper cannot be trusted."""
    try:
        reply = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise _HelperDiedError(f"helper wrote a line that is not JSON: {line[:200]!r}") from exc
    if not isinstance(reply, dict) or not isinstance(reply.get("valid"), bool):
        raise _HelperDiedError(f"helper wrote an unexpected reply: {line[:200]!r}")
    if reply["valid"]:
        return reply.get("id"), VerifyResult(True, None)
    return reply.get("id"), VerifyResult(False, str(reply.get("error", "invalid")))


def _decode_ready(line: bytes, stderr_tail: str) -> str:
    """Check the helper's first line; return the libauth version it loaded."""
    if not line:
        raise VerifierUnavailable(f"verifier exited during start-up: {stderr_tail or 'no output'}")
    try:
        hello = orjson.loads(line)
    except orjson.JSONDecodeError:
        hello = None
    if not isinstance(hello, dict):
        raise VerifierUnavailable(f"verifier did not start: {line[:200]!r}")
    if hello.get("ready") is not True:
        raise VerifierUnavailable(f"verifier did not start: {hello.get('error', hello)}")
    return str(hello.get("libauth", "unknown"))


def _read_tail(fh: IO[bytes] | None, limit: int = 2000) -> str:
    if fh is None:
        return ""
    try:
        fh.seek(0)
        return fh.read()[-limit:].decode(errors="replace").strip()
    except (OSError, ValueError):
        return ""


def _command(node: str, script: Path) -> list[str]:
    if not script.is_file():
        raise VerifierUnavailable(f"verifier script not found: {script}")
    return [node, str(script)]


class _HelperClient:
    """What both clients are configured with: the Node binary, the helper script, how long a
    request and the start-up may take. The helper starts lazily, on the first request."""

    def __init__(
        self,
        *,
        node: str = "node",
        script: Path | str = SCRIPT,
        timeout: float = 30.0,
        start_timeout: float = 30.0,
    ) -> None:
        self.node = node
        self.script = Path(script)
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.libauth_version: str | None = None
        self._ids = itertools.count(1)
        self._init_client()

    def _init_client(self) -> None:
        """The client's own state (no process yet)."""


class LibauthVerifier(_HelperClient):
    """Synchronous, thread-safe client of one long-lived helper process (started lazily)."""

    def _init_client(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._buf = bytearray()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The helper's process id, or None before start or after close."""
        proc = self._proc
        return proc.pid if proc is not None else None

    def start(self) -> None:
        """Start the helper now instead of on the first `verify`."""
        with self._lock:
            self._ensure_started()

    def close(self) -> None:
        with self._lock:
            self._stop(graceful=True)

    def verify(
        self,
        tx: Transaction | str,
        source_outputs: Sequence[TxOutput] | str,
        *,
        vm: int = 2026,
        standard: bool = True,
    ) -> VerifyResult:
        """Verify `tx` spending `source_outputs` (one per input, in input order)."""
        with self._lock:
            request_id = next(self._ids)
            line = _encode_request(request_id, tx, source_outputs, vm, standard)
            for attempt in (1, 2):
                self._ensure_started()
                try:
                    return self._roundtrip(request_id, line)
                except _HelperDiedError as exc:
                    self._stop(graceful=False)
                    if attempt == 2:
                        raise VerifierUnavailable(f"verifier died twice: {exc}") from exc
        raise AssertionError("unreachable")

    # --- process management (all called with the lock held) -----------------------------

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stop(graceful=False)
        cmd = _command(self.node, self.script)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                cwd=self.script.parent,
            )
        except OSError as exc:
            self._stop(graceful=False)
            raise VerifierUnavailable(f"cannot start {self.node!r}: {exc}") from exc
        self._buf.clear()
        try:
            first = self._read_line(time.monotonic() + self.start_timeout)
        except _HelperDiedError as exc:
            tail = _read_tail(self._stderr)
            self._stop(graceful=False)
            raise VerifierUnavailable(f"verifier did not start: {exc} {tail}".strip()) from exc
        try:
            self.libauth_version = _decode_ready(first, _read_tail(self._stderr))
        except VerifierUnavailable:
            self._stop(graceful=False)
            raise

    def _roundtrip(self, request_id: int, line: bytes) -> VerifyResult:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except OSError as exc:  # BrokenPipeError when the helper has exited
            raise _HelperDiedError(f"cannot write to the helper: {exc}") from exc
        reply = self._read_line(time.monotonic() + self.timeout)
        if not reply:
            raise _HelperDiedError(f"helper exited: {_read_tail(self._stderr) or 'no output'}")
        reply_id, result = _decode_reply(reply)
        if reply_id != request_id:
            raise _HelperDiedError(f"reply id {reply_id!r} does not match request id {request_id}")
        return result

    def _read_line(self, deadline: float) -> bytes:
        """One line from the helper's stdout (b"" at end of file), bounded by `deadline`."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                cut = self._buf.find(b"\n")
                if cut >= 0:
                    line = bytes(self._buf[: cut + 1])
                    del self._buf[: cut + 1]
                    return line
                if len(self._buf) > _MAX_LINE:
                    raise _HelperDiedError("helper wrote an over-long line")
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self._stop(graceful=False)
                    raise VerifierUnavailable("verifier timed out")
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return b""
                self._buf += chunk

    def _stop(self, *, graceful: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            if graceful:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self._buf.clear()


class _Session:
    """One running helper process of the async client, with its in-flight requests."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: IO[bytes]) -> None:
        self.proc = proc
        self.stderr = stderr
        self.pending: dict[int, asyncio.Future[VerifyResult]] = {}
        self.dead: str | None = None
        self.write_lock = asyncio.Lock()
        self.reader: asyncio.Task[None] | None = None

    async def read_replies(self) -> None:
        assert self.proc.stdout is not None
        reason = "helper exited"
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                reply_id, result = _decode_reply(line)
                if not isinstance(reply_id, int):
                    raise _HelperDiedError(f"reply without a request id: {line[:200]!r}")
                # A missing id belongs to a request whose caller gave up (cancelled).
                fut = self.pending.pop(reply_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(result)
        except (_HelperDiedError, ValueError, OSError) as exc:  # ValueError: line over the limit
            reason = str(exc)
        finally:
            self.fail(reason)

    def fail(self, reason: str) -> None:
        if self.dead is None:
            self.dead = reason
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(_HelperDiedError(reason))

    async def request(self, request_id: int, line: bytes, timeout: float) -> VerifyResult:
        if self.dead is not None:
            raise _HelperDiedError(self.dead)
        stdin = self.proc.stdin
        assert stdin is not None
        fut: asyncio.Future[VerifyResult] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = fut
        try:
            async with self.write_lock:
                stdin.write(line)
                await stdin.drain()
        except OSError as exc:
            self.pending.pop(request_id, None)
            raise _HelperDiedError(f"cannot write to the helper: {exc}") from exc
        try:
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            await self.kill("verifier timed out")
            raise VerifierUnavailable("verifier timed out") from None
        finally:
            self.pending.pop(request_id, None)

    async def kill(self, reason: str) -> None:
        self.fail(reason)
        stdin = self.proc.stdin
        if stdin is not None:
            stdin.close()
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self.proc.wait()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)
        self.stderr.close()

    async def close(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None:
            stdin.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self.proc.wait()
        await self.kill("verifier closed")


class AsyncLibauthVerifier(_HelperClient, Closing):
    """asyncio client: requests are pipelined to one helper and matched by id. `async with`
    closes it; the helper still starts on the first request (or `start()`)."""

    def _init_client(self) -> None:
        self._session: _Session | None = None
        self._start_lock: asyncio.Lock | None = None

    @property
    def pid(self) -> int | None:
        session = self._session
        return session.proc.pid if session is not None and session.dead is None else None

    async def start(self) -> None:
        await self._running()

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def verify(
        self,
        tx: Transaction | str,
        source_outputs: Sequence[TxOutput] | str,
        *,
        vm: int = 2026,
        standard: bool = True,
    ) -> VerifyResult:
        """Verify `tx` spending `source_outputs` (one per input, in input order)."""
        request_id = next(self._ids)
        line = _encode_request(request_id, tx, source_outputs, vm, standard)
        for attempt in (1, 2):
            session = await self._running()
            try:
                return await session.request(request_id, line, self.timeout)
            except _HelperDiedError as exc:
                if session is self._session:
                    self._session = None
                await session.kill(str(exc))
                if attempt == 2:
                    raise VerifierUnavailable(f"verifier died twice: {exc}") from exc
        raise AssertionError("unreachable")

    async def _running(self) -> _Session:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            session = self._session
            if session is not None and session.dead is None and session.proc.returncode is None:
                return session
            if session is not None:
                self._session = None
                await session.kill(session.dead or "helper exited")
            self._session = await self._spawn()
            return self._session

    async def _spawn(self) -> _Session:
        cmd = _command(self.node, self.script)
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process)
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                cwd=self.script.parent,
                limit=_MAX_LINE,
            )
        except OSError as exc:
            stderr.close()
            raise VerifierUnavailable(f"cannot start {self.node!r}: {exc}") from exc
        session = _Session(proc, stderr)
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(self.start_timeout):
                first = await proc.stdout.readline()
            self.libauth_version = _decode_ready(first, _read_tail(stderr))
        except (TimeoutError, ValueError, VerifierUnavailable) as exc:
            await session.kill("start-up failed")
            if isinstance(exc, VerifierUnavailable):
                raise
            raise VerifierUnavailable(f"verifier did not start: {exc!r}") from exc
        session.reader = asyncio.create_task(session.read_replies())
        return session
