"""Signing serialization against libauth's signing-serialization VMB vectors (all 1300).

In these vectors the tested input's unlocking bytecode pushes the expected preimage first and a
signature (sighash byte appended) by libauth's test key "key1" second; the locking/redeem script
checks that signature with OP_CHECKSIG against the real transaction and with OP_CHECKDATASIG
against sha256(pushed preimage), so the push is exactly the preimage our code must produce.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bch.hashes import hash256
from bch.keys import PrivateKey, verify_ecdsa, verify_schnorr
from bch.script import (
    OP_CHECKMULTISIG,
    OP_CHECKSIG,
    OP_CODESEPARATOR,
    ScriptKind,
    classify_locking,
    iter_ops,
    p2pkh_locking,
    push_data,
    pushes,
)
from bch.sighash import (
    SIGHASH_ALL,
    SIGHASH_ANYONECANPAY,
    SIGHASH_DEFAULT,
    SIGHASH_FORKID,
    SIGHASH_NONE,
    SIGHASH_SINGLE,
    SIGHASH_UTXOS,
    VALID_SIGHASH_TYPES,
    SighashCache,
    covered_bytecode,
    first_signature_check,
    is_valid_sighash_type,
    script_code_for_input,
    signature_digest,
    signing_preimage,
)
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput, decode_outputs
from tests.conftest import load_vectors

KEY1_PUBKEY = bytes.fromhex("03a524f43d6166ad3567f18b0a5c769c6ab4dc02149f4d5095ccf4e8ffa293e785")
# libauth's VMB "key1": BIP32 m/0 from the master seed uint256(1) (its default scenario). Checked
# against the published public key above in `test_key1_matches_the_vector_public_key`.
KEY1 = PrivateKey.from_bytes(
    bytes.fromhex("85d4377b2d040c7602c0751273134209a38de7b9edde81e18bf4af85579d7be4")
)

VECTOR_FILES = (
    "vmb/bch_2025_standard.core.signing-serialization.vmb_tests.json",
    "vmb/bch_2025_nonstandard.core.signing-serialization.vmb_tests.json",
)

_SIG_CHECK_OPS = {OP_CHECKSIG, OP_CHECKSIG + 1, OP_CHECKMULTISIG, OP_CHECKMULTISIG + 1}
_PUSH_LENGTH_WIDTH = {0x4C: 1, 0x4D: 2, 0x4E: 4}


@dataclass(frozen=True)
class Case:
    id: str
    tx: Transaction
    source_outputs: list[TxOutput]
    index: int
    expected_preimage: bytes
    signature: bytes  # without the sighash byte
    sighash_type: int
    script_code: bytes


def _independent_script_code(source: TxOutput, unlocking: bytes) -> bytes:
    """The covered bytecode, derived from the vector with bch.script only.

    P2SH20/P2SH32 spends cover the redeem script (the last push); bare scripts cover the locking
    bytecode. Then, if an OP_CODESEPARATOR precedes the first signature check, only what follows
    the last such separator (these scripts have no branches, so every separator executes).
    """
    kind, _ = classify_locking(source.locking)
    is_p2sh = kind in (ScriptKind.P2SH20, ScriptKind.P2SH32)
    code = pushes(unlocking)[-1] if is_p2sh else source.locking
    pos = cut = 0
    for op, data in iter_ops(code):
        if op in _SIG_CHECK_OPS:
            break
        pos += 1 + _PUSH_LENGTH_WIDTH.get(op, 0) + (len(data) if data else 0)
        if op == OP_CODESEPARATOR:
            cut = pos
    return code[cut:]


def _load_cases() -> list[Case]:
    cases = []
    for name in VECTOR_FILES:
        for vector in load_vectors(name):
            vid, _desc, _unlock_asm, _lock_asm, tx_hex, utxos_hex = vector[:6]
            index = vector[6] if len(vector) > 6 else 0
            tx = Transaction.from_hex(tx_hex)
            source_outputs = decode_outputs(bytes.fromhex(utxos_hex))
            unlocking = tx.inputs[index].unlocking
            items = pushes(unlocking)
            cases.append(
                Case(
                    id=vid,
                    tx=tx,
                    source_outputs=source_outputs,
                    index=index,
                    expected_preimage=items[0],
                    signature=items[1][:-1],
                    sighash_type=items[1][-1],
                    script_code=_independent_script_code(source_outputs[index], unlocking),
                )
            )
    return cases


CASES = _load_cases()


def test_all_vectors_loaded() -> None:
    assert len(CASES) == 866 + 434
    assert {c.sighash_type for c in CASES} == VALID_SIGHASH_TYPES
    # Both signature algorithms and token-carrying spent outputs are exercised.
    assert {len(c.signature) == 64 for c in CASES} == {True, False}
    assert any(c.source_outputs[c.index].token is not None for c in CASES)


def test_key1_matches_the_vector_public_key() -> None:
    assert KEY1.public_key == KEY1_PUBKEY


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_vector_preimage_and_signature(case: Case) -> None:
    preimage = signing_preimage(
        case.tx, case.index, case.source_outputs, case.sighash_type, case.script_code
    )
    assert preimage == case.expected_preimage
    digest = hash256(preimage)
    assert digest == signature_digest(
        case.tx, case.index, case.source_outputs, case.sighash_type, case.script_code
    )
    if len(case.signature) == 64:
        assert verify_schnorr(KEY1_PUBKEY, digest, case.signature)
        # libauth signs deterministically, so our signer must reproduce its bytes exactly.
        assert KEY1.sign_schnorr(digest) == case.signature
    else:
        assert verify_ecdsa(KEY1_PUBKEY, digest, case.signature)
        assert KEY1.sign_ecdsa(digest) == case.signature


def test_script_code_helpers_agree_with_vectors() -> None:
    for case in CASES:
        txin = case.tx.inputs[case.index]
        code = script_code_for_input(case.source_outputs[case.index], txin.unlocking)
        assert covered_bytecode(code, first_signature_check(code)) == case.script_code


def test_cache_matches_function_for_every_input_and_type() -> None:
    case = max(CASES, key=lambda c: len(c.tx.inputs) * 10 + len(c.tx.outputs))
    assert len(case.tx.inputs) > 1 and len(case.tx.outputs) > 1
    cache = SighashCache(case.tx, case.source_outputs)
    for index in range(len(case.tx.inputs)):
        for t in sorted(VALID_SIGHASH_TYPES):
            assert cache.preimage(index, t, b"\x51") == signing_preimage(
                case.tx, index, list(case.source_outputs), t, b"\x51"
            )


# --- constructed transactions: each preimage field in isolation -----------------------------

CATEGORY = bytes(range(32))
PAY = p2pkh_locking(bytes(20))


def _tx(n_in: int = 3, n_out: int = 2) -> tuple[Transaction, list[TxOutput]]:
    inputs = [
        TxInput(OutPoint(bytes([i % 255 + 1]) * 32, i), b"", 0xFFFFFFFE - i) for i in range(n_in)
    ]
    outputs = [TxOutput(1000 + i, PAY) for i in range(n_out)]
    source = [TxOutput(5000 + i, PAY) for i in range(n_in)]
    return Transaction.build(inputs, outputs, version=2, locktime=7), source


def _fields(preimage: bytes, utxos: bool) -> dict[str, bytes]:
    """Split a preimage per the reference table (tests use no tokens here, 1-byte code length)."""
    out: dict[str, bytes] = {"version": preimage[:4], "prevouts": preimage[4:36]}
    pos = 36
    if utxos:
        out["utxos"] = preimage[pos : pos + 32]
        pos += 32
    out["sequences"] = preimage[pos : pos + 32]
    out["outpoint"] = preimage[pos + 32 : pos + 68]
    pos += 68
    n = preimage[pos]
    out["code"] = preimage[pos + 1 : pos + 1 + n]
    pos += 1 + n
    out["value"] = preimage[pos : pos + 8]
    out["sequence"] = preimage[pos + 8 : pos + 12]
    out["outputs"] = preimage[pos + 12 : pos + 44]
    out["locktime"] = preimage[pos + 44 : pos + 48]
    out["type"] = preimage[pos + 48 :]
    return out


def test_field_layout_of_constructed_preimages() -> None:
    tx, source = _tx()
    all_prevouts = hash256(
        b"".join(i.outpoint.txid + i.outpoint.index.to_bytes(4, "little") for i in tx.inputs)
    )
    all_sequences = hash256(b"".join(i.sequence.to_bytes(4, "little") for i in tx.inputs))
    all_outputs = hash256(b"".join(o.encode() for o in tx.outputs))
    all_utxos = hash256(b"".join(o.encode() for o in source))
    zero = bytes(32)
    for t in sorted(VALID_SIGHASH_TYPES):
        for index in range(3):
            f = _fields(signing_preimage(tx, index, source, t, b"\xac"), bool(t & SIGHASH_UTXOS))
            acp = bool(t & SIGHASH_ANYONECANPAY)
            base = t & 0x1F
            assert f["version"] == b"\x02\x00\x00\x00"
            assert f["prevouts"] == (zero if acp else all_prevouts)
            if t & SIGHASH_UTXOS:
                assert f["utxos"] == all_utxos
            assert f["sequences"] == (all_sequences if base == SIGHASH_ALL and not acp else zero)
            assert f["outpoint"] == bytes([index + 1]) * 32 + index.to_bytes(4, "little")
            assert f["code"] == b"\xac"
            assert f["value"] == (5000 + index).to_bytes(8, "little")
            assert f["sequence"] == (0xFFFFFFFE - index).to_bytes(4, "little")
            if base == SIGHASH_ALL:
                assert f["outputs"] == all_outputs
            elif base == SIGHASH_SINGLE and index < 2:
                assert f["outputs"] == hash256(tx.outputs[index].encode())
            else:
                assert f["outputs"] == zero
            assert f["locktime"] == b"\x07\x00\x00\x00"
            assert f["type"] == bytes((t, 0, 0, 0))


def test_token_prefix_of_spent_output_is_covered() -> None:
    tx, source = _tx()
    token = TokenData(CATEGORY, 99, NFT(Capability.MUTABLE, b"\x01\x02"))
    with_token = [source[0], TxOutput(source[1].value, source[1].locking, token), source[2]]
    for t in (0x41, 0xC2, 0x63):
        plain = signing_preimage(tx, 1, source, t, b"\xac")
        tokened = signing_preimage(tx, 1, with_token, t, b"\xac")
        prefix = token.encode_prefix()
        # The prefix sits between the outpoint and the script code; nothing else moves.
        at = 4 + 32 + (32 if t & SIGHASH_UTXOS else 0) + 32 + 36
        assert tokened[at : at + len(prefix)] == prefix
        if t & SIGHASH_UTXOS:
            # hashUtxos also changes, since it commits to every spent output incl. prefixes.
            assert tokened[:36] == plain[:36]
            assert tokened[36:68] != plain[36:68]
            assert tokened[68:at] == plain[68:at]
        else:
            assert tokened[:at] == plain[:at]
        assert tokened[at + len(prefix) :] == plain[at:]


def test_long_script_code_uses_compact_size() -> None:
    tx, source = _tx()
    code = b"\x51" * 300
    preimage = signing_preimage(tx, 0, source, SIGHASH_DEFAULT, code)
    at = 4 + 32 + 32 + 32 + 36
    assert preimage[at : at + 3] == b"\xfd\x2c\x01"
    assert preimage[at + 3 : at + 303] == code


def test_sighash_type_validity_rule() -> None:
    for t in range(256):
        base = t & 0x1F
        rule = (
            bool(t & SIGHASH_FORKID)
            and base in (SIGHASH_ALL, SIGHASH_NONE, SIGHASH_SINGLE)
            and not (t & SIGHASH_UTXOS and t & SIGHASH_ANYONECANPAY)
        )
        assert is_valid_sighash_type(t) == rule, hex(t)


def test_invalid_arguments_raise() -> None:
    tx, source = _tx()
    for t in (0x01, 0x00, 0x04 | SIGHASH_FORKID, 0xE1, 0x141):
        with pytest.raises(ValueError):
            signing_preimage(tx, 0, source, t, b"")
    for index in (-1, 3):
        with pytest.raises(ValueError):
            signing_preimage(tx, index, source, SIGHASH_DEFAULT, b"")
    for bad in (source[:2], [*source, source[0]]):
        with pytest.raises(ValueError):
            signing_preimage(tx, 0, bad, SIGHASH_DEFAULT, b"")


def test_memo_never_returns_stale_results() -> None:
    tx, source = _tx()
    before = signing_preimage(tx, 0, source, SIGHASH_DEFAULT, b"")
    source[2] = TxOutput(1, PAY)  # mutate the same list object between calls
    after = signing_preimage(tx, 0, source, SIGHASH_DEFAULT, b"")
    assert after != before
    assert after == SighashCache(tx, list(source)).preimage(0, SIGHASH_DEFAULT, b"")
    tx2, _ = _tx()
    tx2 = Transaction.build(tx2.inputs, tx2.outputs[:1], locktime=7)
    assert signing_preimage(tx2, 0, source, 0x41, b"") != signing_preimage(tx, 0, source, 0x41, b"")


def test_covered_bytecode_cuts_after_last_executed_separator() -> None:
    # OP_1 OP_CODESEPARATOR OP_2 OP_CODESEPARATOR OP_3 OP_CHECKSIG
    script = bytes([0x51, 0xAB, 0x52, 0xAB, 0x53, 0xAC])
    assert covered_bytecode(script) == bytes([0x53, 0xAC])
    assert covered_bytecode(script, before=3) == bytes([0x52, 0xAB, 0x53, 0xAC])
    assert first_signature_check(script) == 5
    # 0xab inside pushed data is not an opcode.
    pushed = bytes([0x02, 0xAB, 0xAB, 0xAC])
    assert covered_bytecode(pushed) == pushed
    assert covered_bytecode(b"") == b""


def test_script_code_for_input_kinds() -> None:
    redeem = bytes([0x51, 0x87])
    unlocking = push_data(b"\x01" * 5) + push_data(redeem)
    p2sh = TxOutput(1, bytes.fromhex("a914") + bytes(20) + b"\x87")
    assert script_code_for_input(p2sh, unlocking) == redeem
    assert script_code_for_input(TxOutput(1, PAY), unlocking) == PAY
    with pytest.raises(ValueError):
        script_code_for_input(p2sh, b"")
    with pytest.raises(ValueError):
        script_code_for_input(p2sh, bytes([0xAC]))
