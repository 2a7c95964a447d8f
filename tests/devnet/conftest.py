"""Fixtures: a devnet started in-process on free ports, and clients that reach it only through
its sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devnet.service import Devnet, DevnetConfig
from tests.devnet.client import Client, open_client


def config(**overrides: object) -> DevnetConfig:
    base: dict[str, object] = {"tcp_base": 0, "ws_base": 0, "verify": False}
    base.update(overrides)
    return DevnetConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
async def devnet() -> AsyncIterator[Devnet]:
    net = Devnet(config())
    await net.start()
    yield net
    await net.stop()


async def connect(
    net: Devnet, node: int = 0, transport: str = "tcp", versions: object = ("1.4", "1.6")
) -> Client:
    server = net.servers[node]
    client = await open_client(transport, server.host, server.tcp_port, server.ws_port)
    if versions is not None:
        await client.call("server.version", "ladle-tests", list(versions))  # type: ignore[call-overload]
    return client


@pytest.fixture(params=["tcp", "ws"])
async def client(request: pytest.FixtureRequest, devnet: Devnet) -> AsyncIterator[Client]:
    c = await connect(devnet, transport=request.param)
    yield c
    await c.close()


@pytest.fixture
async def tcp(devnet: Devnet) -> AsyncIterator[Client]:
    c = await connect(devnet)
    yield c
    await c.close()
