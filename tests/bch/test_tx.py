"""Transaction wire format: libauth's CashTokens VMB transactions, properties, malformed input."""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.encoding import DecodeError
from bch.token import NFT, Capability, TokenData, TokenPrefixError
from bch.tx import (
    OutPoint,
    Transaction,
    TxInput,
    TxOutput,
    _parse_checked,
    _parse_fast,
    decode_outputs,
    encode_outputs,
    hex_to_hash,
    parse_transaction,
)
from tests.conftest import load_vectors

VMB: list[list[Any]] = load_vectors("vmb/bch_2025_standard.core.cashtokens.vmb_tests.json")
INVALID_PREFIXES: list[dict[str, str]] = load_vectors("token-prefix-invalid.json")
P2PKH = bytes.fromhex("76a914" + "22" * 20 + "88ac")


def _vmb_id(vector: list[Any]) -> str:
    return str(vector[0])


# --- a spec-literal serializer (bch-wire.md), independent of bch.tx ------------------------------


def _cs(n: int) -> bytes:
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + struct.pack("<H", n)
    if n <= 0xFFFFFFFF:
        return b"\xfe" + struct.pack("<I", n)
    return b"\xff" + struct.pack("<Q", n)


def _spec_output(o: TxOutput) -> bytes:
    script = (o.token.encode_prefix() if o.token else b"") + o.locking
    return struct.pack("<Q", o.value) + _cs(len(script)) + script


def _spec_tx(tx: Transaction) -> bytes:
    out = struct.pack("<i", tx.version) + _cs(len(tx.inputs))
    for i in tx.inputs:
        out += i.outpoint.txid + struct.pack("<I", i.outpoint.index)
        out += _cs(len(i.unlocking)) + i.unlocking + struct.pack("<I", i.sequence)
    out += _cs(len(tx.outputs)) + b"".join(_spec_output(o) for o in tx.outputs)
    return out + struct.pack("<I", tx.locktime)


def _double_sha256(data: bytes) -> bytes:
    return hashlib.sha256(hashlib.sha256(data).digest()).digest()


# --- libauth's VMB transactions -------------------------------------------------------------------


def test_vmb_file_exercises_tokens() -> None:
    outputs = [o for v in VMB for o in Transaction.from_hex(v[4]).outputs]
    tokens = [o.token for o in outputs if o.token is not None]
    assert len(VMB) > 600
    assert len(tokens) > 500
    assert any(t.nft is not None and t.nft.commitment for t in tokens)
    assert any(t.nft is None and t.amount for t in tokens)


@pytest.mark.parametrize("vector", VMB, ids=_vmb_id)
def test_vmb_transaction_round_trip(vector: list[Any]) -> None:
    raw = bytes.fromhex(vector[4])
    tx = Transaction.from_bytes(raw)
    assert tx.to_bytes() == raw
    assert tx.hex() == vector[4]
    assert tx.size() == len(raw)
    # Rebuilt from its parts (no cached raw), it serializes the same.
    rebuilt = Transaction(tx.version, tx.inputs, tx.outputs, tx.locktime)
    assert rebuilt.raw is None
    assert rebuilt == tx
    assert rebuilt.to_bytes() == raw
    assert _spec_tx(tx) == raw
    # txid = hash256 of the bytes, displayed reversed.
    digest = _double_sha256(raw)
    assert tx.txid == rebuilt.txid == digest
    assert tx.txid_hex == rebuilt.txid_hex == digest[::-1].hex()
    for inp in tx.inputs:
        assert OutPoint.from_hex(inp.outpoint.txid_hex, inp.outpoint.index) == inp.outpoint
        assert hex_to_hash(inp.outpoint.txid_hex) == inp.outpoint.txid
    for out in tx.outputs:
        assert out.encode() == _spec_output(out)
        assert out.size() == len(out.encode())


