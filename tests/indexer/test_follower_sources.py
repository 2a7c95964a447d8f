"""The Electrum chain source's mempool fetch: a transaction the server does not know left the
mempool; any other error (a busy server, a daemon error) is raised, so the round is retried
rather than the transaction dropped."""

from __future__ import annotations

from typing import Any

import pytest

from bch.tx import OutPoint, Transaction, TxInput, TxOutput, hex_to_hash
from indexer.electrum import ElectrumError, ServerBusy
from indexer.follow import ElectrumSource
from tests.indexer.electrum_servers import ScriptedPeer, ScriptedServer, client

UNKNOWN = "daemon error: DaemonError({'code': -5, 'message': 'No such mempool or blockchain transaction. Use gettransaction for wallet transactions.'})"  # noqa: E501


def tx(n: int) -> Transaction:
    return Transaction.build([TxInput(OutPoint(bytes([n]) * 32, 0))], [TxOutput(1000, b"\x51")])


KNOWN, GONE, BUSY = tx(1), tx(2), tx(3)


async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
    if request["method"] == "server.features":
        await peer.reply(request, {"genesis_hash": "00" * 32})
    elif request["method"] != "blockchain.transaction.get":
        await peer.error(request, -32601, "Unsupported request")
    elif request["params"][0] == KNOWN.txid_hex:
        await peer.reply(request, KNOWN.hex())
    elif request["params"][0] == GONE.txid_hex:
        await peer.error(request, 2, UNKNOWN)
    else:
        await peer.error(request, 4, "Batch limit exceeded")


async def test_a_transaction_the_server_does_not_know_is_gone() -> None:
    async with ScriptedServer.running(handler) as server:
        source = ElectrumSource(client([server.url]))
        try:
            wanted = [hex_to_hash(KNOWN.txid_hex), hex_to_hash(GONE.txid_hex)]
            assert await source.mempool_transactions(wanted) == {wanted[0]: KNOWN.to_bytes()}
        finally:
            await source.close()


async def test_any_other_error_fails_the_fetch() -> None:
    async with ScriptedServer.running(handler) as server:
        source = ElectrumSource(client([server.url]))
        try:
            wanted = [hex_to_hash(t.txid_hex) for t in (KNOWN, GONE, BUSY)]
            with pytest.raises(ElectrumError) as caught:
                await source.mempool_transactions(wanted)
            assert isinstance(caught.value, ServerBusy)
        finally:
            await source.close()
