"""Fixtures: a five-node devnet on loopback sockets and a broadcast service pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from broadcast.app import create_app
from broadcast.service import BroadcastService
from devnet.service import Devnet
from tests.broadcast.helpers import config_for, devnet


@pytest.fixture
async def net() -> AsyncIterator[Devnet]:
    network = devnet(5)
    await network.start()
    yield network
    await network.stop()


@pytest.fixture
async def service(net: Devnet, tmp_path: Path) -> AsyncIterator[BroadcastService]:
    svc = BroadcastService(config_for(net, tmp_path / "records.sqlite"))
    await svc.start()
    yield svc
    await svc.close()


@pytest.fixture
async def http(service: BroadcastService) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API over httpx's ASGI transport (the service's lifetime is the fixture's)."""
    transport = httpx.ASGITransport(app=create_app(service, manage=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://broadcast") as client:
        yield client
