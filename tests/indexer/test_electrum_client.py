"""ElectrumClient's typed calls against the devnet over real sockets (the devnet's own chain is
the oracle), plus a scripted server for the 1.5 header shape and for a lying answer."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest

from bch.hashes import hash256
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from devnet.service import Devnet
from indexer.electrum import (
    ElectrumConnectionError,
    ElectrumError,
    ElectrumProtocolError,
    HeaderNotice,
    Unspent,
    UtxoInfo,
    scripthash,
)
from indexer.electrum.errors import METHOD_NOT_FOUND
from tests.indexer.electrum_servers import (
    RecordingProxy,
    ScriptedPeer,
    ScriptedServer,
    client,
    eventually,
    running_devnet,
    tcp_url,
    ws_url,
)

ALICE = Wallet.from_seed("electrum client alice")
REJECTED = "the transaction was rejected by network rules.\n\n"


def sh_of(wallet: Wallet) -> str:
    """Electrum's scripthash, computed here independently of the client."""
    return hashlib.sha256(wallet.locking_bytecode).digest()[::-1].hex()


def status_of(history: list[dict[str, Any]]) -> str | None:
    """The Electrum status of a history, per the protocol's definition."""
    if not history:
        return None
    return hashlib.sha256(
        "".join(f"{h['tx_hash']}:{h['height']}:" for h in history).encode()
    ).hexdigest()


async def fund(net: Devnet, wallet: Wallet, amount: int) -> tuple[OutPoint, TxOutput]:
    txid = await net.network.faucet(net.nodes[0], wallet.locking_bytecode, amount)
    return OutPoint.from_hex(txid, 0), TxOutput(amount, wallet.locking_bytecode)


def spend(wallet: Wallet, coin: tuple[OutPoint, TxOutput], outputs: list[TxOutput]) -> Transaction:
    unsigned = Transaction.build([TxInput(coin[0])], outputs)
    return wallet.sign_transaction(unsigned, [coin[1]])


@pytest.mark.parametrize("transport", ["tcp", "ws"])
async def test_chain_calls(transport: str) -> None:
    async with running_devnet() as net:
        chain = net.nodes[0].chain
        url = tcp_url(net) if transport == "tcp" else ws_url(net)
        async with client([url]) as c:
            assert await c.get_tip() == (110, chain.tip.header_bytes)
            assert await c.get_header(7) == chain.blocks[7].header_bytes
            assert await c.get_headers(0, 111) == [b.header_bytes for b in chain.blocks]
            assert await c.get_headers(100, 50) == [b.header_bytes for b in chain.blocks[100:]]
            assert await c.get_headers(500, 5) == []
            with pytest.raises(ElectrumError):
                await c.get_header(111)


async def test_headers_in_the_protocol_1_5_shape_over_several_calls() -> None:
    headers = [hash256(bytes([i])) * 2 + bytes(16) for i in range(10)]
    asked: list[list[Any]] = []

    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        if request["method"] != "blockchain.block.headers":
            await peer.error(request, METHOD_NOT_FOUND, "unknown method")
            return
        asked.append(request["params"])
        start, count = request["params"]
        chunk = headers[start : start + min(count, 3)]  # this server's maximum is 3
        await peer.reply(request, {"count": len(chunk), "max": 3, "hex": b"".join(chunk).hex()})

    async with ScriptedServer.running(handler) as server, client([server.url]) as c:
        assert await c.get_headers(2, 7) == headers[2:9]
        assert await c.get_headers(8, 5) == headers[8:]
    assert asked == [[2, 7], [5, 4], [8, 1], [8, 5], [10, 3]]


