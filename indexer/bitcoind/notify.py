"""The node's ZMQ pushes (`-zmqpubhashblock`, `-zmqpubrawtx`): `ZmqListener`.

A push only says "look now": the follower reads the chain and the mempool over RPC whatever the
push said, so a lost, repeated or reordered message costs nothing but a little delay (ZMQ drops
messages when a subscriber is slow or reconnecting, and says so only by a gap in the sequence
numbers). Raw transactions pushed are kept for a while (`recent`), so the mempool mirror need
not ask the node for them again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

import zmq
import zmq.asyncio

from bch.hashes import hash256
from runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)

HASHBLOCK = b"hashblock"
RAWTX = b"rawtx"
KEEP_TXS = 10_000  # raw transactions remembered (what one busy block's worth of pushes holds)

BlockPushed = Callable[[], None]
TxPushed = Callable[[bytes], None]


class ZmqListener:
    """Subscribes to `hashblock` and `rawtx` at each of `urls` (one node may publish them on
    different endpoints); `on_block()` / `on_tx(txid)` are called for each message."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        on_block: BlockPushed,
        on_tx: TxPushed | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one ZMQ endpoint is needed")
        self.urls = tuple(dict.fromkeys(urls))
        self.on_block = on_block
        self.on_tx = on_tx
        self.recent: OrderedDict[bytes, bytes] = OrderedDict()  # txid → raw, newest last
        self.messages = 0
        self._context: zmq.asyncio.Context | None = None
        self._socket: zmq.asyncio.Socket | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        context = zmq.asyncio.Context()
        sock = context.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 0)  # never drop at our end: the loop reads them all
        for topic in (HASHBLOCK, RAWTX):
            sock.setsockopt(zmq.SUBSCRIBE, topic)
        for url in self.urls:
            sock.connect(url)
        self._context, self._socket = context, sock
        self._task = asyncio.get_running_loop().create_task(self._receive(sock))

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close(linger=0)
        context, self._context = self._context, None
        if context is not None:
            context.term()

    def pushed(self, txid: bytes) -> bytes | None:
        """The raw transaction `txid` (wire order) if the node pushed it lately."""
        return self.recent.get(txid)

    async def _receive(self, sock: zmq.asyncio.Socket) -> None:
        while True:
            try:
                parts = await sock.recv_multipart()
            except zmq.ZMQError as exc:
                log.warning("ZMQ: %s", exc)
                await asyncio.sleep(1.0)
                continue
            self.messages += 1
            if len(parts) < 2:
                continue
            topic, body = parts[0], parts[1]
            try:  # a listener's fault must not stop the pushes
                if topic == HASHBLOCK:
                    self.on_block()
                elif topic == RAWTX:
                    txid = hash256(body)
                    self.recent[txid] = body
                    while len(self.recent) > KEEP_TXS:
                        self.recent.popitem(last=False)
                    if self.on_tx is not None:
                        self.on_tx(txid)
            except Exception:
                log.exception("a ZMQ listener failed")
