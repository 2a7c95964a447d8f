"""Real processes of one Python module, started by fork from a process that imported it once
(this module holds no tests).

A test that starts a program many times, to kill it at random moments, would otherwise spend
most of its time in the interpreter's start and the imports. `forked(module)` runs this
file as a process (the fork server) that imports `module`'s imports; `run(argv)` forks a child
of it that runs `module` as `python -m module argv…` would, with stdin from /dev/null and
stdout and stderr into files. Each child is a process of its own: killed with SIGKILL by pid,
its exit status (negative: the signal) reported when it ends.

The protocol on the server's stdin and stdout, one line each: the test sends a request as JSON
`[argv, stdout, stderr]` and reads `pid P` back; the server says `exit P STATUS` when a child
ends (`os.waitstatus_to_exitcode`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import sys
import time
import traceback
from collections.abc import AsyncIterator
from pathlib import Path

from tests.conftest import ROOT


class Forks:
    def __init__(self, server: asyncio.subprocess.Process) -> None:
        self.server = server
        self.started: asyncio.Queue[int] = asyncio.Queue()
        self.exits: dict[int, asyncio.Future[int]] = {}
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, module: str) -> Forks:
        server = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tests.runtime.forks", module),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            assert server.stdout is not None
            ready = await asyncio.wait_for(server.stdout.readline(), 60)
            assert ready == b"ready\n", ready
        except BaseException:
            server.kill()
            await server.wait()
            raise
        return cls(server)

    async def run(self, argv: list[str], stdout: Path, stderr: Path) -> int:
        """The pid of a new child running the module with `argv`."""
        assert self.server.stdin is not None
        request = json.dumps([argv, str(stdout), str(stderr)])
        self.server.stdin.write(request.encode() + b"\n")
        await self.server.stdin.drain()
        pid = await asyncio.wait_for(self.started.get(), 30)
        self._exit(pid)  # known from now on (`close` kills it if it has not ended)
        return pid

    def _exit(self, pid: int) -> asyncio.Future[int]:
        return self.exits.setdefault(pid, asyncio.get_running_loop().create_future())

    async def wait(self, pid: int, timeout: float | None = None) -> int:
        """The exit status of child `pid` (negative: killed by that signal); TimeoutError if
        it has not ended within `timeout` seconds."""
        return await asyncio.wait_for(asyncio.shield(self._exit(pid)), timeout)

    def returncode(self, pid: int) -> int | None:
        """The exit status of child `pid` if it has ended (and it has been told), else None."""
        done = self._exit(pid)
        return done.result() if done.done() else None

    async def _read(self) -> None:
        assert self.server.stdout is not None
        while line := await self.server.stdout.readline():
            kind, *values = line.split()
            if kind == b"pid":
                self.started.put_nowait(int(values[0]))
            elif kind == b"exit":
                self._exit(int(values[0])).set_result(int(values[1]))

    async def close(self) -> None:
        """Stop the server (the children it started have been waited for, or are killed)."""
        for pid, done in self.exits.items():
            if not done.done():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.server.returncode is None:
            self.server.kill()
        await self.server.wait()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


@contextlib.asynccontextmanager
async def forked(module: str) -> AsyncIterator[Forks]:
    """A fork server of `module` for the block's time."""
    forks = await Forks.start(module)
    try:
        yield forks
    finally:
        await forks.close()


async def first_line(path: Path, timeout: float) -> bytes:
    """The first line written to file `path`, once it is whole."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(FileNotFoundError):
            data = path.read_bytes()
            if b"\n" in data:
                return data[: data.index(b"\n") + 1]
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing written to {path} in {timeout} s")
        await asyncio.sleep(0.005)


def _child(module: str, argv: list[str], stdout: str, stderr: str) -> None:
    """Run in a forked child: `module` as `python -m module argv…` would."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = [module, *argv]
    code = 1
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _serve(module: str) -> None:
    importlib.import_module(module)
    # Its imports stay loaded; the module itself runs again, as __main__, in each child.
    del sys.modules[module]
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    print("ready", flush=True)
    pending = b""
    while True:
        readable, _, _ = select.select([0, wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                print(f"exit {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
        if 0 in readable:
            data = os.read(0, 1 << 16)
            if not data:
                return  # the test is gone
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                argv, stdout, stderr = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(module, argv, stdout, stderr)
                print(f"pid {pid}", flush=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
