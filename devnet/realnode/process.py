"""Child processes (bitcoind, Fulcrum) that never outlive ladle.

Each runs in its own session, so a terminal's Ctrl-C reaches ladle alone and ladle stops them in
order (Fulcrum before the node it reads from); on Linux the kernel also sends SIGTERM to a child
whose parent died without cleaning up (`kill -9` of ladle).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

STOP_TIMEOUT = 30.0
PR_SET_PDEATHSIG = 1


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """Start `args` with stdout and stderr appended to `log`."""
    preexec: Callable[[], None] | None = _die_with_parent if sys.platform == "linux" else None
    with log.open("ab") as out:
        return subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,  # prctl alone: safe in a threaded parent
        )


async def wait_exit(process: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> int:
    """Wait for `process` to exit, killing it after `timeout` seconds; its exit status."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while process.poll() is None:
        if loop.time() > deadline:
            process.kill()
            return await asyncio.to_thread(process.wait)
        await asyncio.sleep(0.05)
    return process.returncode


async def terminate(process: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM, then SIGKILL after `timeout` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    return await wait_exit(process, timeout)


def tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])
