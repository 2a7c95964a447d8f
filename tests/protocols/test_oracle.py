"""Oracle layouts against the reference's worked examples, signatures, and the feed table."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.hashes import sha256
from bch.keys import PrivateKey
from bch.script import push_data
from protocols.oracle import (
    GP_HEAD,
    MAINNET_DELPHI_CATEGORY,
    PRODUCTION_BCH_USD_PUBKEY,
    DelphiCommitment,
    FeedConfig,
    FeedTable,
    GpMessage,
    LegacyCommitment,
    Price9Commitment,
    check_message,
    decode_feed,
    gp_publication,
    mainnet_feeds,
    parse_gp_publication,
    verify_message,
)

KEY = PrivateKey.from_int(0xA11CE)
OTHER = PrivateKey.from_int(0xB0B)


def test_gp_message_worked_example() -> None:
    m = GpMessage(timestamp=1700000000, message_sequence=123456, data_sequence=12345, price=47622)
    assert m.encode().hex() == "00f1536540e201003930000006ba0000"
    assert GpMessage.decode(bytes.fromhex("00f1536540e201003930000006ba0000")) == m
    assert not m.is_metadata
    assert GpMessage(1700000000, 1, -6, 100).is_metadata


def test_delphi_worked_example() -> None:
    c = DelphiCommitment(timestamp=1700000000, use_fee=1000, sequence=12345, price=47622)
    assert c.encode().hex() == "00f153650000e8033930000006ba0000"
    assert DelphiCommitment.decode(c.encode()) == c
    with pytest.raises(ValueError):
        DelphiCommitment.decode(bytes(15))
    with pytest.raises(ValueError):
        DelphiCommitment(1 << 48, 0, 0, 0).encode()


def test_price9_layout() -> None:
    raw = bytes.fromhex("00") + struct.pack("<II", 7, 47622)
    assert Price9Commitment.decode(raw) == Price9Commitment(7, 47622)
    assert Price9Commitment(7, 47622).encode() == raw
    with pytest.raises(ValueError):
        Price9Commitment.decode(b"\x01" + raw[1:])  # the first byte must be 00
    with pytest.raises(ValueError):
        Price9Commitment.decode(raw[:-1])


def test_legacy_layout_is_pkh_then_message() -> None:
    pkh = bytes(range(20))
    m = GpMessage(1700000000, 123456, 12345, 47622)
    raw = pkh + bytes.fromhex("00f1536540e201003930000006ba0000")
    assert LegacyCommitment.decode(raw) == LegacyCommitment(pkh, m)
    assert LegacyCommitment(pkh, m).encode() == raw


def test_decode_feed_by_layout() -> None:
    delphi = decode_feed("delphi", bytes.fromhex("00f153650000e8033930000006ba0000"), 5)
    assert (delphi.time, delphi.sequence, delphi.price, delphi.use_fee) == (
        1700000000,
        12345,
        47622,
        1000,
    )
    p9 = decode_feed("price9", b"\x00" + struct.pack("<II", 3, 50000), 1_700_000_123)
    assert (p9.time, p9.sequence, p9.price) == (1_700_000_123, 3, 50000)  # block time
    pkh = bytes(20)
    legacy = decode_feed("legacy36", pkh + GpMessage(10, 2, 9, 300).encode(), 99)
    assert (legacy.time, legacy.sequence, legacy.price, legacy.oracle_pkh) == (10, 9, 300, pkh)
    meta = decode_feed("legacy36", pkh + GpMessage(10, 2, -6, 100).encode(), 99)
    assert meta.price is None  # metadata is never a price
    with pytest.raises(ValueError):
        decode_feed("delphi", bytes(9), 0)  # the table decides the layout, not the length


def test_signature_checked_against_configured_key() -> None:
    m = GpMessage(1700000000, 1, 1, 47622)
    sig = m.sign(KEY)
    assert verify_message(m.encode(), sig, KEY.public_key)
    ok = check_message(m, sig, KEY.public_key, [KEY.public_key])
    assert ok.status == "valid" and ok.price == 47622
    forged = check_message(
        GpMessage(1700000000, 1, 1, 99999), sig, KEY.public_key, [KEY.public_key]
    )
    assert forged.status == "invalid_signature" and forged.price is None
    stranger = check_message(m, m.sign(OTHER), OTHER.public_key, [KEY.public_key])
    assert stranger.status == "unknown_key" and stranger.price is None
    wrong_signer = check_message(m, m.sign(OTHER), KEY.public_key, [KEY.public_key])
    assert wrong_signer.status == "invalid_signature"
    meta = GpMessage(1, 2, -6, 100)
    assert check_message(meta, meta.sign(KEY), KEY.public_key, [KEY.public_key]).price is None


def test_signature_is_schnorr_over_sha256_of_the_message() -> None:
    m = GpMessage(1700000000, 123456, 12345, 47622)
    assert m.sign(KEY) == KEY.sign_schnorr(
        sha256(bytes.fromhex("00f1536540e201003930000006ba0000"))
    )


def test_gppm_publication_round_trip_and_rejects() -> None:
    m = GpMessage(1700000000, 7, -6, 100)
    locking = gp_publication(m, KEY)
    assert locking.startswith(bytes.fromhex("6a044750504d"))
    assert locking == (
        GP_HEAD + push_data(m.encode()) + push_data(m.sign(KEY)) + push_data(KEY.public_key)
    )
    assert parse_gp_publication(locking) == (m, m.sign(KEY), KEY.public_key)
    assert parse_gp_publication(locking[:-1]) is None
    assert parse_gp_publication(b"\x6a\x04BCMR") is None
    assert parse_gp_publication(GP_HEAD + push_data(bytes(15))) is None


def test_feed_table_keyed_by_category() -> None:
    table = mainnet_feeds()
    wire = bytes.fromhex(MAINNET_DELPHI_CATEGORY)[::-1]
    feed = table.get(wire)
    assert feed is not None and feed.layout == "delphi"
    assert table.get(bytes.fromhex(MAINNET_DELPHI_CATEGORY)) is None  # display order is not wire
    custom = FeedTable.from_json(
        [
            {
                "category": "11" * 32,
                "layout": "legacy36",
                "pubkeys": [PRODUCTION_BCH_USD_PUBKEY.hex()],
            }
        ]
    )
    assert custom.trusted_keys == (PRODUCTION_BCH_USD_PUBKEY,)
    with pytest.raises(ValueError):
        FeedTable.from_json([{"category": "11" * 32, "layout": "guess"}])
    with pytest.raises(ValueError):
        FeedConfig("11" * 31, "delphi")
    with pytest.raises(ValueError):
        FeedTable([FeedConfig("22" * 32, "delphi"), FeedConfig("22" * 32, "price9")])


@given(
    st.integers(0, (1 << 48) - 1),
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFFFFFFFF),
    st.integers(0, 0xFFFFFFFF),
)
def test_delphi_round_trip(ts: int, fee: int, seq: int, price: int) -> None:
    raw = DelphiCommitment(ts, fee, seq, price).encode()
    assert raw == ts.to_bytes(6, "little") + struct.pack("<HII", fee, seq, price)
    assert DelphiCommitment.decode(raw) == DelphiCommitment(ts, fee, seq, price)


@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=4, max_size=4))
def test_gp_round_trip(fields: list[int]) -> None:
    m = GpMessage(*fields)
    assert m.encode() == struct.pack("<iiii", *fields)
    assert GpMessage.decode(m.encode()) == m
