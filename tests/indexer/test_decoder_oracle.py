"""The oracle decoder against the devnet's small scenario: every Delphi update and every signed
GP message the ledger records is a row, with its block; forged and unknown-key messages are
recorded as such and never as prices; undo is exact."""

from __future__ import annotations

import asyncio
import sqlite3
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bch.keys import PrivateKey
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from devnet.scenario.generator import ScenarioGenerator
from devnet.service import Devnet
from indexer.decoders.oracle import FeedUpdate, OracleDecoder, SignedMessage, decode_oracle_tx
from indexer.decoders.oracle.schema import MIGRATIONS
from indexer.store import Store
from indexer.store.decoder import AnyDecoder, BlockTx
from indexer.store.queries_oracle import feed_closest, feed_history, latest_price
from indexer.store.schema import CORE_MIGRATIONS, migrate
from protocols.ledger import Ledger
from protocols.oracle import FeedConfig, FeedTable, GpMessage, gp_publication
from tests.devnet.test_scenario import SMALL, devnet_config


@dataclass(frozen=True)
class Chain:
    ledger: Ledger
    blocks: list[bytes]  # raw blocks, height 0 … tip
    documents: dict[str, bytes]


_CACHE: dict[str, Chain] = {}


def small_chain(http_base: str | None = None) -> Chain:
    """The small preset's chain (generated once per process and base URL)."""
    key = http_base or ""
    if key not in _CACHE:

        async def run() -> Chain:
            net = Devnet(devnet_config())
            await net.start()
            try:
                params = SMALL if http_base is None else SMALL.replace(http_base=http_base)
                result = await ScenarioGenerator(net, params).run()
                raws = [b.raw for b in net.nodes[0].chain.blocks]
                return Chain(result.ledger, raws, result.documents)
            finally:
                await net.stop()

        _CACHE[key] = asyncio.run(run())
    return _CACHE[key]


async def index(path: Path | str, decoders: Sequence[AnyDecoder], blocks: Sequence[bytes]) -> Store:
    store = await Store.open(path, decoders=decoders)
    for height, raw in enumerate(blocks):
        await store.apply_block(height, raw)
    return store


async def dump(store: Store, tables: Sequence[str]) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for t in tables:
        rows = await store.conn.execute_fetchall(f"SELECT * FROM {t} ORDER BY 1, 2")
        out[t] = [tuple(r) for r in rows]
    return out


def feeds_for(ledger: Ledger) -> FeedTable:
    return FeedTable(
        [
            FeedConfig(
                ledger.oracle.category, "delphi", pubkeys=(bytes.fromhex(ledger.oracle.pubkey),)
            )
        ]
    )


@pytest.fixture(scope="module")
def chain() -> Chain:
    return small_chain()


