"""N worker processes serving one ASGI app on one listening socket (`ladle rest --workers N`).

Where the system has `SO_REUSEPORT` (Linux), every worker listens on a socket of its own on the
one port, and the kernel spreads the connections evenly among them; the parent's socket, bound
but never listening, holds the port across worker restarts. One socket shared by all workers
would not do: whichever worker wakes first accepts a whole burst of connections, and two
workers then serve like one. Elsewhere the workers share the parent's listening socket. The
parent prints one ready line once every worker accepts connections,
restarts a worker that dies (with backoff, said in the log) and, on SIGINT/SIGTERM, stops them
all with SIGTERM. Workers ignore SIGINT, so a Ctrl-C reaches them only through the parent, and
end with the parent (`runtime.orphans.end_with`); the fork server and multiprocessing's
resource tracker then end with the last of them.

Workers come from a fork server (`multiprocessing`'s "forkserver"): a fresh interpreter,
started once with the environment the parent prepared (the `PROMETHEUS_MULTIPROC_DIR` of
`metrics_dir`), imports the factory's module once and forks each worker from that clean state.
Nothing of the parent (event loop, threads, metric values) leaks into a worker, and a worker or
a restart costs a fork, not an interpreter's imports. The app is built in the worker, by a
module-level `factory(arg)` (picklable, like `arg`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TypeVar

import orjson

from runtime.logs import LogFormat, configure_logging, fields
from runtime.orphans import end_with
from runtime.serve import bind, start_app
from runtime.supervise import Backoff
from runtime.usage import EXIT_FAILURE

__all__ = ["METRICS_DIR_ENV", "metrics_dir", "serve_workers"]

log = logging.getLogger("runtime.workers")

METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
BACKLOG = 2048  # uvicorn's default
REUSE_PORT = hasattr(socket, "SO_REUSEPORT") and sys.platform == "linux"  # spreads connections
GRACE = 15.0  # seconds a worker has to finish its requests after SIGTERM

ArgT = TypeVar("ArgT")


@contextlib.contextmanager
def metrics_dir() -> Iterator[Path]:
    """A fresh directory for prometheus_client's multi-process mode, named in the environment
    (`PROMETHEUS_MULTIPROC_DIR`) that the workers inherit, and removed (with the old value of
    the variable put back) at exit. Enter it before the first worker starts."""
    path = tempfile.mkdtemp(prefix="ladle-metrics-")
    old = os.environ.get(METRICS_DIR_ENV)
    os.environ[METRICS_DIR_ENV] = path
    try:
        yield Path(path)
    finally:
        if old is None:
            os.environ.pop(METRICS_DIR_ENV, None)
        else:
            os.environ[METRICS_DIR_ENV] = old
        shutil.rmtree(path, ignore_errors=True)


def serve_workers(
    factory: Callable[[ArgT], Any],
    arg: ArgT,
    *,
    host: str,
    port: int,
    workers: int,
    name: str,
    announce: Callable[[str], dict[str, Any]],
    log_format: LogFormat = "auto",
    log_level: str = "info",
) -> int:
    """Serve `factory(arg)` in `workers` processes on host:port until SIGINT/SIGTERM; print
    `announce(url)` as one JSON line on stdout once all of them accept connections. OSError if
    the address cannot be bound; exit status 1 if a worker dies before it was ready."""
    sock = bind(host, port, reuse_port=REUSE_PORT)
    if not REUSE_PORT:
        sock.listen(BACKLOG)
    bound = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
    with metrics_dir():
        pool = _Pool(factory, arg, sock, workers, name, (log_format, log_level))
        return pool.run(lambda: announce(url))


class _Pool:
    def __init__(
        self,
        factory: Callable[[Any], Any],
        arg: object,
        sock: socket.socket,
        workers: int,
        name: str,
        logs: tuple[LogFormat, str],
    ) -> None:
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload([factory.__module__])
        self.factory = factory
        self.arg = arg
        self.sock = sock
        self.size = workers
        self.name = name
        self.logs = logs
        self.procs: dict[int, tuple[BaseProcess, float]] = {}  # sentinel → (process, start)
        self.ready_r, self.ready_w = self.ctx.Pipe(duplex=False)
        self.stopping = False

    def spawn(self) -> BaseProcess:
        proc = self.ctx.Process(
            target=_worker,
            args=(self.factory, self.arg, self.sock, self.ready_w, os.getpid(), self.logs),
            name=f"{self.name}-worker",
        )
        proc.start()
        self.procs[proc.sentinel] = (proc, time.monotonic())
        return proc

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    def run(self, announce: Callable[[], dict[str, Any]]) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_wakeup = signal.set_wakeup_fd(wake_w)
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for _ in range(self.size):
                self.spawn()
            return self._loop(announce, wake_r)
        finally:
            self._stop_all()
            for sig, handler in old.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(old_wakeup)
            os.close(wake_r)
            os.close(wake_w)
            self.sock.close()

    def _loop(self, announce: Callable[[], dict[str, Any]], wake_r: int) -> int:
        ready: set[int] = set()
        announced = False
        backoff = Backoff()
        due: list[float] = []  # when the pending restarts are due (monotonic)
        while not self.stopping:
            now = time.monotonic()
            timeout = max(0.0, min(due) - now) if due else None
            waitables: list[Any] = [*self.procs, self.ready_r, wake_r]
            multiprocessing.connection.wait(waitables, timeout)
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
            if self.stopping:
                break
            while self.ready_r.poll():
                ready.add(int(self.ready_r.recv()))
            if not announced and len(ready & self._pids()) >= self.size:
                sys.stdout.buffer.write(orjson.dumps(announce()) + b"\n")
                sys.stdout.flush()
                announced = True
            for sentinel, (proc, started) in list(self.procs.items()):
                if proc.exitcode is None:
                    continue
                del self.procs[sentinel]
                proc.join()
                if not announced:
                    log.error(
                        "a %s worker exited with status %s before it was ready",
                        self.name,
                        proc.exitcode,
                        extra=fields(event="worker_failed", status=proc.exitcode),
                    )
                    return EXIT_FAILURE
                delay = backoff.delay(time.monotonic() - started)
                log.warning(
                    "%s worker %s exited with status %s; restarting in %.1f s",
                    self.name,
                    proc.pid,
                    proc.exitcode,
                    delay,
                    extra=fields(event="worker_exit", status=proc.exitcode, restart_in=delay),
                )
                due.append(time.monotonic() + delay)
            now = time.monotonic()
            for when in [t for t in due if t <= now]:
                due.remove(when)
                proc = self.spawn()
                log.info(
                    "%s worker restarted (pid %s)",
                    self.name,
                    proc.pid,
                    extra=fields(event="worker_restarted", pid=proc.pid),
                )
        return 0

    def _pids(self) -> set[int]:
        return {p.pid for p, _ in self.procs.values() if p.pid is not None}

    def _stop_all(self) -> None:
        procs = [p for p, _ in self.procs.values()]
        for proc in procs:
            if proc.exitcode is None:
                proc.terminate()
        deadline = time.monotonic() + GRACE
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                proc.kill()
                proc.join()


def _worker(
    factory: Callable[[Any], Any],
    arg: object,
    sock: socket.socket,
    ready: Connection,
    pool: int,
    logs: tuple[LogFormat, str],
) -> None:
    """A worker process: serve until SIGTERM (SIGINT is the pool's to handle), which comes
    when the pool's process ends too (the fork server, the worker's parent, outlives it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    end_with(pool)
    configure_logging(logs[0], logs[1].upper())
    asyncio.run(_serve(factory(arg), sock, ready, logs[1]))


async def _serve(app: Any, shared: socket.socket, ready: Connection, level: str) -> None:
    host, port = shared.getsockname()[:2]
    sock = shared
    if REUSE_PORT:  # a listening socket of this worker's own on the parent's port
        sock = bind(host, port, reuse_port=True)
        sock.listen(BACKLOG)
    running = await start_app(app, host=host, port=port, name="worker", log_level=level, sock=sock)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, running.request_stop)
    ready.send(os.getpid())
    await running.wait()