@pytest.mark.parametrize("vector", VMB, ids=_vmb_id)
def test_vmb_source_outputs_round_trip(vector: list[Any]) -> None:
    raw = bytes.fromhex(vector[5])
    outputs = decode_outputs(raw)
    tx = Transaction.from_hex(vector[4])
    assert len(outputs) == len(tx.inputs)  # one spent output per input
    assert encode_outputs(outputs) == raw
    assert _cs(len(outputs)) + b"".join(_spec_output(o) for o in outputs) == raw


def test_known_txid() -> None:
    # The genesis block's coinbase: a txid known from outside this code base.
    genesis_coinbase = (
        "01000000010000000000000000000000000000000000000000000000000000000000000000ffffffff4d04"
        "ffff001d0104455468652054696d65732030332f4a616e2f32303039204368616e63656c6c6f72206f6e20"
        "6272696e6b206f66207365636f6e64206261696c6f757420666f722062616e6b73ffffffff0100f2052a01"
        "000000434104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4c"
        "ef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac00000000"
    )
    tx = Transaction.from_hex(genesis_coinbase)
    assert tx.txid_hex == "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b"
    assert tx.outputs[0].value == 50 * 100_000_000
    assert tx.outputs[0].token is None


def test_parse_consecutive_transactions() -> None:
    a, b = bytes.fromhex(VMB[0][4]), bytes.fromhex(VMB[-1][4])
    buf = a + b
    first, end = parse_transaction(buf, 0)
    second, end2 = parse_transaction(buf, end)
    assert (end, end2) == (len(a), len(buf))
    assert first.to_bytes() == a and second.to_bytes() == b
    assert first.txid == _double_sha256(a) and second.txid == _double_sha256(b)


# --- property round trip --------------------------------------------------------------------------

BOUNDARY_LENGTHS = [0xFC, 0xFD, 0xFFFF, 0x10000]
u32 = st.integers(min_value=0, max_value=0xFFFFFFFF)


def _sized_bytes(max_random: int, *, boundaries: bool) -> st.SearchStrategy[bytes]:
    """Random short bytes, or a CompactSize-boundary length filled with one drawn byte."""
    if not boundaries:
        return st.binary(max_size=max_random)
    boundary = st.builds(
        lambda n, fill: bytes((fill,)) * n,
        st.sampled_from(BOUNDARY_LENGTHS),
        st.integers(min_value=0, max_value=255),
    )
    return st.one_of(st.binary(max_size=max_random), boundary)


@st.composite
def token_data(draw: st.DrawFn) -> TokenData:
    amount = draw(
        st.one_of(
            st.integers(min_value=0, max_value=(1 << 63) - 1),
            st.sampled_from([0, 0xFC, 0xFD, 0xFFFF, 0x10000, (1 << 63) - 1]),
        )
    )
    nft = None
    if amount == 0 or draw(st.booleans()):
        commitment = st.one_of(st.binary(max_size=40), st.binary(min_size=0xFD, max_size=0x110))
        nft = NFT(draw(st.sampled_from(Capability)), draw(commitment))
    return TokenData(draw(st.binary(min_size=32, max_size=32)), amount, nft)


@st.composite
def tx_outputs(draw: st.DrawFn, *, boundaries: bool = True) -> TxOutput:
    token = draw(st.none() | token_data())
    locking = draw(_sized_bytes(60, boundaries=boundaries))
    if token is None and locking[:1] == b"\xef":
        locking = b"\x6a" + locking  # 0xef first would be read as a token prefix
    return TxOutput(draw(st.integers(min_value=0, max_value=(1 << 64) - 1)), locking, token)


def tx_inputs(*, boundaries: bool = True) -> st.SearchStrategy[TxInput]:
    return st.builds(
        TxInput,
        st.builds(OutPoint, st.binary(min_size=32, max_size=32), u32),
        _sized_bytes(120, boundaries=boundaries),
        u32,
    )