async def test_updates_and_messages_equal_the_ledger(chain: Chain) -> None:
    ledger = chain.ledger
    store = await index(":memory:", [OracleDecoder(feeds_for(ledger))], chain.blocks)
    try:
        rows = await store.conn.execute_fetchall(
            "SELECT u.txid, u.height, u.time, u.oracle_time, u.price, u.sequence, u.use_fee, "
            "u.commitment, u.category, u.layout, b.hash FROM oracle_updates AS u "
            "JOIN blocks AS b ON b.height = u.height ORDER BY u.height, u.sequence"
        )
        got = [
            (bytes(r[0]).hex(), r[1], r[2], r[3], r[4], r[5], r[6], bytes(r[7]).hex()) for r in rows
        ]
        want = [
            (u.txid, u.height, u.time, u.timestamp, u.price, u.sequence, u.use_fee, u.commitment)
            for u in ledger.oracle_updates
        ]
        assert got == want and len(want) >= 10
        assert {bytes(r[8]).hex() for r in rows} == {ledger.oracle.category}
        assert {r[9] for r in rows} == {"delphi"}
        msgs = await store.conn.execute_fetchall(
            "SELECT txid, height, message, signature, pubkey, status, msg_time, "
            "message_sequence, data_sequence, value, price FROM oracle_messages "
            "ORDER BY height, message_sequence"
        )
        got_m = [
            (
                *(bytes(r[0]).hex(), r[1], bytes(r[2]).hex(), bytes(r[3]).hex()),
                *(bytes(r[4]).hex(), r[5], r[6], r[7], r[8], r[9], r[10]),
            )
            for r in msgs
        ]
        want_m = [
            (
                *(m.txid, m.height, m.message, m.signature, m.pubkey, "valid", m.timestamp),
                *(m.message_sequence, m.data_sequence, m.price),
                None if m.data_sequence < 0 else m.price,
            )
            for m in ledger.messages
        ]
        assert got_m == want_m
        assert any(m.data_sequence == -6 for m in ledger.messages)  # the metadata message

        # The reads: the latest price is the highest sequence; closest and history by time.
        cat = ledger.oracle.category
        last = max(ledger.oracle_updates, key=lambda u: u.sequence)
        top = await latest_price(store.conn, cat)
        assert top is not None and (top.price, top.txid) == (last.price, last.txid)
        hashes = {h: bytes(r[10]).hex() for h, r in ((r[1], r) for r in rows)}
        mid = ledger.oracle_updates[len(ledger.oracle_updates) // 2]
        near = await feed_closest(store.conn, cat, mid.timestamp + 1)
        assert near is not None and near.txid == mid.txid and near.blockhash == hashes[mid.height]
        assert await feed_closest(store.conn, "ab" * 32, mid.timestamp) is None
        start = ledger.oracle_updates[0].timestamp
        hist = await feed_history(store.conn, cat, start)
        assert [p.txid for p in hist] == [u.txid for u in ledger.oracle_updates]
        step = 6 * 3600
        stepped = await feed_history(store.conn, cat, start, None, step)
        expect: dict[int, str] = {}
        for u in ledger.oracle_updates:
            expect[(u.timestamp - start) // step] = u.txid  # the last update of each interval
        assert [p.txid for p in stepped] == [expect[k] for k in sorted(expect)]
    finally:
        await store.close()


async def test_undo_is_exact(chain: Chain, tmp_path: Path) -> None:
    ledger = chain.ledger
    tables = ("oracle_updates", "oracle_messages")
    full = await index(tmp_path / "a.db", [OracleDecoder(feeds_for(ledger))], chain.blocks)
    cut = len(chain.blocks) // 2
    part = await index(tmp_path / "b.db", [OracleDecoder(feeds_for(ledger))], chain.blocks[:cut])
    try:
        await full.undo_to(cut - 1)
        assert await dump(full, tables) == await dump(part, tables)
        assert (await dump(part, tables))["oracle_updates"]
    finally:
        await full.close()
        await part.close()


async def test_unconfigured_feed_is_not_guessed(chain: Chain) -> None:
    other = FeedTable([FeedConfig("ab" * 32, "delphi")])
    store = await index(":memory:", [OracleDecoder(other)], chain.blocks)
    try:
        rows = await store.conn.execute_fetchall("SELECT count(*) FROM oracle_updates")
        assert list(rows) == [(0,)]
        statuses = await store.conn.execute_fetchall("SELECT DISTINCT status FROM oracle_messages")
        assert [r[0] for r in statuses] == ["unknown_key"]  # the signer is not configured
        prices = await store.conn.execute_fetchall(
            "SELECT count(*) FROM oracle_messages WHERE price IS NOT NULL"
        )
        assert list(prices) == [(0,)]
    finally:
        await store.close()


def test_forged_message_is_recorded_as_invalid() -> None:
    key = PrivateKey.from_int(0xFEED)
    feeds = FeedTable([FeedConfig("ab" * 32, "delphi", pubkeys=(key.public_key,))])
    good = gp_publication(GpMessage(1_700_000_000, 5, 3, 47622), key)
    forged = bytearray(good)
    forged[3 + 12] ^= 1  # flip a bit of the price inside the message push
    tx = Transaction.build(
        [TxInput(OutPoint(bytes(32), 0), b"")],
        [TxOutput(0, good), TxOutput(0, bytes(forged))],
    )
    rows = decode_oracle_tx(BlockTx(0, tx.txid, tx), feeds, 0)
    msgs = [r for r in rows if isinstance(r, SignedMessage)]
    assert [m.checked.status for m in msgs] == ["valid", "invalid_signature"]
    assert [m.checked.price for m in msgs] == [47622, None]


def test_rate_layout_is_decoded_only_for_its_configured_category() -> None:
    """The 10-byte interest-rate commitment (ts u48 ‖ use_fee u16 ‖ bp u16): the bp value is
    the row's value and its timestamp its sequence; the same bytes under a delphi feed, or a
    commitment of another size under the rate feed, are no rows."""
    rate_cat, delphi_cat = "cd" * 32, "ab" * 32
    feeds = FeedTable([FeedConfig(rate_cat, "rate"), FeedConfig(delphi_cat, "delphi")])
    raw = (1_700_000_123).to_bytes(6, "little") + struct.pack("<HH", 700, 425)

    def oracle_nft(category: str, commitment: bytes) -> TxOutput:
        nft = NFT(Capability.MUTABLE, commitment)
        return TxOutput(1_000, b"\x51", TokenData(bytes.fromhex(category)[::-1], 0, nft))

    outputs = [
        oracle_nft(rate_cat, raw),
        oracle_nft(delphi_cat, raw),
        oracle_nft(rate_cat, raw + b"0"),
    ]
    tx = Transaction.build([TxInput(OutPoint(bytes(32), 0), b"")], outputs)
    rows = decode_oracle_tx(BlockTx(0, tx.txid, tx), feeds, 5)
    assert len(rows) == 1
    (row,) = rows
    assert isinstance(row, FeedUpdate)
    assert (row.vout, row.layout, row.oracle_time, row.sequence, row.price, row.use_fee) == (
        0, "rate", 1_700_000_123, 1_700_000_123, 425, 700,
    )  # fmt: skip


async def test_migration_2_keeps_the_rows_and_admits_the_rate_layout(tmp_path: Path) -> None:
    """An index created before the rate layout existed (oracle schema 1, with an update row)
    is migrated in place: the row survives, and a rate row can be written."""
    db = tmp_path / "old.db"
    conn = await aiosqlite.connect(db, isolation_level=None)
    try:
        await migrate(conn, [*CORE_MIGRATIONS, *MIGRATIONS[:1]])
        await conn.execute(
            "INSERT INTO blocks VALUES (0, ?, ?, 100, 100, 1, ?)", (b"h", b"p", bytes(80))
        )
        old = (b"t" * 32, 0, b"c" * 32, "delphi", 0, 100, 0, 99, 7, 47622, 1000, bytes(16))
        await conn.execute("INSERT INTO oracle_updates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", old)
        with pytest.raises(sqlite3.IntegrityError):
            await conn.execute(
                "INSERT INTO oracle_updates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (b"u" * 32, 0, b"r" * 32, "rate", 0, 100, 0, 99, 99, 300, 500, bytes(10)),
            )
        applied = await migrate(conn, [*CORE_MIGRATIONS, *MIGRATIONS])
        assert [(m.component, m.version) for m in applied] == [("oracle", 2)]
        rows = await conn.execute_fetchall("SELECT * FROM oracle_updates")
        assert [tuple(r) for r in rows] == [old]
        await conn.execute(
            "INSERT INTO oracle_updates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (b"u" * 32, 0, b"r" * 32, "rate", 0, 100, 0, 99, 99, 300, 500, bytes(10)),
        )
        indexes = await conn.execute_fetchall(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'oracle_updates' "
            "AND name NOT LIKE 'sqlite_%'"
        )
        assert sorted(r[0] for r in indexes) == [
            "oracle_updates_feed_sequence",
            "oracle_updates_feed_time",
            "oracle_updates_height",
            "oracle_updates_layout_time",
        ]
    finally:
        await conn.close()
