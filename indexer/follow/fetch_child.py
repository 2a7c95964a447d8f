"""The fetch process's side (see `indexer.follow.fetch_process`): fetch, check and scan blocks.

Run as `python -m indexer.follow.fetch_child`. It reads frames from stdin and writes frames to
stdout (4-byte little-endian length, then a pickle):

- the first request is the client's settings (`ClientSettings`); then `("get", id, height,
  header)` fetches the block at `height`, checked against `header` exactly as the follower
  checks it (`fetch_block`), and `("close",)` ends the process;
- each answer is `(id, True, parts)` or `(id, False, exception)`, in the order the fetches
  finish: `parts` is `("block", height, raw, offsets, txids)` (Rostrum: the block scanned and
  hashed here, see `Block.parts`) or `("txs", height, header, transactions)` (the Fulcrum
  fallback).

End of input means the parent is gone (even killed with SIGKILL): the process exits.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any

from indexer.electrum import ElectrumClient, ElectrumProtocolError
from indexer.follow.fetch import FetchedBlock, fetch_block
from indexer.follow.frames import frame, read_frame
from indexer.follow.settings import ClientSettings


def parts_of(fetched: FetchedBlock) -> tuple[Any, ...]:
    if fetched.block is not None:
        return ("block", fetched.height, *fetched.block.parts())
    return ("txs", fetched.height, fetched.header.encode(), fetched.transactions)


def _answer(rid: int, task: asyncio.Task[FetchedBlock]) -> bytes:
    if task.cancelled():
        return frame((rid, False, ElectrumProtocolError("the fetch was cancelled")))
    exc = task.exception()
    if exc is None:
        return frame((rid, True, parts_of(task.result())))
    try:
        return frame((rid, False, exc))
    except Exception:  # an exception that does not pickle: its text
        return frame((rid, False, ElectrumProtocolError(f"{type(exc).__name__}: {exc}")))


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    settings: ClientSettings = await read_frame(reader)
    client: ElectrumClient = settings.client()
    tasks: set[asyncio.Task[FetchedBlock]] = set()
    # Answers finished in one loop turn (a read from the server often completes several) go
    # out in one pipe write: each write wakes the parent.
    ready: list[bytes] = []
    loop = asyncio.get_running_loop()

    def flush() -> None:
        if not writer.is_closing():
            writer.write(b"".join(ready))
        ready.clear()

    def done(rid: int, task: asyncio.Task[FetchedBlock]) -> None:
        tasks.discard(task)
        if not ready:
            loop.call_soon(flush)
        ready.append(_answer(rid, task))

    try:
        while True:
            try:
                request = await read_frame(reader)
            except EOFError:
                return
            if request[0] == "close":
                return
            _, rid, height, header = request
            task = asyncio.create_task(fetch_block(client, height, header))
            tasks.add(task)
            task.add_done_callback(functools.partial(done, rid))
            await writer.drain()
    finally:
        for task in list(tasks):
            task.cancel()
        await client.close()


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        await serve(reader, writer)
    finally:
        writer.close()


if __name__ == "__main__":
    asyncio.run(main())
