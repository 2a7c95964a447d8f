"""CashAddr against the CHIP vectors, the Cauldron worked vector, and every rejection class."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.cashaddr import (
    Address,
    AddressKind,
    CashAddrError,
    address_to_locking,
    decode_cashaddr,
    encode_cashaddr,
    locking_to_address,
)
from bch.hashes import hash256
from tests.conftest import load_vectors

VECTORS: list[dict[str, Any]] = load_vectors("cashaddr.json")
SIZES = [20, 24, 28, 32, 40, 48, 56, 64]
CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _version_byte(vector: dict[str, Any]) -> int:
    return int(vector["type"]) << 3 | SIZES.index(vector["payloadSize"])


def _ids(vector: dict[str, Any]) -> str:
    return str(vector["cashaddr"])


# --- an independent, spec-literal checksum, to forge well-checksummed malformed addresses ------


def _spec_polymod(values: list[int]) -> int:
    generators = [0x98F2BC8E61, 0x79B76D99E2, 0xF33E5FB3C4, 0xAE2EABE2A8, 0x1E4F43E470]
    c = 1
    for d in values:
        c0 = c >> 35
        c = ((c & 0x07FFFFFFFF) << 5) ^ d
        for i, g in enumerate(generators):
            if (c0 >> i) & 1:
                c ^= g
    return c ^ 1


def _forge(prefix: str, data5: list[int]) -> str:
    """`prefix:` + the 5-bit values + their correct checksum, whatever the values mean."""
    mod = _spec_polymod([ord(c) & 31 for c in prefix] + [0] + data5 + [0] * 8)
    checksum = [(mod >> (5 * (7 - i))) & 31 for i in range(8)]
    return prefix + ":" + "".join(CHARSET[v] for v in data5 + checksum)


def _bits5(data: bytes, pad_value: int = 0) -> list[int]:
    """Bytes as 5-bit groups; the padding bits of the last group are set to `pad_value`."""
    bits = "".join(f"{b:08b}" for b in data)
    pad = -len(bits) % 5
    bits += f"{pad_value:0{pad}b}" if pad else ""
    return [int(bits[i : i + 5], 2) for i in range(0, len(bits), 5)]


# --- vectors -------------------------------------------------------------------------------------


def test_vector_count() -> None:
    assert len(VECTORS) == 67


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_encode_vector(vector: dict[str, Any]) -> None:
    prefix = vector["cashaddr"].split(":")[0]
    payload = bytes.fromhex(vector["payload"])
    assert encode_cashaddr(prefix, _version_byte(vector), payload) == vector["cashaddr"]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_decode_vector(vector: dict[str, Any]) -> None:
    prefix, version_byte, payload = decode_cashaddr(vector["cashaddr"])
    assert prefix == vector["cashaddr"].split(":")[0]
    assert version_byte >> 3 == vector["type"]
    assert SIZES[version_byte & 7] == vector["payloadSize"] == len(payload)
    assert payload == bytes.fromhex(vector["payload"])


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_decode_vector_upper_case_and_without_prefix(vector: dict[str, Any]) -> None:
    text = vector["cashaddr"]
    prefix, body = text.split(":")
    expected = decode_cashaddr(text)
    assert decode_cashaddr(text.upper()) == expected
    assert decode_cashaddr(body, default_prefix=prefix) == expected
    assert decode_cashaddr(body.upper(), default_prefix=prefix) == expected


STANDARD = [
    v for v in VECTORS if v["cashaddr"].split(":")[0] in ("bitcoincash", "bchtest", "bchreg")
]


def _payable(v: dict[str, Any]) -> bool:
    """Types and sizes with a standard locking bytecode (bch-wire.md's CashAddr table)."""
    if v["type"] in (0, 2):
        return bool(v["payloadSize"] == 20)
    return v["type"] in (1, 3) and v["payloadSize"] in (20, 32)


PAYABLE = [v for v in STANDARD if _payable(v)]


def test_vectors_cover_every_address_kind() -> None:
    seen = {(v["type"], v["payloadSize"]) for v in PAYABLE}
    assert seen == {(0, 20), (1, 20), (1, 32), (2, 20), (3, 20), (3, 32)}


@pytest.mark.parametrize("vector", PAYABLE, ids=_ids)
def test_address_from_vector(vector: dict[str, Any]) -> None:
    addr = Address.decode(vector["cashaddr"])
    payload = bytes.fromhex(vector["payload"])
    assert addr.hash == payload
    assert addr.token_aware == (vector["type"] >= 2)
    assert addr.prefix == vector["cashaddr"].split(":")[0]
    expected_lock = {
        (0, 20): "76a914" + payload.hex() + "88ac",
        (1, 20): "a914" + payload.hex() + "87",
        (1, 32): "aa20" + payload.hex() + "87",
    }[(vector["type"] & 1, vector["payloadSize"])]
    assert addr.locking_bytecode().hex() == expected_lock
    assert addr.encode() == str(addr) == vector["cashaddr"]
    assert Address.decode(vector["cashaddr"], prefix=addr.prefix) == addr
    assert address_to_locking(vector["cashaddr"]).hex() == expected_lock
    relocked = locking_to_address(
        bytes.fromhex(expected_lock), token_aware=addr.token_aware, prefix=addr.prefix
    )
    assert relocked == vector["cashaddr"]


# --- the Cauldron worked vector (cauldron.md) ----------------------------------------------------

OWNER_PKH = bytes.fromhex("b034dc7821b2b25c38b5825cdc4af9e6ace02be7")
POOL_REDEEM = bytes.fromhex(
    "746376a914"
    + OWNER_PKH.hex()
    + "88ac67c0d1c0ce88c25288c0cdc0c788c0c6c0d095c0c6c0cc9490539502e80396c0cc7c94c0d3957ca268"
)
POOL_LOCKING = "aa20095f68844b48e2ed5c77a622d8371ac02b3e03d59b185df6278c2a3c09aa6e1187"
POOL_ADDRESS = "bitcoincash:rvy476yyfdyw9m2uw7nz9kphrtqzk0sr6kd3sh0ky7xz50qf4fhpzw8rgvlmz"


def test_cauldron_pool_address() -> None:
    assert ("aa20" + hash256(POOL_REDEEM).hex() + "87") == POOL_LOCKING
    locking = bytes.fromhex(POOL_LOCKING)
    assert locking_to_address(locking, token_aware=True) == POOL_ADDRESS
    addr = Address.decode(POOL_ADDRESS)
    assert addr == Address(AddressKind.P2SH32, hash256(POOL_REDEEM), token_aware=True)
    assert addr.locking_bytecode() == locking
    assert address_to_locking(POOL_ADDRESS) == locking
    # The non-token-aware form pays the same bytecode but is a different string.
    plain = addr.with_token_awareness(False)
    assert plain.encode().startswith("bitcoincash:p")
    assert plain.locking_bytecode() == locking
    assert plain.with_token_awareness(True) == addr


# --- rejections ----------------------------------------------------------------------------------

A_P2PKH = "bitcoincash:qr6m7j9njldwwzlg9v7v53unlr4jkmx6eylep8ekg2"  # the first vector


def _reject(text: str, fragment: str, **kwargs: Any) -> None:
    with pytest.raises(CashAddrError) as info:
        decode_cashaddr(text, **kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_flipped_character_is_a_checksum_error(vector: dict[str, Any]) -> None:
    text = vector["cashaddr"]
    start = text.index(":") + 1
    for pos in range(start, len(text), 7):
        replacement = CHARSET[(CHARSET.index(text[pos]) + 1) % 32]
        _reject(text[:pos] + replacement + text[pos + 1 :], "checksum")


@pytest.mark.parametrize("vector", VECTORS[:8], ids=_ids)
def test_mixed_case_rejected(vector: dict[str, Any]) -> None:
    text = vector["cashaddr"]
    prefix, body = text.split(":")
    _reject(prefix.upper() + ":" + body, "mixed case")
    letter = next(i for i, c in enumerate(body) if c.isalpha())
    _reject(prefix + ":" + body[:letter] + body[letter].upper() + body[letter + 1 :], "mixed case")
    upper = text.upper()
    last = max(i for i, c in enumerate(upper) if c.isalpha())
    _reject(upper[:last] + upper[last].lower() + upper[last + 1 :], "mixed case")


@pytest.mark.parametrize("bad", ["b", "i", "o", "1", "!", " ", "-", "é"])
def test_invalid_characters(bad: str) -> None:
    pos = 20
    _reject(A_P2PKH[:pos] + bad + A_P2PKH[pos + 1 :], "invalid character")
    _reject(A_P2PKH + bad, "invalid character")
    _reject(bad + A_P2PKH.split(":")[1], "invalid character")
    # Upper-case input is lowered first, so 'B', 'I', 'O' are just as invalid.
    upper = A_P2PKH.upper()
    _reject(upper[:pos] + bad.upper() + upper[pos + 1 :], "invalid character")


def test_truncated_and_extended() -> None:
    for cut in range(1, len(A_P2PKH) - len("bitcoincash:")):
        with pytest.raises(CashAddrError):
            decode_cashaddr(A_P2PKH[:-cut])
    _reject("bitcoincash:", "too short")
    _reject("bitcoincash:qqqqqqqq", "too short")
    _reject("bitcoincash:" + "q" * 200, "too long")
    with pytest.raises(CashAddrError):
        decode_cashaddr(A_P2PKH + "q")


def test_wrong_prefix_is_a_checksum_error() -> None:
    body = A_P2PKH.split(":")[1]
    for prefix in ("bchtest", "bchreg", "bitcoincas", "bitcoincashh"):
        _reject(f"{prefix}:{body}", "checksum")
    _reject(body, "checksum", default_prefix="bchtest")
    with pytest.raises(CashAddrError, match="wrong prefix"):
        Address.decode(A_P2PKH, prefix="bchtest")
    # A bare payload is checked against the required prefix.
    with pytest.raises(CashAddrError, match="checksum"):
        Address.decode(body, prefix="bchtest")
    assert Address.decode(body) == Address.decode(A_P2PKH)


def test_missing_and_unknown_prefix() -> None:
    body = A_P2PKH.split(":")[1]
    _reject(":" + body, "missing prefix")
    _reject("bit-coincash:" + body, "invalid prefix")
    _reject("a:b:" + body, "invalid prefix")
    others = [v for v in VECTORS if v not in STANDARD and _payable(v)]
    assert others
    for vector in others:
        with pytest.raises(CashAddrError, match="unknown prefix"):
            Address.decode(vector["cashaddr"])
        prefix = vector["cashaddr"].split(":")[0]
        assert Address.decode(vector["cashaddr"], prefix=prefix).prefix == prefix
    with pytest.raises(CashAddrError, match="prefix"):
        encode_cashaddr("", 0, bytes(20))
    with pytest.raises(CashAddrError, match="prefix"):
        encode_cashaddr("BitcoinCash", 0, bytes(20))


def test_non_zero_padding() -> None:
    # 21 bytes = 168 bits → 34 symbols with 2 padding bits.
    payload = bytes(1) + bytes(range(20))
    assert decode_cashaddr(_forge("bitcoincash", _bits5(payload)))[2] == payload[1:]
    for pad_value in (1, 2, 3):
        _reject(_forge("bitcoincash", _bits5(payload, pad_value)), "padding")
    # A whole extra symbol (7 bits of padding) is too much, even if zero.
    _reject(_forge("bitcoincash", [*_bits5(payload), 0]), "padding")


def test_payload_length_must_match_size_code() -> None:
    for version_byte, length in ((0x00, 24), (0x03, 20), (0x0B, 20), (0x08, 32), (0x07, 63)):
        _reject(_forge("bitcoincash", _bits5(bytes((version_byte,)) + bytes(length))), "length")
        with pytest.raises(CashAddrError, match="length"):
            encode_cashaddr("bitcoincash", version_byte, bytes(length))


def test_reserved_version_bit() -> None:
    _reject(_forge("bitcoincash", _bits5(b"\x80" + bytes(20))), "reserved")
    with pytest.raises(CashAddrError, match="reserved"):
        encode_cashaddr("bitcoincash", 0x80, bytes(20))


def test_unknown_version_type() -> None:
    unknown = [v["cashaddr"] for v in VECTORS if v["type"] > 3]
    assert unknown
    unknown += [encode_cashaddr("bitcoincash", t << 3, bytes(20)) for t in range(4, 16)]
    for text in unknown:
        prefix = text.split(":")[0]
        assert decode_cashaddr(text)[0] == prefix  # fine for the low-level codec
        with pytest.raises(CashAddrError, match="unknown version type"):
            Address.decode(text, prefix=prefix)


def test_unpayable_hash_sizes() -> None:
    # Valid CashAddr, but no standard locking bytecode: P2PKH with 32 bytes, P2SH with 24 bytes.
    for version_byte, size in ((0x03, 32), (0x09, 24), (0x13, 32), (0x1C, 40)):
        text = encode_cashaddr("bitcoincash", version_byte, bytes(size))
        with pytest.raises(CashAddrError, match="hash length"):
            Address.decode(text)


def test_address_constructor_validates_hash() -> None:
    with pytest.raises(CashAddrError):
        Address(AddressKind.P2PKH, bytes(32))
    with pytest.raises(CashAddrError):
        Address(AddressKind.P2SH32, bytes(20))
    with pytest.raises(CashAddrError):
        Address(AddressKind.P2SH20, bytes(20), prefix="")


def test_non_standard_locking_has_no_address() -> None:
    pkh = bytes(range(20))
    for bytecode in (
        b"",
        b"\x6a\x04abcd",
        b"\x76\xa9\x14" + pkh + b"\x88",  # P2PKH missing OP_CHECKSIG
        b"\xa9\x14" + pkh + b"\x88",  # P2SH20 with the wrong final opcode
        b"\xaa\x20" + pkh + b"\x87",  # P2SH32 prefix over a 20-byte hash
        bytes.fromhex("51"),
    ):
        assert Address.from_locking(bytecode) is None
        assert locking_to_address(bytecode, token_aware=True) is None


# --- round trips ---------------------------------------------------------------------------------

FIRST_CHAR = {
    (AddressKind.P2PKH, False): "q",
    (AddressKind.P2SH20, False): "p",
    (AddressKind.P2SH32, False): "p",
    (AddressKind.P2PKH, True): "z",
    (AddressKind.P2SH20, True): "r",
    (AddressKind.P2SH32, True): "r",
}
VERSION_BYTE = {
    (AddressKind.P2PKH, False): 0x00,
    (AddressKind.P2SH20, False): 0x08,
    (AddressKind.P2SH32, False): 0x0B,
    (AddressKind.P2PKH, True): 0x10,
    (AddressKind.P2SH20, True): 0x18,
    (AddressKind.P2SH32, True): 0x1B,
}


@st.composite
def addresses(draw: st.DrawFn) -> Address:
    kind = draw(st.sampled_from(AddressKind))
    size = 32 if kind is AddressKind.P2SH32 else 20
    return Address(
        kind,
        draw(st.binary(min_size=size, max_size=size)),
        token_aware=draw(st.booleans()),
        prefix=draw(st.sampled_from(["bitcoincash", "bchtest", "bchreg"])),
    )


@given(addresses())
def test_address_round_trip(addr: Address) -> None:
    text = addr.encode()
    prefix, body = text.split(":")
    assert prefix == addr.prefix
    assert body[0] == FIRST_CHAR[(addr.kind, addr.token_aware)]
    assert len(body) == (42 if len(addr.hash) == 20 else 61)
    assert decode_cashaddr(text) == (
        addr.prefix,
        VERSION_BYTE[(addr.kind, addr.token_aware)],
        addr.hash,
    )
    assert Address.decode(text) == addr
    assert Address.decode(text.upper()) == addr
    assert Address.decode(body, prefix=addr.prefix) == addr
    locking = addr.locking_bytecode()
    assert Address.from_locking(locking, token_aware=addr.token_aware, prefix=addr.prefix) == addr
    assert address_to_locking(text) == locking
    other = addr.with_token_awareness(not addr.token_aware)
    assert other.locking_bytecode() == locking
    assert other.encode() != text


@given(
    st.sampled_from(range(8)),
    st.integers(min_value=0, max_value=15),
    st.data(),
    st.from_regex(r"[a-z0-9]{1,20}", fullmatch=True),
)
def test_low_level_round_trip(
    size_code: int, addr_type: int, data: st.DataObject, prefix: str
) -> None:
    payload = data.draw(st.binary(min_size=SIZES[size_code], max_size=SIZES[size_code]))
    version_byte = addr_type << 3 | size_code
    text = encode_cashaddr(prefix, version_byte, payload)
    assert text == _forge(prefix, _bits5(bytes((version_byte,)) + payload))
    assert decode_cashaddr(text) == (prefix, version_byte, payload)
