"""/metrics with several worker processes (prometheus_client's multi-process mode): whichever
worker answers the scrape, the counts are every worker's. Real uvicorn workers sharing one
listening socket and one PROMETHEUS_MULTIPROC_DIR."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from runtime.metrics import MULTIPROC_ENV
from tests.indexer.test_follower_support import wait_until
from tests.metrics_text import sample
from tests.rest.conftest import World
from tests.rest.multiproc_app import DB_ENV

WORKERS = 2
REQUESTS = 200


async def test_metrics_sum_the_requests_of_every_worker(world: World, tmp_path: Path) -> None:
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    env = {**os.environ, MULTIPROC_ENV: str(metrics_dir), DB_ENV: str(world.db)}
    command = [
        sys.executable, "-m", "uvicorn", "tests.rest.multiproc_app:app", "--factory",
        "--fd", str(listener.fileno()), "--workers", str(WORKERS), "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(command, env=env, pass_fds=(listener.fileno(),))
    listener.close()
    base = f"http://127.0.0.1:{port}"
    # A new connection per request, many at once, so that both workers accept some.
    limits = httpx.Limits(max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(base_url=base, limits=limits) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/bench/none")).status_code == 404
                except httpx.TransportError:
                    return False

            await wait_until(up, timeout=30, what="the workers")
            route = "/dex/contract/count"
            text = (await http.get("/metrics")).text
            assert sample(text, "ladle_rest_requests_total", route=route) is None
            gate = asyncio.Semaphore(20)

            async def one() -> int:
                async with gate:
                    return (await http.get("/dex/contract/count")).status_code

            codes = await asyncio.gather(*(one() for _ in range(REQUESTS)))
            assert set(codes) == {200}
            writers = {p.name for p in metrics_dir.glob("counter_*.db")}
            assert len(writers) == WORKERS, writers  # both workers answered some
            for _ in range(4):  # any worker's scrape: the sum over both
                text = (await http.get("/metrics")).text
                total = sample(text, "ladle_rest_requests_total", route=route, status="200")
                assert total == REQUESTS
                count = sample(text, "ladle_rest_request_duration_seconds_count", route=route)
                assert count == REQUESTS
    finally:
        proc.terminate()
        proc.wait(timeout=30)
