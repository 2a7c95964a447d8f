"""The registry decoder and the fetch job against the devnet's small scenario and its HTTP
server: authchains and publications equal the ledger's tokens, fetched registries are checked
against the published hashes (the hex-as-ASCII variant, the deliberate mismatch, an unreachable
URI that later answers, the last good copy kept), and the reads give the API's entries."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bch.block import Block
from bch.script import push_data
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from devnet.bcmr_http import DocumentServer
from devnet.scenario.generator import ScenarioGenerator
from devnet.service import Devnet
from indexer.decoders.cauldron.decode import decode_order
from indexer.decoders.registry import Link, RegistryContext, RegistryDecoder, decode_registry_tx
from indexer.registry_fetch import FetchConfig, OffchainSource, RegistryFetcher
from indexer.store import Store, open_writer
from indexer.store.decoder import BlockBytes, BlockContext, BlockTx
from indexer.store.queries_registry import (
    all_entries,
    authchain,
    categories_with_symbol,
    fetch_log,
    onchain_entry,
)
from tests.devnet.test_scenario import SMALL, devnet_config
from tests.indexer.test_decoder_oracle import Chain, dump, index, small_chain

TABLES = ("registry_links", "registry_publications")


async def test_registry_against_the_scenario(tmp_path: Path) -> None:
    http = DocumentServer()
    await http.start()
    net = Devnet(devnet_config())
    await net.start()
    try:
        result = await ScenarioGenerator(net, SMALL.replace(http_base=http.url)).run()
        blocks = [b.raw for b in net.nodes[0].chain.blocks]
    finally:
        await net.stop()
    ledger = result.ledger
    spice = ledger.tokens_with_symbol("SPICE")[0]
    assert spice.bcmr is not None
    spice_path = spice.bcmr.uri.replace("ipfs://", "/ipfs/")
    for path, body in result.documents.items():
        if path != spice_path:  # unreachable at first
            http.publish(path, body)
    db = tmp_path / "index.db"
    store = await index(db, [RegistryDecoder()], blocks)
    conn = await open_writer(db)
    clock = [2_000_000_000.0]
    try:
        # --- chain rows equal the ledger ---------------------------------------------------
        pubs = await store.conn.execute_fetchall(
            "SELECT authbase, txid, expected_hash, hash_encoding, uris, seq "
            "FROM registry_publications"
        )
        got = {
            bytes(r[0]).hex(): (bytes(r[1]).hex(), bytes(r[2]).hex(), r[3], json.loads(r[4]))
            for r in pubs
        }
        want = {
            t.category: (t.bcmr.txid, t.bcmr.hash, t.bcmr.hash_encoding, [t.bcmr.uri])
            for t in ledger.tokens
            if t.bcmr is not None
        }
        assert got == want
        assert {r[3] for r in pubs} == {"digest", "ascii-hex"}
        for t in ledger.tokens:
            chain = await authchain(store.conn, t.category)
            assert chain is not None and not chain.burned
            later = t.bcmr is not None and t.bcmr.txid != t.genesis_txid
            assert chain.links == (2 if later else 1)
            assert chain.head_txid == (t.bcmr.txid if later and t.bcmr else t.genesis_txid)

        # --- fetch: SPICE unreachable, the rest checked -------------------------------------
        config = FetchConfig(ipfs_gateway=f"{http.url}/ipfs/", retries=1, backoff=0.01)
        fetcher = RegistryFetcher(conn, config, clock=lambda: clock[0])
        assert await fetcher.run_once() == len(want)
        assert await fetcher.run_once() == 0  # nothing due until the retry time
        log = await fetch_log(conn, spice.category)
        assert [(f.http_status, f.matches, f.actual_hash) for f in log] == [(404, False, None)]
        assert await onchain_entry(conn, spice.category, int(clock[0])) is None
        for t in ledger.tokens:
            if t.bcmr is None or t is spice:
                continue
            entry = await onchain_entry(conn, t.category, int(clock[0]))
            assert entry is not None
            assert entry["name"] == t.name
            assert entry["token"] == {
                "category": t.category,
                "symbol": t.symbol,
                "decimals": t.decimals,
            }
            meta = entry["filemeta"]
            assert meta["source"] == "onchain"
            assert meta["expected_hash"] == t.bcmr.hash
            assert meta["actual_hash"] == t.bcmr.content_sha256
            assert (meta["expected_hash"] != meta["actual_hash"]) == t.bcmr.mismatch
            fetched = await fetch_log(conn, t.category)
            assert [f.matches for f in fetched] == [not t.bcmr.mismatch]
        quiet = ledger.tokens_with_symbol("QUIET")[0]
        assert await onchain_entry(conn, quiet.category, int(clock[0])) is None
        drgn = sorted(t.category for t in ledger.tokens_with_symbol("DRGN"))
        assert await categories_with_symbol(conn, "DRGN", int(clock[0])) == drgn

        # --- SPICE answers later; then a tampered copy never replaces the good one ----------
        http.publish(spice_path, result.documents[spice_path])
        clock[0] += config.retry_after
        assert await fetcher.run_once() == 2  # SPICE, and LUMEN whose copy never matched
        entry = await onchain_entry(conn, spice.category, int(clock[0]))
        assert entry is not None and entry["filemeta"]["actual_hash"] == spice.bcmr.hash
        http.publish(spice_path, result.documents[spice_path].replace(b"Spice", b"Sp1ce"))
        clock[0] += config.refetch_after
        assert await fetcher.run_once() == len(want)
        log = await fetch_log(conn, spice.category)
        assert [f.matches for f in log] == [False, True, False]
        assert log[-1].actual_hash is not None and log[-1].actual_hash != spice.bcmr.hash
        entry = await onchain_entry(conn, spice.category, int(clock[0]))
        assert entry is not None and entry["name"] == "Spice"  # the last good copy
        assert entry["filemeta"]["actual_hash"] == spice.bcmr.hash

        # --- off-chain sources merge into /all ----------------------------------------------
        doc = json.loads(result.documents[spice_path])
        snap = next(iter(doc["identities"][spice.category].values()))
        snap["name"] = "Spice (well-known list)"
        local = tmp_path / "list.json"
        local.write_text(json.dumps(doc))
        offchain = RegistryFetcher(
            conn,
            FetchConfig(offchain=(OffchainSource("wellknown", str(local)),)),
            clock=lambda: clock[0],
        )
        assert await offchain.fetch_offchain() == 1
        entries = await all_entries(conn, spice.category, int(clock[0]))
        assert [(e["name"], e["filemeta"]["source"]) for e in entries] == [
            ("Spice", "onchain"),
            ("Spice (well-known list)", "wellknown"),
        ]
        assert (
            entries[1]["filemeta"]["actual_hash"] == hashlib.sha256(local.read_bytes()).hexdigest()
        )
        assert await all_entries(conn, quiet.category, int(clock[0])) == []

        # --- a reorg removing a publication takes its fetches along -------------------------
        genesis_height = min(
            t.height for t in ledger.transactions if t.txid == spice.genesis_txid and t.height
        )
        await store.undo_to(genesis_height - 1)
        assert await fetch_log(conn, spice.category) == []
        assert await onchain_entry(conn, spice.category, int(clock[0])) is None
    finally:
        await conn.close()
        await store.close()
        await http.close()


@pytest.fixture(scope="module")
def chain() -> Chain:
    return small_chain()


async def test_undo_is_exact(chain: Chain, tmp_path: Path) -> None:
    full = await index(tmp_path / "a.db", [RegistryDecoder()], chain.blocks)
    cut = len(chain.blocks) // 2
    part = await index(tmp_path / "b.db", [RegistryDecoder()], chain.blocks[:cut])
    try:
        await full.undo_to(cut - 1)
        assert await dump(full, TABLES) == await dump(part, TABLES)
        # …and the in-memory heads were rebuilt: the rest of the chain indexes identically.
        for height in range(cut, len(chain.blocks)):
            await full.apply_block(height, chain.blocks[height])
            await part.apply_block(height, chain.blocks[height])
        assert await dump(full, TABLES) == await dump(part, TABLES)
    finally:
        await full.close()
        await part.close()


class EveryTransaction(RegistryDecoder):
    """The registry decoder as it was before its `select` hook: every transaction decoded."""

    def select(self, block: BlockBytes) -> list[int]:
        return list(range(len(block.txids)))


async def test_select_finds_every_link(chain: Chain, tmp_path: Path) -> None:
    """The prefilter misses nothing: the scenario chain indexed with every transaction as a
    candidate and with `select` (in batches, then across an undo and re-apply) gives the
    same registry tables, row for row, while decoding a small part of the chain."""
    old = await index(tmp_path / "old.db", [EveryTransaction()], chain.blocks)
    new = await Store.open(tmp_path / "new.db", decoders=[RegistryDecoder()], batch_blocks=7)
    try:
        picked = decoded = 0
        for height, raw in enumerate(chain.blocks):
            applied = await new.apply_block(height, raw, hold=True)
            picked += applied.candidates["registry"]
            decoded += Block(raw).tx_count
        await new.commit()
        want = await dump(old, TABLES)
        assert want["registry_links"] and want["registry_publications"]
        assert await dump(new, TABLES) == want
        assert picked < decoded // 4
        # The in-memory heads after an undo: re-applying the second half gives the same rows.
        cut = len(chain.blocks) // 2
        await new.undo_to(cut - 1)
        for height in range(cut, len(chain.blocks)):
            await new.apply_block(height, chain.blocks[height], hold=True)
        await new.commit()
        assert await dump(new, TABLES) == want
    finally:
        await old.close()
        await new.close()


def test_select_picks_links_and_geneses_only() -> None:
    """Each selection rule, on a hand-built block: a genesis, a link from a tracked head, a
    link from a transaction of the same block; not a spend of output 1, nor a token output
    whose category is not a spent output 0's txid."""
    authbase = bytes([0x42]) * 32
    genesis = _tx([OutPoint(authbase, 0)], [TxOutput(1000, b"\x51", TokenData(authbase, 5))])
    child = _tx([OutPoint(genesis.txid, 0)], [TxOutput(1, b"\x51")])
    other = _tx([OutPoint(genesis.txid, 1)], [TxOutput(1, b"\x51")])
    stranger = _tx([OutPoint(bytes([7]) * 32, 0)], [TxOutput(1, b"\x51", TokenData(authbase, 1))])
    tracked = bytes([9]) * 32
    link = _tx([OutPoint(bytes([8]) * 32, 3), OutPoint(tracked, 0)], [TxOutput(1, b"\x51")])
    grandchild = _tx([OutPoint(child.txid, 0)], [TxOutput(1, b"\x51")])  # two links on
    not_a_link = _tx([OutPoint(other.txid, 0)], [TxOutput(1, b"\x51")])  # other is no link
    txs = [grandchild, genesis, child, other, stranger, link, not_a_link]
    raws = [t.to_bytes() for t in txs]
    offsets = [0]
    for r in raws:
        offsets.append(offsets[-1] + len(r))
    block = BlockBytes(b"".join(raws), offsets, [t.txid for t in txs])
    decoder = RegistryDecoder()
    assert sorted(decoder.select(block)) == [0, 1, 2]
    decoder.committed(BlockContext(1, 0, b""), [Link(bytes([5]) * 32, 1, tracked, False)], ())
    assert sorted(decoder.select(block)) == [0, 1, 2, 5]
    decoder.committed(BlockContext(2, 0, b""), [Link(bytes([5]) * 32, 2, child.txid, True)], ())
    assert sorted(decoder.select(block)) == [0, 1, 2]  # the head moved on (and burned)


