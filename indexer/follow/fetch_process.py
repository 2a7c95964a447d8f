"""Blocks fetched, checked and scanned in a child process during the initial sync.

In a long sync the event loop is the bottleneck: it decodes every block for the store, and
getting each block (the Electrum reply, hex, the transactions' boundaries and txids, the merkle
check) is about a third of its work. `FetchProcess` moves that part to a child process
(`fetch_child`) with its own connection to the same servers, on the core the SQLite writer and
the server leave free: the loop only unpickles a block's bytes, offsets and txids
(`Block.from_parts`).

It is a `Fetch` for `BlockPipeline`: the child runs the follower's own `fetch_block`, so the
same checks hold (the linked header, the merkle root) and the same errors come back
(`BlockChanged`, `ElectrumProtocolError`, the client's). If the child cannot start or dies, the
fetches in flight and every later one are made in this process instead (`fallback`): the sync
slows down, it does not stop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from bch.block import Block, BlockHeader
from indexer.follow.fetch import Fetch, FetchedBlock
from indexer.follow.frames import LENGTH, frame
from indexer.follow.settings import ClientSettings
from indexer.store.writer import widen_pipe

log = logging.getLogger("indexer.follow")

# The directory holding the `indexer` package: the child imports the same code as its parent.
_ROOT = Path(__file__).resolve().parents[2]


# Requests go to the child in batches of this many (one pipe write wakes the child, and a write
# per block cost the loop more than the fetch it saved on a loaded machine), or at once when
# fewer than `_LOW_WATER` sent ones are unanswered, so the child never starves.
_BATCH = 8
_LOW_WATER = 8


class _ChildGoneError(Exception):
    """The child exited or could not be reached."""


def fetched_from(parts: tuple[Any, ...]) -> FetchedBlock:
    """A `FetchedBlock` from the child's `parts_of`."""
    if parts[0] == "block":
        _, height, raw, offsets, txids = parts
        block = Block.from_parts(raw, offsets, txids)
        return FetchedBlock(height, block.header, block, (), len(raw))
    _, height, header, txs = parts
    return FetchedBlock(height, BlockHeader.from_bytes(header), None, txs, sum(map(len, txs)))


class _Answers(asyncio.SubprocessProtocol):
    """The child's stdout cut into frames as it arrives: one buffer, compacted once per read
    (a stream reader's `readexactly` moved the whole buffer for every block)."""

    def __init__(self, owner: FetchProcess) -> None:
        self._owner = owner
        self._buffer = bytearray()
        self.exited = asyncio.get_running_loop().create_future()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        buffer = self._buffer
        buffer += data
        end = len(buffer)
        pos = 0
        view = memoryview(buffer)
        try:
            while end - pos >= LENGTH.size:
                size = LENGTH.unpack_from(buffer, pos)[0]
                stop = pos + LENGTH.size + size
                if stop > end:
                    break
                message = pickle.loads(view[pos + LENGTH.size : stop])
                pos = stop
                self._owner._answered(*message)
        finally:
            view.release()
        if pos:
            del buffer[:pos]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._owner._child_gone()

    def process_exited(self) -> None:
        self._owner._child_gone()
        if not self.exited.done():
            self.exited.set_result(None)


class FetchProcess:
    """See the module doc. `async with FetchProcess(settings, fallback) as process:` then use
    `process.fetch` as a `BlockPipeline` fetch."""

    def __init__(self, settings: ClientSettings, fallback: Fetch) -> None:
        self._settings = settings
        self._fallback = fallback
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._answers: _Answers | None = None
        self._pending: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self._next_id = 0
        self._gone = False
        self._unsent: list[tuple[str, int, int, bytes]] = []
        self._unanswered = 0  # sent requests whose answer has not arrived
        self.fetched = 0  # blocks the child gave (not those fetched by `fallback`)

    async def __aenter__(self) -> FetchProcess:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def alive(self) -> bool:
        return self._transport is not None and not self._gone

    @property
    def pid(self) -> int | None:
        return None if self._transport is None else self._transport.get_pid()

    async def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(_ROOT), env.get("PYTHONPATH"))))
        loop = asyncio.get_running_loop()
        try:
            transport, answers = await loop.subprocess_exec(
                lambda: _Answers(self),
                *(sys.executable, "-m", "indexer.follow.fetch_child"),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None,
                env=env,
            )
        except (OSError, ValueError) as exc:
            log.warning("fetch process did not start (%s): fetching in the loop", exc)
            self._gone = True
            return
        self._transport, self._answers = transport, answers
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        self._stdin = stdin
        widen_pipe(transport.get_pipe_transport(1))  # fewer wake-ups for the blocks coming back
        stdin.write(frame(self._settings))

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        self._gone = True
        if transport is None:
            return
        stdin, self._stdin = self._stdin, None
        if stdin is not None and not stdin.is_closing():
            stdin.write(frame(("close",)))
            stdin.close()
        assert self._answers is not None
        try:
            async with asyncio.timeout(10.0):
                await asyncio.shield(self._answers.exited)
        except TimeoutError:
            transport.kill()
            await self._answers.exited
        transport.close()
        self._fail_pending()

    async def fetch(self, height: int, header: bytes) -> FetchedBlock:
        """The block at `height`, checked against `header`: from the child, or (child gone)
        from `fallback`."""
        if self._gone or self._stdin is None:
            return await self._fallback(height, header)
        rid = self._next_id = self._next_id + 1
        answer: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = answer
        self._unsent.append(("get", rid, height, header))
        try:
            if len(self._unsent) >= _BATCH or self._unanswered < _LOW_WATER:
                self._flush()
            ok, value = await answer
        except _ChildGoneError:
            return await self._fallback(height, header)
        finally:
            self._pending.pop(rid, None)
        if not ok:
            raise value
        self.fetched += 1
        return fetched_from(value)

    def _flush(self) -> None:
        stdin = self._stdin
        if not self._unsent or stdin is None or stdin.is_closing():
            return
        pending = self._pending
        batch = [r for r in self._unsent if r[1] in pending]  # not those given up meanwhile
        self._unsent = []
        self._unanswered += len(batch)
        stdin.write(b"".join(map(frame, batch)))

    def _answered(self, rid: int, ok: bool, value: Any) -> None:
        self._unanswered -= 1
        if self._unanswered < _LOW_WATER:
            self._flush()
        answer = self._pending.get(rid)
        if answer is not None and not answer.done():
            answer.set_result((ok, value))

    def _child_gone(self) -> None:
        if not self._gone:
            log.warning("fetch process exited: fetching in the loop")
        self._gone = True
        self._fail_pending()

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for answer in pending.values():
            if not answer.done():
                answer.set_exception(_ChildGoneError())
