"""The simulated clock drives block times; interval mining produces blocks on its own."""

from __future__ import annotations

import asyncio
import itertools
import struct

import pytest

from devnet.clock import SimClock
from devnet.service import Devnet
from tests.devnet.conftest import config, connect


def test_clock_moves_forward_only() -> None:
    clock = SimClock(1_000)
    assert clock.now() == 1_000
    assert clock.advance(60) == 1_060
    assert clock.set(1_030) == 1_060  # never backwards
    assert clock.set(2_000) == 2_000
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_block_times_follow_the_clock() -> None:
    async with Devnet(config(premine=0)) as net:
        c = await connect(net)
        try:
            now = (await c.call("devnet.info"))["time"]
            await c.call("devnet.advance_clock", 90 * 86_400)
            await c.call("devnet.mine", 1)
            header = bytes.fromhex(await c.call("blockchain.block.header", 1))
            assert struct.unpack_from("<I", header, 68)[0] == now + 90 * 86_400
            await c.call("devnet.mine", 3, None, None, None, 600)
            tip = (await c.call("blockchain.headers.get_tip"))["height"]
            headers = await c.call("blockchain.block.headers", 1, tip)
            times = [struct.unpack_from("<I", bytes.fromhex(h), 68)[0] for h in headers["headers"]]
            assert [b - a for a, b in itertools.pairwise(times)] == [600, 600, 600]
        finally:
            await c.close()


async def test_interval_mining() -> None:
    async with Devnet(config(premine=0)) as net:
        c = await connect(net)
        try:
            await c.call("blockchain.headers.subscribe")
            net.network.start_mining(0.05)
            note = await c.notification("blockchain.headers.subscribe", timeout=5)
            assert note["params"][0]["height"] >= 1
            net.network.stop_mining()
            height = (await c.call("blockchain.headers.get_tip"))["height"]
            await asyncio.sleep(0.15)
            assert (await c.call("blockchain.headers.get_tip"))["height"] == height
        finally:
            await c.close()
