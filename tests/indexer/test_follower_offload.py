"""Fetching blocks in a child process (`indexer.follow.fetch_process`), against a devnet: the
child gives exactly the blocks the loop would fetch, its errors arrive as the loop's would, a
dead child is replaced by fetching in the loop, and a sync that offloads indexes the same rows."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from bch.block import Block
from devnet.service import Devnet
from indexer.electrum import BlockChanged, ElectrumClient, ssl_context
from indexer.follow import FetchedBlock, fetch_block
from indexer.follow.fetch_process import FetchProcess
from indexer.follow.settings import ClientSettings
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from tests.indexer.electrum_servers import client as electrum_client
from tests.indexer.electrum_servers import running_devnet
from tests.indexer.test_follower_support import generate, make_follower, reindex, urls
from tests.indexer.test_store_scenario import dump


def same_block(a: FetchedBlock, b: FetchedBlock) -> None:
    assert (a.height, a.header, a.size, a.transactions) == (
        b.height,
        b.header,
        b.size,
        b.transactions,
    )
    if a.block is None or b.block is None:
        assert a.block is b.block is None
        return
    assert a.block.parts() == b.block.parts()
    assert [a.block.tx_raw(i) for i in range(a.block.tx_count)] == [
        b.block.tx_raw(i) for i in range(b.block.tx_count)
    ]


@asynccontextmanager
async def child_of(client: ElectrumClient) -> AsyncIterator[FetchProcess]:
    settings = ClientSettings.of(client)
    assert settings is not None

    async def in_the_loop(height: int, header: bytes) -> FetchedBlock:
        return await fetch_block(client, height, header)

    async with FetchProcess(settings, in_the_loop) as process:
        assert process.alive
        yield process


async def headers_of(client: ElectrumClient, net: Devnet) -> list[bytes]:
    return await client.get_headers(0, net.nodes[0].height + 1)


@pytest.mark.parametrize("extensions", [True, False])
async def test_the_child_fetches_exactly_what_the_loop_fetches(extensions: bool) -> None:
    async with running_devnet() as net:
        net.nodes[0].mine(12)
        client = electrum_client(urls(net), extensions=extensions)
        try:
            headers = await headers_of(client, net)
            async with child_of(client) as process:
                for height, header in enumerate(headers):
                    mine = await fetch_block(client, height, header)
                    same_block(await process.fetch(height, header), mine)
                    # Rostrum's block arrives whole; the Fulcrum fallback gives transactions,
                    # and so does the genesis block, whose coinbase is left out.
                    assert (mine.block is not None) is (extensions and height > 0)
                assert process.fetched == len(headers)
        finally:
            await client.close()


async def test_a_block_that_is_not_the_linked_one_raises_block_changed() -> None:
    async with running_devnet() as net:
        net.nodes[0].mine(3)
        client = electrum_client(urls(net))
        try:
            headers = await headers_of(client, net)
            async with child_of(client) as process:
                with pytest.raises(BlockChanged):
                    await process.fetch(2, headers[1])  # block 2 is not the one of header 1
                same_block(
                    await process.fetch(2, headers[2]), await fetch_block(client, 2, headers[2])
                )
        finally:
            await client.close()


async def test_a_dead_child_is_replaced_by_the_loop() -> None:
    async with running_devnet() as net:
        net.nodes[0].mine(6)
        client = electrum_client(urls(net))
        try:
            headers = await headers_of(client, net)
            async with child_of(client) as process:
                await process.fetch(0, headers[0])
                assert process.pid is not None
                os.kill(process.pid, signal.SIGKILL)
                for _ in range(500):  # the loop learns it from the pipes / the exit
                    if not process.alive:
                        break
                    await asyncio.sleep(0.01)
                for height, header in enumerate(headers):
                    got = await process.fetch(height, header)
                    same_block(got, await fetch_block(client, height, header))
                assert not process.alive
                assert process.fetched == 1
        finally:
            await client.close()


async def test_an_offloaded_sync_indexes_the_same_rows() -> None:
    net, _ = await generate()
    try:
        store = await open_store(":memory:", snapshot=PoolSnapshot())
        client = electrum_client(urls(net))
        try:
            follower = make_follower(client, store, mempool=False, offload_distance=0)
            result = await follower.sync()
            assert result.height == net.nodes[0].height
            assert follower.chain.offloaded == net.nodes[0].height + 1  # every block, by the child
            assert await dump(store.conn) == await reindex(urls(net))
        finally:
            await client.close()
            await store.close()
    finally:
        await net.stop()


def test_client_settings_make_the_same_client_elsewhere() -> None:
    plain = ElectrumClient(["tcp://127.0.0.1:1", "ssl://example.org:50002"], timeout=7.0)
    settings = ClientSettings.of(plain)
    assert settings is not None and not settings.insecure_tls
    again = settings.client()
    assert (again.servers, again.timeout, again.ssl_ctx) == (plain.servers, 7.0, None)
    assert ClientSettings.of(again) == settings
    insecure = ElectrumClient(["ssl://example.org:50002"], ssl_ctx=ssl_context(verify=False))
    made = ClientSettings.of(insecure)
    assert made is not None and made.insecure_tls
    ctx = made.client().ssl_ctx
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE
    # A context verifying against certificates of its own cannot be made again elsewhere.
    assert ClientSettings.of(ElectrumClient(["ssl://h:1"], ssl_ctx=ssl_context())) is None


def test_block_parts_give_the_same_block_back() -> None:
    raw = Block.build([bytes.fromhex(_COINBASE)], prev_hash=bytes(32), time=1, bits=0x207FFFFF)
    block = Block(raw)
    again = Block.from_parts(*block.parts())
    assert again.parts() == block.parts()
    assert (again.header, again.hash, again.tx_count) == (block.header, block.hash, 1)
    assert again.has_valid_merkle_root()


# A minimal coinbase: one input spending the null outpoint, one empty output.
_COINBASE = "0100000001" + "00" * 32 + "ffffffff025100ffffffff01" + "00" * 8 + "0000000000"