async def test_transactions_batched_in_chunks_of_at_most_300() -> None:
    async with running_devnet() as net:
        txids = [
            await net.network.faucet(net.nodes[0], ALICE.locking_bytecode, 10_000 + i)
            for i in range(3)
        ]
        net.nodes[0].mine(1)
        coinbases = [b.txs[0].txid_hex for b in net.nodes[0].chain.blocks[1:]]
        wanted = (txids + coinbases) * 3  # 339 requests, repeats included
        found = net.nodes[0].find_tx(bytes.fromhex(txids[0])[::-1])
        assert found is not None
        async with (
            RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
            client([proxy.url]) as c,
        ):
            assert await c.get_transaction(txids[0]) == found[0].to_bytes()
            raws = await c.get_transactions(wanted)
            with pytest.raises(ElectrumError) as err:
                await c.get_transaction("00" * 32)
            assert err.value.code == 2  # daemon error: no such transaction
        assert [hash256(r)[::-1].hex() for r in raws] == wanted
        batches = [m for m in proxy.sessions[0] if isinstance(m, list)]
        tx_batches = [b for b in batches if b[0]["method"] == "blockchain.transaction.get"]
        assert [len(b) for b in tx_batches] == [300, len(wanted) - 300]


async def test_a_transaction_that_is_not_the_one_asked_for_is_refused() -> None:
    other = spend(ALICE, (OutPoint(bytes(32), 0), TxOutput(1, b"")), [TxOutput(0, b"\x6a")])

    async def handler(peer: ScriptedPeer, request: dict[str, Any]) -> None:
        if request["method"] == "blockchain.transaction.get":
            await peer.reply(request, other.hex())
        else:
            await peer.error(request, METHOD_NOT_FOUND, "unknown method")

    async with ScriptedServer.running(handler) as server, client([server.url]) as c:
        with pytest.raises(ElectrumProtocolError, match="not"):
            await c.get_transaction("11" * 32)
        with pytest.raises(ElectrumProtocolError):
            await c.get_transactions([other.txid_hex, "11" * 32])


async def test_broadcast_verdicts_pass_through_unchanged() -> None:
    async with running_devnet() as net, client([tcp_url(net)]) as c:
        coin = await fund(net, ALICE, 40_000)
        tx = spend(ALICE, coin, [TxOutput(39_000, ALICE.locking_bytecode)])
        rival = spend(ALICE, coin, [TxOutput(38_000, ALICE.locking_bytecode)])
        assert await c.broadcast(tx.hex()) == tx.txid_hex
        assert await c.broadcast(tx.hex()) == tx.txid_hex  # already known: accepted again
        with pytest.raises(ElectrumError) as err:
            await c.broadcast(rival.hex())
        assert (err.value.code, err.value.message) == (1, REJECTED + "txn-mempool-conflict\n")
        with pytest.raises(ElectrumError) as err:
            await c.broadcast("0badc0de")
        assert (err.value.code, err.value.message) == (1, REJECTED + "TX decode failed\n")
        net.nodes[0].set_faults(reject="mempool min fee not met, 0 < 200")
        with pytest.raises(ElectrumError) as err:
            await c.broadcast(rival.hex())
        assert err.value.message == REJECTED + "mempool min fee not met, 0 < 200\n"


async def test_broadcast_is_never_retried() -> None:
    async with running_devnet() as net:
        coin = await fund(net, ALICE, 40_000)
        tx = spend(ALICE, coin, [TxOutput(39_000, ALICE.locking_bytecode)])
        async with (
            RecordingProxy.running("127.0.0.1", net.servers[0].tcp_port) as proxy,
            client([proxy.url]) as c,
        ):
            net.nodes[0].set_faults(drop=1)
            with pytest.raises(ElectrumConnectionError):
                await c.broadcast(tx.hex())
            sent = [m for s in range(len(proxy.sessions)) for m in proxy.methods(s)]
            assert sent.count("blockchain.transaction.broadcast") == 1
            assert await c.broadcast(tx.hex()) == tx.txid_hex  # a new connection
            assert len(proxy.sessions) == 2


