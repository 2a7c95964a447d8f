"""Serving a Starlette app under uvicorn inside a running event loop.

Both HTTP services (the data API and the broadcast API) start this way: in tests and in
`ladle up` they share the loop with the rest of the program, and as their own commands they
serve until SIGINT/SIGTERM after printing one JSON line for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn


class _Embedded(uvicorn.Server):
    """uvicorn without its signal handlers: the embedding program owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(slots=True)
class RunningServer:
    host: str
    port: int
    _server: uvicorn.Server
    _task: asyncio.Task[None]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def request_stop(self) -> None:
        self._server.should_exit = True

    async def wait(self) -> None:
        await self._task

    async def stop(self) -> None:
        self.request_stop()
        await self._task


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A listening socket for uvicorn. `proto` must be IPPROTO_TCP: asyncio enables TCP_NODELAY
    only on sockets that say so, and without it a response written in two parts (headers, then
    body) waits ~40 ms for the client's delayed ACK (Nagle). `reuse_port`: one of several
    sockets on the same port (`SO_REUSEPORT`), among which the kernel spreads connections."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def start_app(
    app: Any,
    *,
    host: str,
    port: int,
    name: str,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> RunningServer:
    """Serve `app` on host:port (0 picks a free port), or on `sock` already bound (one of the
    worker processes that share it); returns once connections are accepted."""
    own = sock is None
    sock = bind(host, port) if sock is None else sock
    # log_config=None: uvicorn's records go through the root logger, in `runtime.logs`' format.
    # proxy_headers=False: the client is the connection's peer, not what X-Forwarded-For says
    # (uvicorn would believe it from any loopback peer); a service trusts a proxy only where
    # it is told to (`ladle rest --trust-forwarded`).
    config = uvicorn.Config(
        app,
        log_level=log_level,
        log_config=None,
        lifespan="on",
        access_log=False,
        proxy_headers=False,
    )
    server = _Embedded(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            if own:
                sock.close()
            await task  # raises what went wrong
            raise RuntimeError(f"the {name} server stopped during start-up")
        await asyncio.sleep(0.01)
    return RunningServer(host, sock.getsockname()[1], server, task)


async def serve_until_signal(
    app: Any, *, host: str, port: int, name: str, announce: Callable[[str], dict[str, Any]]
) -> None:
    """The standalone command: serve, print `announce(url)` as one JSON line once connections
    are accepted, and stop gracefully on SIGINT or SIGTERM."""
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    running = await start_app(app, host=host, port=port, name=name, log_level=level)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, running.request_stop)
    sys.stdout.buffer.write(orjson.dumps(announce(running.url)) + b"\n")
    sys.stdout.flush()
    await running.wait()