def _counted(draw: st.DrawFn, item: Any) -> list[Any]:
    """A few random items (maybe 64 KiB long), or 0xfc/0xfd items (a count boundary).

    The long lists repeat a few drawn items: drawing hundreds would exhaust Hypothesis's budget.
    """
    if draw(st.integers(min_value=0, max_value=5)) == 5:
        count = draw(st.sampled_from([0xFC, 0xFD]))
        few = draw(st.lists(item(boundaries=False), min_size=1, max_size=3))
        return [few[i % len(few)] for i in range(count)]
    return draw(st.lists(item(), max_size=4))


@st.composite
def transactions(draw: st.DrawFn) -> Transaction:
    return Transaction(
        draw(st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)),
        tuple(_counted(draw, tx_inputs)),
        tuple(_counted(draw, tx_outputs)),
        draw(u32),
    )


@settings(max_examples=150, deadline=None)
@given(transactions())
def test_transaction_round_trip(tx: Transaction) -> None:
    raw = tx.to_bytes()
    assert raw == _spec_tx(tx)
    parsed = Transaction.from_bytes(raw)
    assert parsed == tx
    assert parsed.to_bytes() == raw
    assert parsed.txid == tx.txid == _double_sha256(raw)
    assert sum(o.size() for o in tx.outputs) + sum(i.size() for i in tx.inputs) < len(raw)
    assert decode_outputs(encode_outputs(tx.outputs)) == list(tx.outputs)


# --- malformed input ------------------------------------------------------------------------------


