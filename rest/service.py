"""Running the API under uvicorn: `start_server` (in the running loop, for tests and embedding),
`serve` (the `ladle rest` process: prints one JSON line once it accepts connections) and
`start_in_up` (`ladle up`'s component)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
import uvicorn

from rest.app import create_app
from rest.config import DEFAULT_PORT, RestConfig

if TYPE_CHECKING:
    from ladle.up import Started, UpContext


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


def bind(host: str, port: int) -> socket.socket:
    """A listening socket for uvicorn. `proto` must be IPPROTO_TCP: asyncio enables TCP_NODELAY
    only on sockets that say so, and without it a response written in two parts (headers, then
    body) waits ~40 ms for the client's delayed ACK (Nagle)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def start_server(
    config: RestConfig,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log_level: str = "warning",
) -> RunningServer:
    """Serve on host:port (0 picks a free port); returns once connections are accepted."""
    sock = bind(host, port)
    uv_config = uvicorn.Config(
        create_app(config), log_level=log_level, lifespan="on", access_log=False
    )
    server = _Embedded(uv_config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            sock.close()
            await task
            raise RuntimeError("the REST server stopped during start-up")
        await asyncio.sleep(0.01)
    return RunningServer(host, sock.getsockname()[1], server, task)


async def serve(config: RestConfig, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM (then a graceful stop), announcing the URL on stdout."""
    running = await start_server(config, host=host, port=port, log_level="info")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, running.request_stop)
    line = {"rest": running.url, "db": str(config.db_path)}
    sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
    sys.stdout.flush()
    await running.wait()


async def start_in_up(ctx: UpContext) -> Started | None:
    """`ladle up`'s start function: the API over the indexer's database (after the indexer,
    which it needs: without one it adds nothing). The devnet's node 0 is the chain tip source,
    so "synced" is exact. Port: `--rest-port` if the command has it, else 0 when `--ports 0`,
    else 8000."""
    from ladle.up import Started

    indexer = ctx.started.get("indexer")
    if indexer is None:
        return None
    info = indexer.ready.get("indexer")
    db = info.get("db") if isinstance(info, dict) else None
    if not isinstance(db, str):
        return None
    args = ctx.args
    port = getattr(args, "rest_port", None)
    if port is None:
        port = 0 if getattr(args, "ports", DEFAULT_PORT) == 0 else DEFAULT_PORT
    chain_tip = None
    if ctx.devnet is not None:
        node = ctx.devnet.devnet.nodes[0]

        async def devnet_tip() -> int | None:
            return node.height

        chain_tip = devnet_tip
    config = RestConfig(db_path=db, chain_tip=chain_tip)
    running = await start_server(config, host=getattr(args, "host", "127.0.0.1"), port=port)
    return Started(
        "rest",
        {"rest": running.url},
        [f"rest: {running.url}  (GET /tokenpool/…, /dex/…; docs at {running.url}/docs)"],
        running.stop,
    )
