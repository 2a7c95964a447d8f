"""Block headers, merkle trees and fast block parsing, against real Bitcoin data, the libauth
token-transaction vectors, an independent merkle implementation, and property tests."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.block import (
    HEADER_SIZE,
    Block,
    BlockHeader,
    bits_to_target,
    build_header,
    merkle_branch,
    merkle_root,
    merkle_root_from_branch,
    output0_spends_and_categories,
    parse_block,
    scan_transaction,
    serialize_block,
)
from bch.encoding import DecodeError, compact_size
from bch.script import p2pkh_locking, push_data, push_int
from bch.token import NFT, Capability, TokenData
from bch.tx import MAX_SATS, OutPoint, Transaction, TxInput, TxOutput, parse_transaction
from tests.bch.test_tx import transactions
from tests.conftest import load_vectors

CASHTOKENS = "vmb/bch_2025_standard.core.cashtokens.vmb_tests.json"

# Public knowledge: the Bitcoin genesis block (header and its only transaction).
GENESIS_HEADER = (
    "0100000000000000000000000000000000000000000000000000000000000000000000003ba3edfd7a7b12b27a"
    "c72c3e67768f617fc81bc3888a51323a9fb8aa4b1e5e4a29ab5f49ffff001d1dac2b7c"
)
GENESIS_COINBASE = (
    "01000000010000000000000000000000000000000000000000000000000000000000000000ffffffff4d04ff"
    "ff001d0104455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e2062"
    "72696e6b206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a0100"
    "0000434104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef"
    "38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000"
)
GENESIS_HASH = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"
GENESIS_MERKLE = "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b"

# Bitcoin block 100000: its four txids and merkle root (display order), a classic worked example.
BLOCK_100000_TXIDS = (
    "8c14f0db3df150123e6f3dbbf30f8b955a8249b62ac1d1ff16284aefa3d06d87",
    "fff2525b8931402dd09222c50775608f75787bd2b87e56995a7bdd30f79702c4",
    "6359f0868171b1d194cbee1af2f16ea598ae8fad666d9b012c8ed2b79a236ec4",
    "e9a66845e05d5abc0ad04ec80f774a7e585c6e8db975962d069a522137b80c1d",
)
BLOCK_100000_MERKLE = "f3e94742aca4b5ef85488dc37c06c3282295ffec960994b2c0d5ac2a25a95766"

REGTEST_BITS = 0x207FFFFF
PREV = bytes(range(32))
NULL_OUTPOINT = OutPoint(bytes(32), 0xFFFFFFFF)


def _display(h: bytes) -> str:
    return h[::-1].hex()


def _dsha(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


@cache
def _vmb_transactions() -> tuple[Transaction, ...]:
    """Distinct real token transactions from the libauth vectors."""
    seen: dict[str, Transaction] = {}
    for vector in load_vectors(CASHTOKENS):
        seen.setdefault(vector[4], Transaction.from_hex(vector[4]))
    return tuple(seen.values())


def _coinbase(height: int, tag: bytes = b"ladle test") -> Transaction:
    unlocking = push_int(height) + push_data(tag)
    return Transaction.build(
        [TxInput(NULL_OUTPOINT, unlocking)],
        [TxOutput(50 * 100_000_000, p2pkh_locking(bytes(20)))],
        version=1,
    )


def _naive_merkle(leaves: list[bytes]) -> bytes:
    """Independent reference: pair up, duplicating the odd one out, until one hash is left."""
    nodes = list(leaves)
    while len(nodes) != 1:
        if len(nodes) % 2 == 1:
            nodes = [*nodes, nodes[-1]]
        nodes = [_dsha(left + right) for left, right in zip(nodes[0::2], nodes[1::2], strict=True)]
    return nodes[0]


def _build(txs: list[Transaction], nonce: int = 0) -> bytes:
    return Block.build(txs, prev_hash=PREV, time=1_700_000_000, bits=REGTEST_BITS, nonce=nonce)


@cache
def _sample_block() -> tuple[bytes, tuple[Transaction, ...]]:
    txs = (_coinbase(1), *_vmb_transactions()[:60])
    return _build(list(txs)), txs


# --- headers ---------------------------------------------------------------------------------


def test_genesis_header_hash_and_fields() -> None:
    raw = bytes.fromhex(GENESIS_HEADER)
    header = BlockHeader.from_bytes(raw)
    assert header.hash_hex == GENESIS_HASH
    assert header.hash == bytes.fromhex(GENESIS_HASH)[::-1]
    assert header.version == 1
    assert header.prev_hash == bytes(32)
    assert header.prev_hash_hex == "00" * 32
    assert header.merkle_root_hex == GENESIS_MERKLE
    assert header.time == 1231006505  # 2009-01-03 18:15:05 UTC
    assert header.bits == 0x1D00FFFF
    assert header.nonce == 2083236893
    assert header.encode() == raw
    assert BlockHeader.from_hex(GENESIS_HEADER) == header


def test_genesis_proof_of_work() -> None:
    header = BlockHeader.from_hex(GENESIS_HEADER)
    assert header.target == 0xFFFF << 208  # difficulty 1
    assert header.check_proof_of_work()
    # Any other nonce misses a 2^-32 target (this one is fixed, so the test is deterministic).
    assert not dataclasses.replace(header, nonce=header.nonce + 1).check_proof_of_work()


def test_bits_to_target() -> None:
    assert bits_to_target(0x1D00FFFF) == 0xFFFF << 208
    assert bits_to_target(REGTEST_BITS) == 0x7FFFFF << 232
    assert bits_to_target(0x03123456) == 0x123456
    assert bits_to_target(0x02123456) == 0x1234  # exponent below 3 shifts right
    assert bits_to_target(0x01800000) == 0  # sign bit with a zero mantissa is just zero
    with pytest.raises(ValueError, match="negative"):
        bits_to_target(0x04923456)
    with pytest.raises(ValueError, match="overflows"):
        bits_to_target(0x23123456)
    header = dataclasses.replace(BlockHeader.from_hex(GENESIS_HEADER), bits=0x04923456)
    assert not header.check_proof_of_work()


def test_header_rejects_bad_sizes_and_ranges() -> None:
    with pytest.raises(DecodeError, match="80 bytes"):
        BlockHeader.from_bytes(bytes.fromhex(GENESIS_HEADER)[:79])
    with pytest.raises(DecodeError, match="80 bytes"):
        BlockHeader.from_bytes(bytes.fromhex(GENESIS_HEADER) + b"\x00")
    with pytest.raises(DecodeError, match="hexadecimal"):
        BlockHeader.from_hex("zz")
    with pytest.raises(ValueError, match="32 bytes"):
        BlockHeader(1, bytes(31), bytes(32), 0, 0, 0)
    with pytest.raises(ValueError, match="nonce"):
        BlockHeader(1, bytes(32), bytes(32), 0, 0, 1 << 32)
    with pytest.raises(ValueError, match="version"):
        BlockHeader(1 << 31, bytes(32), bytes(32), 0, 0, 0)
    negative = BlockHeader(-1, bytes(32), bytes(32), 0, 0, 0)  # int32: negative is encodable
    assert BlockHeader.from_bytes(negative.encode()) == negative


# --- merkle ----------------------------------------------------------------------------------


def test_block_100000_merkle_root() -> None:
    txids = [bytes.fromhex(t)[::-1] for t in BLOCK_100000_TXIDS]
    assert _display(merkle_root(txids)) == BLOCK_100000_MERKLE
    for i, txid in enumerate(txids):
        branch = merkle_branch(txids, i)
        assert len(branch) == 2
        assert _display(merkle_root_from_branch(txid, branch, i)) == BLOCK_100000_MERKLE


def test_merkle_root_of_one_is_the_txid() -> None:
    txid = bytes.fromhex(GENESIS_MERKLE)[::-1]
    assert merkle_root([txid]) == txid
    assert merkle_branch([txid], 0) == []


@pytest.mark.parametrize("count", [*range(1, 18), 31, 32, 33, 100])
def test_merkle_matches_naive_and_branches_verify(count: int) -> None:
    txids = [_dsha(i.to_bytes(4, "little")) for i in range(count)]
    root = merkle_root(txids)
    assert root == _naive_merkle(txids)
    for i in range(count):
        branch = merkle_branch(txids, i)
        assert merkle_root_from_branch(txids[i], branch, i) == root
        if branch and branch[0] != txids[i]:  # the wrong side must not verify
            assert merkle_root_from_branch(txids[i], branch, i ^ 1) != root
        if branch:
            assert merkle_root_from_branch(_dsha(b"other"), branch, i) != root


def test_odd_level_duplicates_last_hash() -> None:
    a, b, c = (_dsha(bytes([i])) for i in range(3))
    assert merkle_root([a, b, c]) == _dsha(_dsha(a + b) + _dsha(c + c))
    assert merkle_root([a, b, c]) == merkle_root([a, b, c, c])  # the known CVE-2012-2459 shape


@given(st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=70))
def test_merkle_property(txids: list[bytes]) -> None:
    assert merkle_root(txids) == _naive_merkle(txids)


def test_merkle_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one"):
        merkle_root([])
    with pytest.raises(ValueError, match="32 bytes"):
        merkle_root([bytes(31)])
    with pytest.raises(IndexError):
        merkle_branch([bytes(32)], 1)


# --- whole blocks ----------------------------------------------------------------------------


def test_genesis_block_parses() -> None:
    raw = bytes.fromhex(GENESIS_HEADER) + b"\x01" + bytes.fromhex(GENESIS_COINBASE)
    block = Block.from_bytes(raw)
    assert block.hash_hex == GENESIS_HASH
    assert len(block) == block.tx_count == 1
    assert block.size == 285
    assert [_display(t) for t in block.txids] == [GENESIS_MERKLE]
    assert block.has_valid_merkle_root()
    coinbase = block.transaction(0)
    assert coinbase.outputs[0].value == 50 * 100_000_000
    assert b"The Times 03/Jan/2009" in coinbase.inputs[0].unlocking
    assert coinbase.txid_hex == GENESIS_MERKLE
    assert Block.from_hex(raw.hex()).txids == block.txids
    assert serialize_block(block.header, [coinbase]) == raw


def test_build_and_parse_real_transactions() -> None:
    raw, txs = _sample_block()
    block = parse_block(raw)
    assert len(block) == len(txs) == 61
    assert block.header.prev_hash == PREV
    assert block.header.time == 1_700_000_000
    assert block.header.bits == REGTEST_BITS
    assert block.header.nonce == 0
    assert block.header.version == 0x20000000
    assert list(block.txids) == [t.txid for t in txs]
    assert block.header.merkle_root == merkle_root(block.txids) == _naive_merkle(list(block.txids))
    assert block.has_valid_merkle_root()
    assert block.hash == block.header.hash == _dsha(raw[:HEADER_SIZE])
    for i, tx in enumerate(txs):
        assert block.tx_raw(i) == tx.to_bytes()
        decoded = block.transaction(i)
        assert decoded == tx
        assert decoded.txid == block.txids[i]
    assert list(block.iter_transactions()) == list(txs)
    assert block.transaction(-1) == txs[-1]
    start, end = block.tx_span(1)
    assert raw[start:end] == txs[1].to_bytes()
    with pytest.raises(IndexError):
        block.transaction(len(txs))
    with pytest.raises(IndexError):
        block.tx_raw(-len(txs) - 1)
    header = build_header(txs, prev_hash=PREV, time=1_700_000_000, bits=REGTEST_BITS)
    assert serialize_block(header, txs) == raw
    assert serialize_block(header, [t.to_bytes() for t in txs]) == raw
    assert "61 txs" in repr(block)


def test_merkle_mismatch_is_detected_not_rejected() -> None:
    raw, txs = _sample_block()
    wrong = dataclasses.replace(Block(raw).header, merkle_root=bytes(32))
    block = Block(serialize_block(wrong, txs))
    assert not block.has_valid_merkle_root()
    assert list(block.txids) == [t.txid for t in txs]


def test_contains_and_find_transactions() -> None:
    raw, txs = _sample_block()
    block = Block(raw)
    tx_bytes = [t.to_bytes() for t in txs]
    category = next(o.token.category for t in txs[1:] for o in t.outputs if o.token is not None)
    patterns = [
        category,
        p2pkh_locking(bytes(20)),  # only the coinbase pays to it
        b"ladle test",
        tx_bytes[5][-3:] + tx_bytes[6][:3],  # straddles a boundary
        block.header.encode()[:8],  # only in the header
        b"\x00" * 200,
    ]
    for pattern in patterns:
        expected = [i for i, b in enumerate(tx_bytes) if pattern in b]
        assert block.find_transactions(pattern) == expected
        assert [i for i in range(len(block)) if block.contains(pattern, i)] == expected
    assert block.find_transactions(b"ladle test") == [0]
    assert block.find_transactions(block.header.encode()[:8]) == []
    assert block.find_transactions(b"") == list(range(len(txs)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_find_transactions_property(data: st.DataObject) -> None:
    raw, txs = _sample_block()
    block = Block(raw)
    start = data.draw(st.integers(HEADER_SIZE, len(raw) - 1))
    width = data.draw(st.integers(1, 12))
    pattern = raw[start : start + width]
    expected = [i for i, t in enumerate(txs) if pattern in t.to_bytes()]
    assert block.find_transactions(pattern) == expected


# --- malformed blocks ------------------------------------------------------------------------


@cache
def _small_block() -> bytes:
    return _build([_coinbase(7), *_vmb_transactions()[:2]])


def test_every_truncation_is_a_decode_error() -> None:
    raw = _small_block()
    Block(raw)
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            Block(raw[:cut])


def test_trailing_bytes_rejected() -> None:
    with pytest.raises(DecodeError, match="1 trailing bytes after its 3 transactions"):
        Block(_small_block() + b"\x00")


def test_count_mismatch_rejected() -> None:
    raw = _small_block()
    assert raw[HEADER_SIZE] == 3
    too_many = raw[:HEADER_SIZE] + b"\x04" + raw[HEADER_SIZE + 1 :]
    with pytest.raises(DecodeError, match="transaction 3 of 4"):
        Block(too_many)
    too_few = raw[:HEADER_SIZE] + b"\x02" + raw[HEADER_SIZE + 1 :]
    with pytest.raises(DecodeError, match="trailing bytes after its 2 transactions"):
        Block(too_few)
    huge = raw[:HEADER_SIZE] + compact_size(10**6) + raw[HEADER_SIZE + 1 :]
    with pytest.raises(DecodeError, match="claims 1000000 transactions"):
        Block(huge)
    empty = raw[:HEADER_SIZE] + b"\x00"
    with pytest.raises(DecodeError, match="no transactions"):
        Block(empty)
    non_minimal = raw[:HEADER_SIZE] + b"\xfd\x03\x00" + raw[HEADER_SIZE + 1 :]
    with pytest.raises(DecodeError, match="minimal"):
        Block(non_minimal)
    with pytest.raises(DecodeError, match="hexadecimal"):
        Block.from_hex("0g")


def test_bad_token_prefix_is_found_on_decode_only() -> None:
    """Scanning checks framing; content errors surface when that transaction is decoded."""
    good = _coinbase(3)
    bad = bytearray(good.to_bytes())
    script_at = len(bad) - 4 - 25  # the coinbase output's 25-byte locking bytecode
    bad[script_at] = 0xEF  # now it claims a token prefix that is far too short
    raw = serialize_block(
        build_header([good], prev_hash=PREV, time=0, bits=REGTEST_BITS), [bytes(bad), good]
    )
    block = Block(raw)
    assert len(block) == 2
    assert block.transaction(1) == good
    with pytest.raises(DecodeError, match="token prefix"):
        block.transaction(0)


# --- scanning --------------------------------------------------------------------------------


def test_scan_matches_parse_on_real_transactions() -> None:
    for tx in _vmb_transactions():
        raw = tx.to_bytes()
        assert scan_transaction(raw) == len(raw)
        padded = b"\xaa" * 7 + raw + b"\xbb" * 3
        assert scan_transaction(padded, 7) == 7 + len(raw)


def test_scan_wide_counts_and_lengths() -> None:
    """CompactSize prefixes fd (counts ≥ 253) and fe (a 70,000-byte script) on both paths."""
    inputs = [TxInput(OutPoint(_dsha(bytes([i % 256, i // 256])), i), b"\x51") for i in range(300)]
    outputs = [TxOutput(1000 + i, p2pkh_locking(bytes(20))) for i in range(260)]
    outputs.append(TxOutput(0, b"\x6a" + push_data(bytes(70_000))))
    tx = Transaction.build(inputs, outputs)
    raw = tx.to_bytes()
    assert scan_transaction(raw) == len(raw)
    block = Block(_build([_coinbase(9), tx]))
    assert block.transaction(1) == tx
    non_minimal = raw[:4] + b"\xfe" + (300).to_bytes(4, "little") + raw[7:]
    with pytest.raises(DecodeError, match="minimal"):
        scan_transaction(non_minimal)
    with pytest.raises(DecodeError):
        parse_transaction(non_minimal)


@st.composite
def _transactions(draw: st.DrawFn) -> Transaction:
    scripts = st.binary(max_size=40)
    inputs = draw(
        st.lists(
            st.builds(
                TxInput,
                st.builds(OutPoint, st.binary(min_size=32, max_size=32), st.integers(0, 2**32 - 1)),
                scripts,
                st.integers(0, 2**32 - 1),
            ),
            max_size=4,
        )
    )
    nft = st.builds(NFT, st.sampled_from(Capability), st.binary(max_size=40))
    categories = st.binary(min_size=32, max_size=32)
    token = st.one_of(
        st.none(),
        st.builds(TokenData, categories, st.integers(1, 2**63 - 1), nft | st.none()),
        st.builds(TokenData, categories, st.just(0), nft),
    )
    outputs = draw(
        st.lists(
            st.builds(
                TxOutput,
                st.integers(0, MAX_SATS),
                scripts.filter(lambda s: s[:1] != b"\xef"),
                token,
            ),
            max_size=4,
        )
    )
    version = draw(st.integers(-(2**31), 2**31 - 1))
    return Transaction.build(inputs, outputs, version=version, locktime=draw(st.integers(0, 99)))


@settings(max_examples=80, deadline=None)
@given(st.lists(_transactions(), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_parse_serialize_identity(txs: list[Transaction], nonce: int) -> None:
    raw = _build(txs, nonce)
    block = Block(raw)
    assert block.header.nonce == nonce
    assert list(block.txids) == [_dsha(t.to_bytes()) for t in txs]
    assert list(block.iter_transactions()) == txs
    assert block.has_valid_merkle_root()
    assert serialize_block(block.header, list(block.iter_transactions())) == raw


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_scan_agrees_with_parse_on_damaged_bytes(data: st.DataObject) -> None:
    """Whenever the full decoder accepts bytes, the scanner finds the same end; whenever the
    scanner rejects them, so does the decoder."""
    txs = _vmb_transactions()
    raw = bytearray(txs[data.draw(st.integers(0, len(txs) - 1))].to_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    buf = bytes(raw[:cut]) if data.draw(st.booleans()) else bytes(raw)
    try:
        _, parsed_end = parse_transaction(buf, 0)
    except DecodeError:
        parsed_end = None
    try:
        scanned_end = scan_transaction(buf, 0)
    except DecodeError:
        scanned_end = None
    if parsed_end is not None:
        assert scanned_end == parsed_end
    if scanned_end is None:
        assert parsed_end is None


@given(st.binary(max_size=200))
def test_random_bytes_only_raise_decode_error(buf: bytes) -> None:
    for parse in (Block, lambda b: scan_transaction(b, 0)):
        with contextlib.suppress(DecodeError):
            parse(buf)


# --- output0_spends_and_categories (the registry's prefilter walk) --------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(transactions(), min_size=1, max_size=2))
def test_output0_spends_and_categories_match_the_decoded_transaction(
    drawn: list[Transaction],
) -> None:
    txs = [tx.replace(outputs=tx.outputs[:50]) for tx in drawn]
    raw = b"".join(t.to_bytes() for t in txs)
    pos = 0
    for tx in txs:
        zeros, categories = output0_spends_and_categories(raw, pos)
        assert zeros == [i.outpoint.txid for i in tx.inputs if i.outpoint.index == 0]
        # (Outputs are read only where some output 0 is spent: else no link, no genesis.)
        tokens = [o.token.category for o in tx.outputs if o.token is not None] if zeros else []
        assert categories == tokens
        pos += len(tx.to_bytes())