def _few_vectors() -> list[bytes]:
    raws = sorted({bytes.fromhex(v[4]) for v in VMB}, key=len)
    with_commitment = next(
        raw
        for raw in raws
        if any(
            o.token and o.token.nft and o.token.nft.commitment and o.token.amount
            for o in Transaction.from_bytes(raw).outputs
        )
    )
    return [raws[0], with_commitment, raws[len(raws) // 2], raws[-1]]


@pytest.mark.parametrize("raw", _few_vectors(), ids=lambda r: f"{len(r)}B")
def test_every_truncation_rejected(raw: bytes) -> None:
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            Transaction.from_bytes(raw[:cut])
        with pytest.raises(DecodeError):
            parse_transaction(raw[:cut])


@pytest.mark.parametrize("raw", _few_vectors(), ids=lambda r: f"{len(r)}B")
def test_source_output_truncation_and_trailing_rejected(raw: bytes) -> None:
    outputs = encode_outputs(Transaction.from_bytes(raw).outputs)
    for cut in range(len(outputs)):
        with pytest.raises(DecodeError):
            decode_outputs(outputs[:cut])
    with pytest.raises(DecodeError, match="trailing"):
        decode_outputs(outputs + b"\x00")


def test_trailing_bytes_rejected() -> None:
    raw = bytes.fromhex(VMB[0][4])
    for extra in (b"\x00", b"\xff" * 4, raw):
        with pytest.raises(DecodeError, match="trailing"):
            Transaction.from_bytes(raw + extra)
        tx, end = parse_transaction(raw + extra)  # the streaming parser stops at the end
        assert end == len(raw) and tx.to_bytes() == raw
    with pytest.raises(DecodeError):
        Transaction.from_hex(VMB[0][4] + "zz")
    with pytest.raises(DecodeError):
        Transaction.from_hex(VMB[0][4][:-1])


def _simple_tx(outputs: list[bytes] | None = None) -> tuple[bytes, list[int]]:
    """A one-input transaction by hand; returns it and the offsets of its four CompactSizes."""
    outputs = outputs if outputs is not None else [struct.pack("<Q", 1000) + _cs(25) + P2PKH]
    unlocking = b"\x51"
    body = struct.pack("<i", 2)
    offsets = [len(body)]  # input count
    body += _cs(1) + bytes(range(32)) + struct.pack("<I", 0)
    offsets.append(len(body))  # unlocking length
    body += _cs(len(unlocking)) + unlocking + struct.pack("<I", 0xFFFFFFFF)
    offsets.append(len(body))  # output count
    body += _cs(len(outputs))
    offsets.append(len(body) + 8)  # first output's script length
    body += b"".join(outputs) + struct.pack("<I", 0)
    return body, offsets


def test_hand_built_transaction_parses() -> None:
    raw, _ = _simple_tx()
    tx = Transaction.from_bytes(raw)
    assert tx.version == 2 and tx.locktime == 0
    assert tx.inputs == (TxInput(OutPoint(bytes(range(32)), 0), b"\x51", 0xFFFFFFFF),)
    assert tx.outputs == (TxOutput(1000, P2PKH),)


@pytest.mark.parametrize("which", ["input count", "unlocking length", "output count", "script"])
@pytest.mark.parametrize("wide", [b"\xfd", b"\xfe", b"\xff"])
def test_non_minimal_compact_size_rejected(which: str, wide: bytes) -> None:
    raw, offsets = _simple_tx()
    at = offsets[["input count", "unlocking length", "output count", "script"].index(which)]
    value = raw[at]
    width = {b"\xfd": 2, b"\xfe": 4, b"\xff": 8}[wide]
    mutated = raw[:at] + wide + value.to_bytes(width, "little") + raw[at + 1 :]
    with pytest.raises(DecodeError, match="minimal"):
        Transaction.from_bytes(mutated)


@pytest.mark.parametrize("vector", INVALID_PREFIXES, ids=lambda v: v["prefix"][66:] or "short")
def test_invalid_token_prefix_inside_output(vector: dict[str, str]) -> None:
    prefix = bytes.fromhex(vector["prefix"])
    bad_output = struct.pack("<Q", 1000) + _cs(len(prefix)) + prefix
    good_output = struct.pack("<Q", 1000) + _cs(25) + P2PKH
    for outputs in ([bad_output], [good_output, bad_output]):
        raw, _ = _simple_tx(outputs)
        with pytest.raises(TokenPrefixError):
            Transaction.from_bytes(raw)
        with pytest.raises(DecodeError):
            decode_outputs(_cs(len(outputs)) + b"".join(outputs))


@pytest.mark.parametrize("amount_bits", [0x10, 0x30])  # fungible only; NFT + fungible
def test_token_amount_limit_inside_output(amount_bits: int) -> None:
    category = bytes(range(32))

    def output(amount: int) -> bytes:
        script = b"\xef" + category + bytes((amount_bits,)) + _cs(amount) + P2PKH
        return struct.pack("<Q", 800) + _cs(len(script)) + script

    raw, _ = _simple_tx([output((1 << 63) - 1)])
    token = Transaction.from_bytes(raw).outputs[0].token
    assert token is not None
    assert token.amount == (1 << 63) - 1 and token.category == category
    assert (token.nft is not None) == bool(amount_bits & 0x20)
    for too_much in (1 << 63, (1 << 64) - 1):
        raw, _ = _simple_tx([output(too_much)])
        with pytest.raises(TokenPrefixError, match="exceeds maximum"):
            Transaction.from_bytes(raw)


def test_output_script_length_past_end_rejected() -> None:
    raw, offsets = _simple_tx()
    at = offsets[3]
    mutated = raw[:at] + bytes((raw[at] + 5,)) + raw[at + 1 :]
    with pytest.raises(DecodeError):
        Transaction.from_bytes(mutated)


def test_replace_drops_the_cached_bytes() -> None:
    tx_hex = load_vectors("vmb/bch_2025_standard.core.cashtokens.vmb_tests.json")[0][4]
    tx = Transaction.from_hex(tx_hex)
    changed = tx.replace(version=1)
    assert changed.version == 1
    assert changed.to_bytes()[:4] == b"\x01\x00\x00\x00"
    assert changed.txid != tx.txid
    assert changed.to_bytes()[4:] == tx.to_bytes()[4:]


# --- the fast pass of parse_transaction against its reference -------------------------------------
# `parse_transaction` reads common shapes in one unchecked pass and hands everything else to the
# bounds-checked `_parse_checked`; the two must agree on every input, valid or not: the same
# values (every slot, types included) or the same error (type and message).


def _deep(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)  # compare=False slots too (`_encoded`)
        return (type(value), *(_deep(getattr(value, f.name)) for f in fields))
    if isinstance(value, tuple):
        return (type(value), *(_deep(v) for v in value))
    return (type(value), value)


def _outcome(parse: Any, buf: bytes, pos: int) -> object:
    try:
        tx, end = parse(buf, pos)
    except Exception as exc:  # the error itself is what is compared
        return ("error", type(exc), str(exc))
    return ("ok", _deep(tx), end)


def _assert_same(buf: bytes, pos: int = 0) -> None:
    assert _outcome(parse_transaction, buf, pos) == _outcome(_parse_checked, buf, pos)


@settings(max_examples=100, deadline=None)
@given(transactions(), st.data())
def test_fast_parse_equals_reference(tx: Transaction, data: st.DataObject) -> None:
    raw = tx.to_bytes()
    _assert_same(raw)
    lead = data.draw(st.binary(max_size=3))
    _assert_same(lead + raw + data.draw(st.binary(max_size=3)), len(lead))
    _assert_same(raw[: data.draw(st.integers(min_value=0, max_value=len(raw)))])
    for _ in range(4):
        mutated = bytearray(raw)
        mutated[data.draw(st.integers(min_value=0, max_value=len(raw) - 1))] = data.draw(
            st.sampled_from([0x00, 0x10, 0x20, 0x32, 0x70, 0xEF, 0xFC, 0xFD, 0xFE, 0xFF])
        )
        _assert_same(bytes(mutated))


@pytest.mark.parametrize("raw", _few_vectors(), ids=lambda r: f"{len(r)}B")
def test_fast_parse_equals_reference_on_every_mutation(raw: bytes) -> None:
    step = 1 + len(raw) // 400  # every byte of the small vectors, a spread of the largest
    for cut in range(0, len(raw), step):
        _assert_same(raw[:cut])
    for at in range(0, len(raw), step):
        for byte in (0x00, 0x10, 0xEF, 0xFD, 0xFF, raw[at] ^ 0x80):
            _assert_same(raw[:at] + bytes((byte,)) + raw[at + 1 :])


def test_fast_parse_equals_reference_on_every_vector() -> None:
    raws = {bytes.fromhex(v[4]) for v in VMB}
    for raw in raws:
        _assert_same(raw)
    for vector in INVALID_PREFIXES:  # each malformed prefix inside an output
        prefix = bytes.fromhex(vector["prefix"])
        _assert_same(_simple_tx([prefix + P2PKH])[0])


def test_fast_pass_takes_the_common_shapes() -> None:
    """The shapes of a Cauldron trade (fungible tokens, 2-byte script lengths) never need the
    reference: otherwise the equality tests above would not exercise the fast pass at all."""
    token = TokenData(bytes(range(32)), 0xFFFF_FFFF_FF)
    tx = Transaction.build(
        [TxInput(OutPoint(bytes(32), 7), b"\x44" + bytes(300)), TxInput(OutPoint(b"\x01" * 32, 0))],
        [TxOutput(1000, P2PKH, token), TxOutput(5, b"\x6a" + bytes(260)), TxOutput(0, P2PKH)],
    )
    raw = tx.to_bytes()
    fast = _parse_fast(raw, 0)
    assert fast is not None
    assert fast[0] == tx and fast[1] == len(raw)
    assert _deep(fast[0]) == _deep(_parse_checked(raw)[0])
    nft = TokenData(bytes(32), 0, NFT(Capability.MINTING, b"\x01\x02"))
    with_nft = tx.replace(outputs=(TxOutput(1, P2PKH, nft),)).to_bytes()
    assert _parse_fast(with_nft, 0) is not None  # decoded by decode_token_prefix in the pass
    many_inputs = tx.replace(inputs=tx.inputs[:1] * 0xFD).to_bytes()
    assert _parse_fast(many_inputs, 0) is None  # left to the reference
    assert _deep(parse_transaction(many_inputs)[0]) == _deep(_parse_checked(many_inputs)[0])
