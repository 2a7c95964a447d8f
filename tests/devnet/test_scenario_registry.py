"""Token registries: what the chain commits to, and what the devnet's HTTP server serves.

The on-chain publication is read from the raw transaction fetched over Electrum; the documents
are fetched over a real HTTP connection; hashes and IPFS CIDs are recomputed here with hashlib
and base64.
"""

from __future__ import annotations

import base64
import hashlib
import json

import httpx

from bch.script import pushes
from bch.tx import Transaction
from devnet.bcmr_http import DocumentServer
from devnet.scenario.generator import ScenarioGenerator
from tests.devnet.client import TcpClient
from tests.devnet.test_scenario import SMALL, devnet_config


def publication(tx: Transaction) -> tuple[bytes, list[str]]:
    """(pushed hash, URIs) of the first `OP_RETURN "BCMR"` output."""
    for out in tx.outputs:
        if out.locking.startswith(bytes.fromhex("6a0442434d52")):
            items = pushes(out.locking[1:])
            return items[1], [u.decode() for u in items[2:]]
    raise AssertionError("no BCMR publication in the transaction")


def cid_digest(cid: str) -> bytes:
    """The sha2-256 digest inside a CIDv1 (raw codec), base32 multibase."""
    assert cid.startswith("b")
    body = cid[1:].upper()
    raw = base64.b32decode(body + "=" * (-len(body) % 8))
    assert raw[:4] == bytes((0x01, 0x55, 0x12, 0x20))
    return raw[4:]


async def test_registries_served_match_the_onchain_hashes_except_the_mismatch() -> None:
    from devnet.service import Devnet

    http = DocumentServer()
    await http.start()
    net = Devnet(devnet_config())
    await net.start()
    try:
        result = await ScenarioGenerator(net, SMALL.replace(http_base=http.url)).run()
        for path, body in result.documents.items():
            http.publish(path, body)
        ledger = result.ledger
        server = net.servers[0]
        client = await TcpClient.open(server.host, server.tcp_port)
        checked = {"match": 0, "mismatch": 0, "ascii": 0, "ipfs": 0, "later": 0}
        symbols: dict[str, list[str]] = {}
        async with httpx.AsyncClient() as web:
            for token in ledger.tokens:
                if token.bcmr is None:
                    continue
                raw = await client.call("blockchain.transaction.get", token.bcmr.txid)
                tx = Transaction.from_hex(raw)
                pushed, uris = publication(tx)
                assert uris == [token.bcmr.uri]
                if len(pushed) == 64:  # the hash's hex text in ASCII, as some publishers did
                    pushed = bytes.fromhex(pushed.decode())
                    checked["ascii"] += 1
                assert pushed.hex() == token.bcmr.hash
                if token.bcmr.txid != token.genesis_txid:
                    # A later authchain link: it spends output 0 of the genesis transaction.
                    assert tx.inputs[0].outpoint.txid_hex == token.genesis_txid
                    assert tx.inputs[0].outpoint.index == 0
                    checked["later"] += 1
                uri = token.bcmr.uri
                if uri.startswith("ipfs://"):
                    url = f"{http.url}/ipfs/{uri.removeprefix('ipfs://')}"
                    checked["ipfs"] += 1
                else:
                    url = uri
                assert url == token.bcmr.url
                reply = await web.get(url)
                assert reply.status_code == 200
                body = reply.content
                if uri.startswith("ipfs://"):
                    assert cid_digest(uri.removeprefix("ipfs://")) == hashlib.sha256(body).digest()
                actual = hashlib.sha256(body).digest()
                assert actual.hex() == token.bcmr.content_sha256
                if token.bcmr.mismatch:
                    assert actual != pushed
                    checked["mismatch"] += 1
                else:
                    assert actual == pushed
                    checked["match"] += 1
                doc = json.loads(body)
                [(_, snapshot)] = doc["identities"][token.category].items()
                assert snapshot["token"] == {
                    "category": token.category,
                    "symbol": token.symbol,
                    "decimals": token.decimals,
                }
                symbols.setdefault(token.symbol, []).append(token.category)
            assert (await web.get(f"{http.url}/nothing-here")).status_code == 404
            assert (await web.post(f"{http.url}/ledger.json")).status_code == 405
            head = await web.head(url)
            assert head.status_code == 200 and head.content == b""
            assert int(head.headers["content-length"]) == len(body)
        await client.close()
        assert checked["mismatch"] == 1
        assert checked["match"] >= 3 and checked["ascii"] == 1 and checked["ipfs"] >= 2
        assert checked["later"] == 1
        # Two registries claim one symbol (the REST API must call it ambiguous).
        assert any(len(c) == 2 for c in symbols.values())
        assert any(t.bcmr is None for t in ledger.tokens)
    finally:
        await net.stop()
        await http.close()


async def test_http_server_keeps_connections_alive() -> None:
    http = DocumentServer()
    http.publish("/a.json", b'{"a": 1}')
    await http.start()
    try:
        async with httpx.AsyncClient() as web:
            for _ in range(3):
                assert (await web.get(f"{http.url}/a.json")).json() == {"a": 1}
            index = (await web.get(f"{http.url}/")).json()
            assert index == {"documents": ["/a.json"]}
        assert http.requests == 4
    finally:
        await http.close()


async def test_a_burned_identity_ends_its_authchain() -> None:
    """With `burn_identity`, the late-publishing token's last authchain link spends the output 0
    of its publication and has an OP_RETURN (not a publication) at output 0; no other token's
    identity is burned, and the chain is otherwise the same kind of history."""
    from devnet.service import Devnet

    net = Devnet(devnet_config())
    await net.start()
    try:
        result = await ScenarioGenerator(net, SMALL.replace(burn_identity=True)).run()
        chain = net.nodes[0].chain
        burned = [t for t in result.ledger.tokens if t.identity_burned_txid is not None]
        assert [t.name for t in burned] == ["Dragon Gold"]
        (gold,) = burned
        assert gold.bcmr is not None and gold.bcmr.txid != gold.genesis_txid
        by_id = {tx.txid_hex: tx for b in chain.blocks for tx in b.txs}
        assert gold.identity_burned_txid is not None
        tx = by_id[gold.identity_burned_txid]
        assert (tx.inputs[0].outpoint.txid_hex, tx.inputs[0].outpoint.index) == (gold.bcmr.txid, 0)
        assert tx.outputs[0].locking[:1] == b"\x6a"
        assert not any(o.locking.startswith(bytes.fromhex("6a0442434d52")) for o in tx.outputs)
        # Nothing spends the burn's output 0 (an OP_RETURN is unspendable) and the identity's
        # earlier outputs are all spent: the authchain has no head left.
        spent = {(i.outpoint.txid_hex, i.outpoint.index) for t in by_id.values() for i in t.inputs}
        assert (gold.genesis_txid, 0) in spent and (gold.bcmr.txid, 0) in spent
    finally:
        await net.stop()