def test_select_with_many_heads_and_token_bytes_without_a_genesis() -> None:
    """The block-level shortcuts of `select`: more heads than it searches for (a link from the
    last one is found by the walk), and transactions holding the token prefix byte (in an
    unlocking bytecode and a token output) that are no genesis (nothing selected)."""
    decoder = RegistryDecoder()
    heads = [bytes([i % 256, i // 256]) * 16 for i in range(100)]
    for n, head in enumerate(heads):
        decoder.committed(BlockContext(n, 0, b""), [Link(head, 1, head, False)], ())
    link = _tx([OutPoint(heads[-1], 0)], [TxOutput(1, b"\x51")])
    token = TokenData(bytes([0x33]) * 32, 1)
    noise = Transaction.build(
        [TxInput(OutPoint(bytes([0xEF]) * 32, 0), b"\xef\xef")], [TxOutput(1, b"\x51", token)]
    )
    block = _block([noise, link])
    assert sorted(decoder.select(block)) == [1]
    assert RegistryDecoder().select(_block([noise])) == []


def _block(txs: list[Transaction]) -> BlockBytes:
    raws = [t.to_bytes() for t in txs]
    offsets = [0]
    for r in raws:
        offsets.append(offsets[-1] + len(r))
    return BlockBytes(b"".join(raws), offsets, [t.txid for t in txs])


def _tx(inputs: list[OutPoint], outputs: list[TxOutput]) -> Transaction:
    return Transaction.build([TxInput(op, b"") for op in inputs], outputs)


def test_burned_identity_ends_the_chain() -> None:
    authbase = bytes([0x42]) * 32
    genesis = _tx([OutPoint(authbase, 0)], [TxOutput(1000, b"\x51", TokenData(authbase, 5))])
    ctx = RegistryContext({})
    rows = decode_registry_tx(BlockTx(0, genesis.txid, genesis), ctx)
    assert rows == [Link(authbase, 1, genesis.txid, False)]
    digest = hashlib.sha256(b"x").digest()
    bcmr = bytes.fromhex("6a0442434d52") + push_data(digest) + push_data(b"a.org")
    burn = _tx([OutPoint(genesis.txid, 0)], [TxOutput(0, bcmr)])  # output 0 is OP_RETURN
    rows = decode_registry_tx(BlockTx(1, burn.txid, burn), ctx)
    assert rows[0] == Link(authbase, 2, burn.txid, True)
    assert len(rows) == 2  # the burning link's publication still counts
    after = _tx([OutPoint(burn.txid, 0)], [TxOutput(1, b"\x51")])
    assert decode_registry_tx(BlockTx(2, after.txid, after), ctx) == []
    # A spend of a non-zero output is no link.
    other = _tx([OutPoint(genesis.txid, 1)], [TxOutput(1, b"\x51")])
    assert decode_registry_tx(BlockTx(3, other.txid, other), RegistryContext({})) == []


@pytest.mark.parametrize("encoding", ["digest", "ascii-hex"])
def test_publication_outside_an_authchain_is_ignored(encoding: str) -> None:
    digest = hashlib.sha256(b"x").digest()
    pushed = digest if encoding == "digest" else digest.hex().encode()
    bcmr = bytes.fromhex("6a0442434d52") + push_data(pushed)
    tx = _tx([OutPoint(bytes([1]) * 32, 0)], [TxOutput(0, bcmr)])
    assert decode_registry_tx(BlockTx(0, tx.txid, tx), RegistryContext({})) == []


def test_select_sees_a_genesis_behind_token_like_bytes() -> None:
    """`select` reads every 0xef as a possible prefix, overlapping ones too: an 0xef just
    before the genesis' prefix, followed 33 bytes on by a valid bitfield (a byte inside the
    category), must not hide the real prefix; neither must a genesis whose category is spent
    at index 0 by an earlier input than a decoy's."""
    authbase = bytes(range(22)) + b"\x10" + bytes(range(9))  # byte 22 reads as a bitfield
    junk = TxOutput(0, b"\x6a\x01\xef")  # its 0xef sits 10 bytes before the genesis' prefix
    genesis = _tx([OutPoint(authbase, 0)], [junk, TxOutput(1000, b"\x51", TokenData(authbase, 5))])
    raw = genesis.to_bytes()
    real = raw.index(b"\xef" + authbase)
    assert raw[real - 10] == 0xEF and raw[real - 10 + 33] == 0x10  # the decoy overlaps
    other = _tx([OutPoint(bytes([3]) * 32, 0)], [TxOutput(1, b"\x51")])
    assert RegistryDecoder().select(_block([other, genesis])) == [1]
    # …and its link in the same block, found by its own output 0 being spent.
    link = _tx([OutPoint(genesis.txid, 0)], [TxOutput(1, b"\x51")])
    assert RegistryDecoder().select(_block([link, other, genesis])) == [0, 2]
    assert RegistryDecoder().select(_block([other, link])) == []


def test_select_equals_the_walk_on_the_scenario_chain(chain: Chain) -> None:
    """The searches select what the walk over every transaction's inputs and outputs selects
    (the walk is what `select` does with many heads), block by block, heads moving on."""
    searched = RegistryDecoder(head_search_limit=1 << 30)  # never the walk
    walked = RegistryDecoder(head_search_limit=-1)  # always the walk
    most = 0
    picked = 0
    for height, raw in enumerate(chain.blocks):
        block = Block(raw)
        bb = BlockBytes(block.raw, block.offsets, block.txids)
        found = searched.select(bb)
        assert found == walked.select(bb) == walked._walk(bb, range(len(block.txids)))
        most = max(most, len(searched.heads))
        picked += len(found)
        ctx = RegistryContext(searched.heads)
        txs = [BlockTx(i, block.txids[i], block.transaction(i)) for i in found]
        rows = [r for t in decode_order(txs) for r in decode_registry_tx(t, ctx)]
        for d in (searched, walked):
            d.committed(BlockContext(height, 0, b""), rows, ())
    assert picked > 0
    assert most > 1  # (several heads tracked at once: the searches had several to find)
