"""Script helpers: minimal pushes, script numbers, op iteration and the locking templates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.encoding import DecodeError
from bch.script import (
    ScriptKind,
    classify_locking,
    decode_script_number,
    encode_script_number,
    is_push_only,
    iter_ops,
    p2pkh_locking,
    p2pkh_locking_for_pubkey,
    p2sh20_locking,
    p2sh32_locking,
    p2sh32_locking_for_redeem,
    push_data,
    push_int,
    pushes,
)

# --- push_data -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "opcode"),
    [(b"", 0x00), (b"\x81", 0x4F), *((bytes((v,)), 0x50 + v) for v in range(1, 17))],
)
def test_push_single_opcode(data: bytes, opcode: int) -> None:
    assert push_data(data) == bytes((opcode,))
    assert pushes(push_data(data)) == [data]


@pytest.mark.parametrize(
    ("data", "header"),
    [
        (b"\x00", "01"),  # a single zero byte is data, not OP_0
        (b"\x11", "01"),
        (b"\x80", "01"),
        (b"\xff", "01"),
        (b"\x01\x00", "02"),
        (bytes(75), "4b"),
        (bytes(76), "4c4c"),
        (bytes(255), "4cff"),
        (bytes(256), "4d0001"),
        (bytes(65535), "4dffff"),
        (bytes(65536), "4e00000100"),
    ],
    ids=lambda x: f"{len(x)}B" if isinstance(x, bytes) else x,
)
def test_push_data_boundaries(data: bytes, header: str) -> None:
    script = push_data(data)
    assert script == bytes.fromhex(header) + data
    assert pushes(script) == [data]
    assert is_push_only(script)


@given(st.binary(max_size=600))
def test_push_data_round_trip(data: bytes) -> None:
    script = push_data(data)
    assert pushes(script) == [data]
    assert len(list(iter_ops(script))) == 1
    # Minimal: never longer than the shortest form the rules allow.
    n = len(data)
    if n == 0 or (n == 1 and (1 <= data[0] <= 16 or data[0] == 0x81)):
        assert len(script) == 1
    elif n <= 75:
        assert len(script) == 1 + n
    elif n <= 255:
        assert len(script) == 2 + n
    else:
        assert len(script) == 3 + n


# --- script numbers ------------------------------------------------------------------------------

KNOWN_NUMBERS = [
    (0, ""),
    (1, "01"),
    (-1, "81"),
    (16, "10"),
    (127, "7f"),
    (-127, "ff"),
    (128, "8000"),
    (-128, "8080"),
    (255, "ff00"),
    (-255, "ff80"),
    (256, "0001"),
    (-256, "0081"),
    (32767, "ff7f"),
    (32768, "008000"),
    (-32768, "008080"),
    (2**31 - 1, "ffffff7f"),
    (-(2**31 - 1), "ffffffff"),
    (2**31, "0000008000"),
    (2**63 - 1, "ffffffffffffff7f"),
    (-(2**63), "000000000000008080"),
]


@pytest.mark.parametrize(("n", "hex_"), KNOWN_NUMBERS)
def test_known_script_numbers(n: int, hex_: str) -> None:
    assert encode_script_number(n).hex() == hex_
    assert decode_script_number(bytes.fromhex(hex_)) == n


def test_decode_accepts_non_minimal_forms() -> None:
    # Decoding is sign-magnitude regardless of minimality (minimality is a VM rule).
    assert decode_script_number(b"\x80") == 0  # negative zero
    assert decode_script_number(b"\x00\x80") == 0
    assert decode_script_number(b"\x01\x00") == 1
    assert decode_script_number(b"\x01\x80") == -1
    assert decode_script_number(b"\x00\x00\x00") == 0


big_ints = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(),
    st.integers(min_value=-(2**4000), max_value=2**4000),  # big integers since May 2025
)


@given(big_ints)
def test_script_number_round_trip(n: int) -> None:
    encoded = encode_script_number(n)
    assert decode_script_number(encoded) == n
    # Minimal length: the magnitude's bytes plus room for the sign bit.
    assert len(encoded) == (0 if n == 0 else (abs(n).bit_length() + 8) // 8)
    if encoded:
        assert bool(encoded[-1] & 0x80) == (n < 0)


@given(big_ints)
def test_push_int_round_trip(n: int) -> None:
    script = push_int(n)
    assert is_push_only(script)
    (item,) = pushes(script)
    assert decode_script_number(item) == n
    if n == 0:
        assert script == b"\x00"
    elif n == -1:
        assert script == b"\x4f"
    elif 1 <= n <= 16:
        assert script == bytes((0x50 + n,))
    else:
        assert item == encode_script_number(n)
        assert script[0] == len(item) or script[0] in (0x4C, 0x4D)


@pytest.mark.parametrize(
    ("n", "hex_"),
    [(0, "00"), (-1, "4f"), (1, "51"), (16, "60"), (17, "0111"), (-2, "0182"), (128, "028000")],
)
def test_known_push_int(n: int, hex_: str) -> None:
    assert push_int(n).hex() == hex_


# --- iter_ops ------------------------------------------------------------------------------------


def test_iter_ops_of_a_p2pkh_script() -> None:
    pkh = bytes(range(20))
    ops = list(iter_ops(p2pkh_locking(pkh)))
    assert ops == [(0x76, None), (0xA9, None), (0x14, pkh), (0x88, None), (0xAC, None)]
    assert not is_push_only(p2pkh_locking(pkh))
    with pytest.raises(DecodeError):
        pushes(p2pkh_locking(pkh))


def test_iter_ops_explicit_push_opcodes() -> None:
    assert list(iter_ops(b"\x4c\x02ab\x4d\x01\x00c\x4e\x00\x00\x00\x00")) == [
        (0x4C, b"ab"),
        (0x4D, b"c"),
        (0x4E, b""),
    ]
    assert list(iter_ops(b"\x00\x4f\x51\x60")) == [
        (0, b""),
        (0x4F, None),
        (0x51, None),
        (0x60, None),
    ]
    assert pushes(b"\x00\x4f\x51\x60") == [b"", b"\x81", b"\x01", b"\x10"]


@pytest.mark.parametrize(
    "script",
    [
        "05616263",  # push 5, only 3 bytes follow
        "4b",  # push 75, nothing follows
        "4c",  # OP_PUSHDATA1 without its length
        "4c05616263",
        "4d01",  # OP_PUSHDATA2 with half a length
        "4d0001" + "00" * 255,  # 256 announced, 255 present
        "4e010000",  # OP_PUSHDATA4 with 3 length bytes
        "4e01000000",
        "51" + "02aa",  # truncation after a valid op
    ],
)
def test_truncated_push_raises(script: str) -> None:
    raw = bytes.fromhex(script)
    with pytest.raises(DecodeError):
        list(iter_ops(raw))
    with pytest.raises(DecodeError):
        pushes(raw)
    assert not is_push_only(raw)


@given(st.binary(min_size=1, max_size=300))
def test_every_truncation_of_a_push_raises(data: bytes) -> None:
    script = push_data(data)
    if len(script) == 1:
        return  # OP_0 / OP_N / OP_1NEGATE cannot be truncated
    for cut in range(1, len(script)):
        with pytest.raises(DecodeError):
            list(iter_ops(script[:cut]))


# --- locking templates ---------------------------------------------------------------------------

H20 = bytes.fromhex("b034dc7821b2b25c38b5825cdc4af9e6ace02be7")
H32 = bytes(range(32))
POOL_REDEEM_ZERO_PKH = bytes.fromhex(
    "746376a914" + "00" * 20 + "88ac67c0d1c0ce88c25288c0cdc0c788c0c6c0d095c0c6c0cc9490539502e803"
    "96c0cc7c94c0d3957ca268"
)


def test_templates_bytes() -> None:
    assert p2pkh_locking(H20).hex() == "76a914" + H20.hex() + "88ac"
    assert p2sh20_locking(H20).hex() == "a914" + H20.hex() + "87"
    assert p2sh32_locking(H32).hex() == "aa20" + H32.hex() + "87"
    # Worked vector from cauldron.md: the zero-pkh pool's P2SH32 bytecode.
    assert p2sh32_locking_for_redeem(POOL_REDEEM_ZERO_PKH).hex() == (
        "aa20416963a62a6389230e2b6bb2058799415f8b7f4079ce99690ed5079156f8e74187"
    )
    # hash160 of the secp256k1 generator point's compressed key (BIP-173's example).
    generator = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
    assert p2pkh_locking_for_pubkey(generator).hex() == (
        "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac"
    )


def test_templates_reject_wrong_hash_lengths() -> None:
    for bad in (bytes(19), bytes(21), bytes(32)):
        with pytest.raises(ValueError):
            p2pkh_locking(bad)
        with pytest.raises(ValueError):
            p2sh20_locking(bad)
    for bad in (bytes(20), bytes(31), bytes(33)):
        with pytest.raises(ValueError):
            p2sh32_locking(bad)


@given(st.binary(min_size=20, max_size=20), st.binary(min_size=32, max_size=32))
def test_classify_templates(h20: bytes, h32: bytes) -> None:
    assert classify_locking(p2pkh_locking(h20)) == (ScriptKind.P2PKH, h20)
    assert classify_locking(p2sh20_locking(h20)) == (ScriptKind.P2SH20, h20)
    assert classify_locking(p2sh32_locking(h32)) == (ScriptKind.P2SH32, h32)


@pytest.mark.parametrize(
    "script",
    [
        "6a",
        "6a04deadbeef",
        "6a" + "4c50" + "00" * 80,
    ],
)
def test_classify_op_return(script: str) -> None:
    assert classify_locking(bytes.fromhex(script)) == (ScriptKind.OP_RETURN, b"")


NEAR_MISSES = {
    "empty": "",
    "p2pkh short hash": "76a913" + H20.hex()[:-2] + "88ac",
    "p2pkh long hash": "76a915" + H20.hex() + "0088ac",
    "p2pkh no checksig": "76a914" + H20.hex() + "88",
    "p2pkh trailing byte": "76a914" + H20.hex() + "88ac00",
    "p2pkh checksigverify": "76a914" + H20.hex() + "88ad",
    "p2pkh equal not equalverify": "76a914" + H20.hex() + "87ac",
    "p2pkh hash256": "76aa14" + H20.hex() + "88ac",
    "p2pkh leading op": "0076a914" + H20.hex() + "88ac",
    "p2sh20 equalverify": "a914" + H20.hex() + "88",
    "p2sh20 missing equal": "a914" + H20.hex(),
    "p2sh20 trailing": "a914" + H20.hex() + "8700",
    "p2sh20 hash256 op": "aa14" + H20.hex() + "87",
    "p2sh32 hash160 op": "a920" + H32.hex() + "87",
    "p2sh32 equalverify": "aa20" + H32.hex() + "88",
    "p2sh32 short": "aa1f" + H32.hex()[:-2] + "87",
    "p2sh32 trailing": "aa20" + H32.hex() + "8751",
    "p2sh32 pushdata1": "aa4c20" + H32.hex() + "87",
    "bare multisig": "5121" + "02" + "11" * 32 + "51ae",
    "op_true": "51",
}


@pytest.mark.parametrize("script", NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_classify_near_misses(script: str) -> None:
    assert classify_locking(bytes.fromhex(script)) == (ScriptKind.OTHER, b"")
