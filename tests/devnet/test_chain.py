"""Headers, blocks and transactions as the server serves them: real, linked, merkle-committed."""

from __future__ import annotations

import itertools
import struct

import pytest

from bch.block import Block
from bch.script import iter_ops
from bch.wallet import Wallet
from devnet.service import Devnet
from tests.devnet.client import Client, ServerError
from tests.devnet.conftest import connect
from tests.devnet.helpers import double_sha, fund, tx_height


def naive_merkle(hashes: list[bytes]) -> bytes:
    level = list(hashes)
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [double_sha(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


async def test_headers_link_and_tip(client: Client) -> None:
    tip = await client.call("blockchain.headers.subscribe")
    assert tip == await client.call("blockchain.headers.get_tip")
    height = tip["height"]
    assert height == 110  # the premine
    result = await client.call("blockchain.block.headers", 0, height + 1)
    headers = [bytes.fromhex(h) for h in result["headers"]]  # negotiated 1.6: a list
    assert result["count"] == height + 1
    assert headers[-1].hex() == tip["hex"]
    for prev, header in itertools.pairwise(headers):
        assert header[4:36] == double_sha(prev)
        assert struct.unpack_from("<I", header, 72)[0] == 0x207FFFFF
    times = [struct.unpack_from("<I", h, 68)[0] for h in headers]
    assert times == sorted(times)
    assert await client.call("blockchain.block.header", 5) == headers[5].hex()


async def test_headers_hex_shape_below_1_6(devnet: Devnet) -> None:
    c = await connect(devnet, versions=("1.4", "1.5"))
    try:
        result = await c.call("blockchain.block.headers", 3, 4)
        assert "headers" not in result
        assert result["count"] == 4
        assert len(result["hex"]) == 4 * 160
        assert result["hex"][:160] == await c.call("blockchain.block.header", 3)
    finally:
        await c.close()


async def test_block_get_is_the_real_block(tcp: Client) -> None:
    wallet = Wallet.from_seed("chain-test")
    await fund(tcp, wallet, 50_000)  # a block with two transactions
    tip = await tcp.call("blockchain.headers.get_tip")
    raw = bytes.fromhex(await tcp.call("blockchain.block.get", tip["height"]))
    assert raw[:80].hex() == tip["hex"]
    by_hash = await tcp.call("blockchain.block.get", double_sha(raw[:80])[::-1].hex())
    assert by_hash == raw.hex()
    block = Block.from_bytes(raw)
    txids = list(block.txids)
    assert len(txids) == 2
    assert raw[36:68] == naive_merkle(txids)
    assert txids[1:] == sorted(txids[1:])
    for pos, txid in enumerate(txids):
        assert await tcp.call("blockchain.transaction.id_from_pos", tip["height"], pos) == (
            txid[::-1].hex()
        )
        tx_hex = await tcp.call("blockchain.transaction.get", txid[::-1].hex())
        assert double_sha(bytes.fromhex(tx_hex)) == txid
    with pytest.raises(ServerError) as err:
        await tcp.call("blockchain.transaction.id_from_pos", tip["height"], 2)
    assert err.value.message == f"No transaction at position 2 for height {tip['height']}"


async def test_coinbase_is_bip34_and_pays_the_subsidy(tcp: Client) -> None:
    for height in (1, 17, 110):
        raw = bytes.fromhex(await tcp.call("blockchain.block.get", height))
        coinbase = Block.from_bytes(raw).transaction(0)
        assert coinbase.inputs[0].outpoint.txid == b"\x00" * 32
        op, data = next(iter_ops(coinbase.inputs[0].unlocking))
        pushed = op - 0x50 if data is None else int.from_bytes(data, "little")  # OP_N or a push
        assert pushed == height
        assert sum(o.value for o in coinbase.outputs) == 50 * 100_000_000


async def test_merkle_proofs(tcp: Client) -> None:
    wallet = Wallet.from_seed("merkle")
    for _ in range(2):
        await fund(tcp, wallet, 10_000, mine=False)
    await tcp.call("devnet.mine", 1)
    height = (await tcp.call("blockchain.headers.get_tip"))["height"]
    header = bytes.fromhex(await tcp.call("blockchain.block.header", height))
    for pos in range(3):
        proof = await tcp.call("blockchain.transaction.id_from_pos", height, pos, True)
        node = bytes.fromhex(proof["tx_hash"])[::-1]
        index = pos
        for sibling_hex in proof["merkle"]:
            sibling = bytes.fromhex(sibling_hex)[::-1]
            node = double_sha(sibling + node) if index & 1 else double_sha(node + sibling)
            index >>= 1
        assert node == header[36:68]
        same = await tcp.call("blockchain.transaction.get_merkle", proof["tx_hash"], height)
        assert same == {"block_height": height, "merkle": proof["merkle"], "pos": pos}


async def test_transaction_heights_and_verbose(tcp: Client) -> None:
    wallet = Wallet.from_seed("heights")
    txid = await tcp.call("devnet.faucet", wallet.address, 20_000)
    assert await tcp.call("blockchain.transaction.get_height", txid) == 0
    assert txid in await tcp.call("mempool.get")
    assert await tcp.call("mempool.count") == 1
    await tcp.call("devnet.mine", 1)
    tip = await tcp.call("blockchain.headers.get_tip")
    assert await tcp.call("blockchain.transaction.get_height", txid) == tip["height"]
    assert await tcp.call("mempool.get") == []
    assert await tx_height(tcp, "ab" * 32) is None
    verbose = await tcp.call("blockchain.transaction.get", txid, True)
    assert verbose["txid"] == txid
    assert verbose["confirmations"] == 1
    assert verbose["blockhash"] == double_sha(bytes.fromhex(tip["hex"]))[::-1].hex()
    paid = [o for o in verbose["vout"] if o["scriptPubKey"]["hex"] == wallet.locking_bytecode.hex()]
    assert paid[0]["value"] == pytest.approx(0.0002)
    with pytest.raises(ServerError) as err:
        await tcp.call("blockchain.transaction.get", "ab" * 32)
    assert err.value.code == 2


async def test_every_header_meets_its_proof_of_work_target() -> None:
    from bch.block import BlockHeader
    from devnet.service import Devnet, DevnetConfig

    async with Devnet(DevnetConfig(tcp_base=0, ws_base=0, verify=False, premine=30)) as net:
        node = net.nodes[0]
        headers = [BlockHeader.from_bytes(r.header_bytes) for r in node.chain.blocks]
        assert len(headers) == 31
        assert all(h.check_proof_of_work() for h in headers)
        assert len({h.nonce for h in headers}) > 1  # the nonce really is ground
