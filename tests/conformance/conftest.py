"""One real `ladle up` for the whole conformance package, started with the suite's own
machinery (tests/ladle/test_up.py), and the HTTP clients of its two base addresses. Every test
module here runs on the package's event loop (`pytestmark` in each), so the one process, its
output drains and the clients live on a single loop. Broadcast transactions' scripts are
checked with libauth (no `--no-verify`), so an "accepted" status means a valid signature."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from tests.conformance.client import Ladle
from tests.ladle.test_up import Running, start


async def _drain(stream: asyncio.StreamReader | None) -> None:
    """Keep reading the process's output so a full pipe can never stall it."""
    if stream is None:
        return
    while await stream.read(65536):
        pass


@pytest_asyncio.fixture(scope="package", loop_scope="package")
async def ladle() -> AsyncIterator[Ladle]:
    running: Running = await start("up", "--ports", "0", "--preset", "small")
    drains: list[asyncio.Task[None]] = []
    try:
        ready = await running.ready()
        drains = [
            asyncio.create_task(_drain(running.proc.stdout)),
            asyncio.create_task(_drain(running.proc.stderr)),
        ]
        async with httpx.AsyncClient(timeout=30) as web:
            ledger = (await web.get(ready["devnet"]["ledger"])).json()
        yield Ladle(ready, ledger)
        if running.proc.returncode is None:
            await running.stop(signal.SIGINT)
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()
        for task in drains:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@pytest_asyncio.fixture(loop_scope="package")
async def api(ladle: Ladle) -> AsyncIterator[httpx.AsyncClient]:
    """The data API at `{base_url}`."""
    async with httpx.AsyncClient(base_url=ladle.rest, timeout=30) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="package")
async def bcast(ladle: Ladle) -> AsyncIterator[httpx.AsyncClient]:
    """The broadcast interface at `{broadcast_url}`."""
    async with httpx.AsyncClient(base_url=ladle.broadcast, timeout=30) as client:
        yield client
