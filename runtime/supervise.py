"""A small asyncio supervisor of child commands: each component of `ladle up` is its own process.

A `Child` is a command line and the keys it adds to the ready object. Children start stage by
stage (the children of one stage in parallel, each stage after the previous one is ready); a
child is ready when it prints its ready object on stdout, as one `LADLE_READY {json}` line or a
bare JSON object line (`ladle rest`, `ladle broadcast`); the lines it printed before are for
people. Once every child is ready, `Supervisor.ready` is their merged object.

From then on a child that exits is restarted with exponential backoff (said in the log); its
command line is built again from what every child announced and from what it announced itself
the first time, so that a restarted service keeps its port. A stop (`Supervisor.stop`) sends
SIGTERM to the children in reverse order of their stages, then SIGKILL to one that outlives the
grace period. Children run in their own session, so a Ctrl-C on the terminal reaches the
supervisor only (which stops them in order), and they die with it (`runtime.orphans`).

A library (circus, supervisord) would bring its own configuration language, daemon and IPC for
what is here a list of commands, one ready line each, and a backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from runtime.logs import fields
from runtime.orphans import PARENT_PID_ENV

__all__ = [
    "READY",
    "Backoff",
    "Child",
    "ChildFailedError",
    "Supervisor",
    "parse_ready",
    "ready_line",
]

log = logging.getLogger("runtime.supervise")

READY = "LADLE_READY"

Ready = Mapping[str, Any]
# (every ready key announced so far, this child's own first ready object or None) → its argv.
ArgvFn = Callable[[Ready, Ready | None], Sequence[str]]


def ready_line(ready: Ready) -> str:
    return f"{READY} {orjson.dumps(ready).decode()}"


def parse_ready(line: str) -> dict[str, Any] | None:
    """The ready object on a child's stdout line, or None for a line meant for people."""
    text = line.strip()
    if text.startswith(READY + " "):
        text = text[len(READY) + 1 :]
    elif not text.startswith("{"):
        return None
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


@dataclass(slots=True)
class Backoff:
    """Seconds to wait before the next restart: doubling from `first` up to `cap`; a child that
    stayed up for `stable` seconds starts again from `first`."""

    first: float = 0.5
    cap: float = 30.0
    stable: float = 60.0
    _next: float = 0.0

    def delay(self, uptime: float) -> float:
        if uptime >= self.stable or self._next == 0.0:
            self._next = self.first
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay


@dataclass(frozen=True, slots=True)
class Child:
    name: str
    argv: ArgvFn  # the command's arguments after `command` (e.g. ["router", "--port", "0"])
    keys: tuple[str, ...]  # the ready keys it contributes (others it prints are its own)


class ChildFailedError(Exception):
    """A child exited before it was ready; `status` is its exit status."""

    def __init__(self, name: str, status: int) -> None:
        super().__init__(f"{name} exited with status {status} before it was ready")
        self.name = name
        self.status = status


@dataclass(slots=True)
class _Running:
    child: Child
    proc: asyncio.subprocess.Process
    started: float
    lines: list[str] = field(default_factory=list)
    ready: dict[str, Any] = field(default_factory=dict)
    drain: asyncio.Task[None] | None = None


