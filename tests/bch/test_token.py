"""Token prefix codec against the CHIP-2022-02 vectors, plus a property round trip."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.encoding import Reader
from bch.token import (
    MAX_TOKEN_AMOUNT,
    NFT,
    Capability,
    TokenData,
    TokenPrefixError,
    decode_token_prefix,
    split_token_prefix,
)
from tests.conftest import load_vectors

VALID: list[dict[str, Any]] = load_vectors("token-prefix-valid.json")
INVALID: list[dict[str, str]] = load_vectors("token-prefix-invalid.json")
P2PKH = bytes.fromhex("76a914" + "11" * 20 + "88ac")


def _short_id(vector: dict[str, Any]) -> str:
    prefix = str(vector["prefix"])
    return prefix[:4] + "…" + prefix[66:110] if len(prefix) > 66 else prefix[:12]


def test_vector_counts() -> None:
    assert len(VALID) == 62
    assert len(INVALID) == 55


@pytest.mark.parametrize("vector", VALID, ids=_short_id)
def test_valid_prefix_decodes_to_data(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["prefix"])
    data = vector["data"]
    reader = Reader(raw)
    token = decode_token_prefix(reader)
    assert reader.pos == len(raw)
    assert token.category_hex == data["category"]
    assert token.category == bytes.fromhex(data["category"])[::-1]
    assert token.amount == int(data["amount"])
    if "nft" in data:
        assert token.nft is not None
        assert token.nft.capability.label == data["nft"]["capability"]
        assert token.nft.commitment == bytes.fromhex(data["nft"]["commitment"])
    else:
        assert token.nft is None
    assert token.to_json() == data


@pytest.mark.parametrize("vector", VALID, ids=_short_id)
def test_valid_prefix_encodes_exactly(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["prefix"])
    token = TokenData.from_json(vector["data"])
    assert token.encode_prefix() == raw
    assert split_token_prefix(raw + P2PKH) == (token, P2PKH)
    assert split_token_prefix(raw) == (token, b"")


def test_commitment_length_is_not_limited_by_the_codec() -> None:
    longest = max(
        len(v["data"].get("nft", {}).get("commitment", "")) // 2
        for v in VALID
        if "nft" in v["data"]
    )
    assert longest > 1000
    commitment = bytes(range(256)) * 4
    token = TokenData(bytes(32), 5, NFT(Capability.MUTABLE, commitment))
    assert decode_token_prefix(Reader(token.encode_prefix())) == token


@pytest.mark.parametrize("vector", INVALID, ids=_short_id)
def test_invalid_prefix_rejected(vector: dict[str, str]) -> None:
    raw = bytes.fromhex(vector["prefix"])
    with pytest.raises(TokenPrefixError) as info:
        decode_token_prefix(Reader(raw))
    assert str(info.value).split(".")[0] == vector["error"].split(".")[0]
    with pytest.raises(TokenPrefixError):
        split_token_prefix(raw)


def test_prefix_must_start_with_ef() -> None:
    raw = bytes.fromhex(VALID[0]["prefix"])
    with pytest.raises(TokenPrefixError):
        decode_token_prefix(Reader(b"\xee" + raw[1:]))
    # Without 0xef the script field is plain locking bytecode.
    assert split_token_prefix(P2PKH) == (None, P2PKH)
    assert split_token_prefix(b"") == (None, b"")


def test_token_data_invariants() -> None:
    with pytest.raises(ValueError):
        TokenData(bytes(31), 1)
    with pytest.raises(ValueError):
        TokenData(bytes(32), 0)
    with pytest.raises(ValueError):
        TokenData(bytes(32), MAX_TOKEN_AMOUNT + 1)
    with pytest.raises(ValueError):
        TokenData(bytes(32), -1)
    assert TokenData(bytes(32), MAX_TOKEN_AMOUNT).amount == 2**63 - 1


# --- property round trip -------------------------------------------------------------------------

amounts = st.one_of(
    st.integers(min_value=0, max_value=MAX_TOKEN_AMOUNT),
    st.sampled_from([0, 1, 0xFC, 0xFD, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, MAX_TOKEN_AMOUNT]),
)


@st.composite
def token_data(draw: st.DrawFn) -> TokenData:
    category = draw(st.binary(min_size=32, max_size=32))
    amount = draw(amounts)
    nft = None
    if amount == 0 or draw(st.booleans()):
        nft = NFT(
            draw(st.sampled_from(Capability)),
            draw(st.one_of(st.binary(max_size=40), st.binary(min_size=250, max_size=300))),
        )
    return TokenData(category, amount, nft)


@given(token_data(), st.binary(max_size=40))
def test_prefix_round_trip(token: TokenData, locking: bytes) -> None:
    raw = token.encode_prefix()
    assert raw[0] == 0xEF
    assert raw[1:33] == token.category
    bitfield = raw[33]
    assert bool(bitfield & 0x20) == (token.nft is not None)
    assert bool(bitfield & 0x10) == (token.amount > 0)
    assert bool(bitfield & 0x40) == bool(token.nft and token.nft.commitment)
    assert bitfield & 0x0F == (token.nft.capability if token.nft else 0)
    reader = Reader(raw)
    assert decode_token_prefix(reader) == token
    assert reader.pos == len(raw)
    assert split_token_prefix(raw + locking) == (token, locking)
    assert TokenData.from_json(token.to_json()) == token
