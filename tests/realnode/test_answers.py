"""The devnet's imitation, answer for answer against the real Fulcrum: the errors the client
types by meaning must come with the same codes and texts from both, so that the regular suite
(on the devnet) exercises what real servers send."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from indexer.electrum import ElectrumConnection, ElectrumError
from tests.indexer.electrum_servers import running_devnet
from tests.realnode.nodes import RealNodes

UNKNOWN = "ab" * 32

# (method, params given the chain's genesis coinbase txid)
CALLS: list[tuple[str, Callable[[str], list[Any]]]] = [
    ("blockchain.transaction.get", lambda cb: [cb]),
    ("blockchain.transaction.get", lambda cb: [UNKNOWN]),
    ("blockchain.transaction.get_height", lambda cb: [UNKNOWN]),
    ("blockchain.transaction.get_merkle", lambda cb: [UNKNOWN]),
    ("blockchain.transaction.get_merkle", lambda cb: [UNKNOWN, 1]),
    ("blockchain.transaction.id_from_pos", lambda cb: [0, 1]),
    ("blockchain.transaction.id_from_pos", lambda cb: [99999, 0]),
    ("blockchain.utxo.get_info", lambda cb: [UNKNOWN, 0]),
    ("blockchain.block.get", lambda cb: [0]),
    ("mempool.get", lambda cb: []),
    ("blockchain.transaction.broadcast", lambda cb: ["00"]),
    ("blockchain.block.header", lambda cb: [99999]),
    ("blockchain.block.headers", lambda cb: [99999, 10]),
]


async def _answer(url: str, method: str, params: list[Any]) -> tuple[str, object]:
    """("result", the result) or (the client's error type, (code, message))."""
    conn = await ElectrumConnection.open(url)
    try:
        try:
            result = await conn.request(method, *params)
        except ElectrumError as exc:
            return type(exc).__name__, (exc.code, exc.message)
        return "result", result
    finally:
        await conn.close()


async def _coinbase(url: str) -> str:
    conn = await ElectrumConnection.open(url)
    try:
        return str(await conn.request("blockchain.transaction.id_from_pos", 0, 0))
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("method", "params"), CALLS, ids=[f"{m}{i}" for i, (m, _) in enumerate(CALLS)]
)
async def test_the_devnet_answers_as_fulcrum_does(
    nodes: RealNodes, method: str, params: Callable[[str], list[Any]]
) -> None:
    real = await _answer(nodes.electrum_url, method, params(await _coinbase(nodes.electrum_url)))
    async with running_devnet(rostrum=False) as net:
        url = f"tcp://127.0.0.1:{net.servers[0].tcp_port}"
        imitation = await _answer(url, method, params(await _coinbase(url)))
    assert imitation == real  # the typed error (UnknownTransaction, …), code and text