async def test_heights_unspent_outputs_tokens_and_fees() -> None:
    async with running_devnet() as net, client([tcp_url(net)]) as c:
        sh = sh_of(ALICE)
        assert scripthash(ALICE.locking_bytecode) == sh
        coin = await fund(net, ALICE, 50_000)
        ft = TokenData(coin[0].txid, 1_000)
        nft = TokenData(coin[0].txid, 0, NFT(Capability.MINTING, b"\x01\x02"))
        genesis = spend(
            ALICE,
            coin,
            [
                TxOutput(1_000, ALICE.locking_bytecode, ft),
                TxOutput(1_000, ALICE.locking_bytecode, nft),
                TxOutput(47_000, ALICE.locking_bytecode),
            ],
        )
        assert await c.broadcast(genesis.hex()) == genesis.txid_hex
        assert await c.transaction_height(genesis.txid_hex) == 0
        assert await c.transaction_height("22" * 32) is None
        assert await c.utxo_info(coin[0].txid_hex, 0) is None  # spent in the mempool

        outs = [OutPoint(genesis.txid, i) for i in range(3)]
        tokens_only = await c.listunspent(sh, "tokens_only")
        assert tokens_only == [Unspent(outs[0], 0, 1_000, ft), Unspent(outs[1], 0, 1_000, nft)]
        assert await c.listunspent(sh, "exclude_tokens") == [Unspent(outs[2], 0, 47_000, None)]
        assert {u.outpoint for u in await c.listunspent(sh)} == set(outs)
        assert await c.utxo_info(genesis.txid_hex, 1) == UtxoInfo(None, sh, 1_000, nft)

        net.nodes[0].mine(1)
        assert await c.transaction_height(genesis.txid_hex) == 111
        assert await c.utxo_info(genesis.txid_hex, 0) == UtxoInfo(111, sh, 1_000, ft)
        assert [u.height for u in await c.listunspent(sh)] == [111, 111, 111]
        assert await c.relay_fee() == 1_000  # 0.00001 BCH/kB
        with pytest.raises(ValueError):
            await c.listunspent(sh, "everything")  # type: ignore[arg-type]


async def test_mempool_listing() -> None:
    async with running_devnet() as net, client([tcp_url(net)]) as c:
        assert await c.mempool_txids() == []
        txids = {
            await net.network.faucet(net.nodes[0], ALICE.locking_bytecode, 9_000 + i)
            for i in range(4)
        }
        assert set(await c.mempool_txids()) == txids
        net.nodes[0].mine(1)
        assert await c.mempool_txids() == []


async def test_header_notifications_and_listeners_that_make_requests() -> None:
    async with running_devnet() as net, client([tcp_url(net)]) as c:
        seen: list[HeaderNotice] = []
        fetched: list[bytes] = []

        async def on_header(tip: HeaderNotice) -> None:
            seen.append(tip)
            fetched.append(await c.get_header(tip.height))  # the listener may call the client

        chain = net.nodes[0].chain
        first = await c.subscribe_headers(on_header)
        assert first == HeaderNotice(110, chain.tip.header_bytes)
        assert first.hash_hex == chain.tip.hash_hex
        net.nodes[0].mine(1)
        await eventually(lambda: len(fetched) == 1)
        net.nodes[0].mine(3)
        await eventually(lambda: len(fetched) == 4)
        assert [n.height for n in seen] == [111, 112, 113, 114]
        assert [n.header for n in seen] == [b.header_bytes for b in chain.blocks[111:]]
        assert fetched == [n.header for n in seen]


async def test_scripthash_notifications() -> None:
    bob = Wallet.from_seed("electrum client bob")
    sh = sh_of(bob)
    async with running_devnet() as net, client([tcp_url(net)]) as c:
        seen: list[tuple[str, str | None]] = []
        assert await c.subscribe_scripthash(sh, lambda s, status: seen.append((s, status))) is None
        await net.network.faucet(net.nodes[0], bob.locking_bytecode, 20_000)
        await eventually(lambda: len(seen) == 1)
        history = await c.request("blockchain.scripthash.get_history", sh)
        assert seen == [(sh, status_of(history))] and history[0]["height"] == 0
        net.nodes[0].mine(1)
        await eventually(lambda: len(seen) == 2)
        history = await c.request("blockchain.scripthash.get_history", sh)
        assert seen[1] == (sh, status_of(history)) and history[0]["height"] == 111
        await c.unsubscribe_scripthash(sh)
        await net.network.faucet(net.nodes[0], bob.locking_bytecode, 20_000)
        await asyncio.sleep(0.1)
        assert len(seen) == 2