class Supervisor:
    """`await start()`, then `ready`/`lines`; `await watch()` restarts crashed children until
    cancelled; `await stop()` ends them all."""

    def __init__(
        self,
        stages: Sequence[Sequence[Child]],
        *,
        command: Sequence[str] = (sys.executable, "-m", "ladle"),
        grace: float = 15.0,
    ) -> None:
        self.stages = [list(stage) for stage in stages]
        self.command = list(command)
        self.grace = grace
        self.first: dict[str, dict[str, Any]] = {}  # each child's first ready object
        self.restarts: dict[str, int] = {}  # restarts that reached the ready line
        self._running: dict[str, _Running] = {}
        self._stopping = False

    # --- start ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every stage in order; ChildFailedError if a child exits before it is ready (the
        children already started keep running: `stop` ends them)."""
        for stage in self.stages:
            started = await asyncio.gather(
                *(self._start(child) for child in stage), return_exceptions=True
            )
            for result in started:
                if isinstance(result, BaseException):
                    raise result

    @property
    def ready(self) -> dict[str, Any]:
        """The children's ready keys, merged in stage order (each child's latest)."""
        merged: dict[str, Any] = {}
        for name in self.order():
            running = self._running[name]
            merged.update({k: running.ready[k] for k in running.child.keys if k in running.ready})
        return merged

    def lines_of(self, name: str) -> list[str]:
        """What a child printed for people before its ready line."""
        return list(self._running[name].lines)

    def order(self) -> list[str]:
        return [c.name for stage in self.stages for c in stage if c.name in self._running]

    def pid(self, name: str) -> int:
        return self._running[name].proc.pid

    async def _start(self, child: Child) -> None:
        argv = [*self.command, *child.argv(self.ready, self.first.get(child.name))]
        env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, env=env, start_new_session=True
        )
        previous = self._running.get(child.name)
        running = _Running(child, proc, time.monotonic())
        if previous is not None:  # what it announced stays the answer while it restarts
            running.ready = previous.ready
        self._running[child.name] = running
        assert proc.stdout is not None
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                status = await proc.wait()
                raise ChildFailedError(child.name, status)
            line = raw.decode(errors="replace").rstrip("\n")
            obj = parse_ready(line)
            if obj is None:
                running.lines.append(line)
                continue
            running.ready = obj
            break
        self.first.setdefault(child.name, obj)
        running.drain = asyncio.create_task(_drain(proc.stdout, child.name))

    # --- restart --------------------------------------------------------------------------------

    async def watch(self) -> None:
        """Restart any child that exits, until cancelled."""
        tasks = [
            asyncio.create_task(self._keep(name), name=f"keep-{name}") for name in self.order()
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _keep(self, name: str) -> None:
        backoff = Backoff()
        while True:
            running = self._running[name]
            status = await running.proc.wait()
            if self._stopping:
                return
            uptime = time.monotonic() - running.started
            delay = backoff.delay(uptime)
            log.warning(
                "%s exited with status %s; restarting in %.1f s",
                name,
                status,
                delay,
                extra=fields(event="child_exit", component=name, status=status, restart_in=delay),
            )
            await asyncio.sleep(delay)
            try:
                await self._start(running.child)
            except ChildFailedError as exc:
                log.warning(
                    "%s failed to restart: %s",
                    name,
                    exc,
                    extra=fields(event="child_failed", component=name, status=exc.status),
                )
                continue
            self.restarts[name] = self.restarts.get(name, 0) + 1
            log.info(
                "%s restarted (pid %d)",
                name,
                self._running[name].proc.pid,
                extra=fields(
                    event="child_restarted",
                    component=name,
                    restarts=self.restarts[name],
                    ready=self._running[name].ready,
                ),
            )

    # --- stop -----------------------------------------------------------------------------------

    async def stop(self) -> None:
        """SIGTERM to each stage's children in reverse stage order; SIGKILL after `grace`."""
        self._stopping = True
        for stage in reversed(self.stages):
            await asyncio.gather(
                *(self._stop(self._running[c.name]) for c in stage if c.name in self._running)
            )

    async def _stop(self, running: _Running) -> None:
        proc = running.proc
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(self.grace):
                    await proc.wait()
            except TimeoutError:
                log.warning(
                    "%s did not stop within %g s: killed",
                    running.child.name,
                    self.grace,
                    extra=fields(event="child_killed", component=running.child.name),
                )
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if running.drain is not None:
            running.drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running.drain


async def _drain(stream: asyncio.StreamReader, name: str) -> None:
    """Read what a ready child prints later (a full pipe would stall it); into the log."""
    while raw := await stream.readline():
        line = raw.decode(errors="replace").rstrip("\n")
        if line:
            log.info("%s: %s", name, line, extra=fields(component=name))
