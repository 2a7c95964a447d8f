"""Relay policy and token rules, on real transactions from the libauth vectors (which libauth
verifies as standard, or flags as non-standard) and on single-rule mutations of them."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from functools import cache
from typing import Any

import pytest

from bch.encoding import DecodeError
from bch.policy import (
    MAX_COMMITMENT,
    MAX_OP_RETURN_RELAY,
    MAX_STANDARD_TX_SIZE,
    PolicyViolation,
    TokenBurn,
    check_fee,
    dust_threshold,
    genesis_categories,
    input_standardness_errors,
    is_dust,
    is_standard,
    is_unspendable,
    min_relay_fee,
    standard_output_type,
    standardness_errors,
    token_balance_errors,
    token_burns,
    tx_fee,
)
from bch.script import p2pkh_locking, p2sh20_locking, p2sh32_locking, push_data
from bch.token import MAX_TOKEN_AMOUNT, NFT, Capability, TokenData
from bch.tx import (
    MAX_SATS,
    OutPoint,
    Transaction,
    TxInput,
    TxOutput,
    decode_outputs,
    encode_outputs,
)
from tests.conftest import ROOT, load_vectors

CASHTOKENS = "vmb/bch_2025_standard.core.cashtokens.vmb_tests.json"
SIGNING_STANDARD = "vmb/bch_2025_standard.core.signing-serialization.vmb_tests.json"
SIGNING_NONSTANDARD = "vmb/bch_2025_nonstandard.core.signing-serialization.vmb_tests.json"

P2PKH = p2pkh_locking(bytes(range(20)))
P2SH32 = p2sh32_locking(bytes(range(32)))
CATEGORY = bytes(range(100, 132))
OTHER_CATEGORY = bytes(range(200, 232))
KEY33 = b"\x02" + bytes(range(1, 33))
KEY65 = b"\x04" + bytes(range(1, 65))


def _rebuild(tx: Transaction, **changes: Any) -> Transaction:
    """A modified copy that re-encodes (the parsed `raw` bytes must not survive a change)."""
    return dataclasses.replace(tx, raw=None, **changes)


@cache
def _vectors(name: str) -> dict[str, list[Any]]:
    return {v[0]: v for v in load_vectors(name)}


def _vector(vid: str, name: str = CASHTOKENS) -> tuple[Transaction, list[TxOutput]]:
    v = _vectors(name)[vid]
    return Transaction.from_hex(v[4]), decode_outputs(bytes.fromhex(v[5]))


def _all(name: str) -> list[tuple[str, Transaction, list[TxOutput]]]:
    return [(vid, *_vector(vid, name)) for vid in _vectors(name)]


def _reasons(tx: Transaction, vm_year: int = 2026) -> list[str]:
    return [v.reason for v in standardness_errors(tx, vm_year=vm_year)]


def _token_reasons(tx: Transaction, source: list[TxOutput]) -> list[str]:
    return [v.reason for v in token_balance_errors(tx, source)]


def _with_outputs(tx: Transaction, *outputs: TxOutput) -> Transaction:
    return _rebuild(tx, outputs=tuple(outputs))


def _with_unlocking(tx: Transaction, unlocking: bytes) -> Transaction:
    first = dataclasses.replace(tx.inputs[0], unlocking=unlocking)
    return _rebuild(tx, inputs=(first, *tx.inputs[1:]))


def _base() -> Transaction:
    """A real standard transaction: 'send fungible token (P2SH32)', 132 bytes, fee 9000."""
    return _vector("70kn5l")[0]


# --- the vectors as a whole ------------------------------------------------------------------


def test_real_token_transactions_pass_every_check() -> None:
    cases = _all(CASHTOKENS)
    assert len(cases) == 617
    for vid, tx, source in cases:
        for year in (2025, 2026):
            assert standardness_errors(tx, vm_year=year) == [], vid
            assert input_standardness_errors(tx, source, vm_year=year) == [], vid
        assert token_balance_errors(tx, source) == [], vid
        assert check_fee(tx, source) is None, vid


def test_libauth_nonstandard_vectors_spend_bare_scripts() -> None:
    """libauth marks these non-standard under the 2025 rules: each spends a bare script (at most
    201 bytes), which BCHN refuses as a non-standard input before 2026 and accepts after."""
    nonstandard = _all(SIGNING_NONSTANDARD)
    assert len(nonstandard) == 434
    for vid, tx, source in nonstandard:
        flagged = input_standardness_errors(tx, source, vm_year=2025)
        assert flagged, vid
        assert {v.reason for v in flagged} == {"bad-txns-nonstandard-inputs"}
        assert input_standardness_errors(tx, source, vm_year=2026) == [], vid
        assert standardness_errors(tx, vm_year=2025) == [], vid
    for vid, tx, source in _all(SIGNING_STANDARD):
        assert input_standardness_errors(tx, source, vm_year=2025) == [], vid
        assert standardness_errors(tx, vm_year=2025) == [], vid


# --- dust and fees ---------------------------------------------------------------------------


SMALL_FT = TokenData(CATEGORY, 100)


@pytest.mark.parametrize(
    ("output", "threshold"),
    [
        (TxOutput(0, P2PKH), 546),
        (TxOutput(0, P2SH32), 576),
        (TxOutput(0, P2PKH, SMALL_FT), 651),
        (TxOutput(0, P2SH32, SMALL_FT), 681),
    ],
    ids=["p2pkh", "p2sh32", "p2pkh+ft", "p2sh32+ft"],
)
def test_reference_dust_figures(output: TxOutput, threshold: int) -> None:
    assert dust_threshold(output) == threshold
    assert is_dust(dataclasses.replace(output, value=threshold - 1))
    assert not is_dust(dataclasses.replace(output, value=threshold))
    at_limit = _with_outputs(_base(), dataclasses.replace(output, value=threshold))
    below = _with_outputs(_base(), dataclasses.replace(output, value=threshold - 1))
    assert "dust" not in _reasons(at_limit)
    assert standardness_errors(below) == [
        PolicyViolation(
            "dust", f"output 0 carries {threshold - 1} sats; its dust threshold is {threshold}", 0
        )
    ]


def test_dust_figure_named_by_a_vector() -> None:
    """'move immutable token (… dust, 657)': libauth's vector pays exactly the threshold."""
    tx, _ = _vector("8wrxaz")
    assert tx.outputs[0].value == 657 == dust_threshold(tx.outputs[0])
    assert is_standard(tx)
    assert _reasons(_with_outputs(tx, dataclasses.replace(tx.outputs[0], value=656))) == ["dust"]


def test_unspendable_outputs_have_no_dust_threshold() -> None:
    assert dust_threshold(TxOutput(0, b"\x6a" + push_data(b"hello"))) == 0
    assert dust_threshold(TxOutput(0, b"\x6a\x76")) == 0  # OP_RETURN then a non-push
    assert dust_threshold(TxOutput(0, bytes(10_001))) == 0  # too long to ever execute
    assert is_unspendable(bytes(10_001)) and not is_unspendable(bytes(10_000))
    assert dust_threshold(TxOutput(0, bytes(10_000))) == 3 * (8 + 3 + 10_000 + 148)
    assert dust_threshold(TxOutput(0, b"")) == 3 * (9 + 148)


def test_dust_at_other_rates() -> None:
    assert dust_threshold(TxOutput(0, P2PKH), 3000) == 3 * 546
    assert dust_threshold(TxOutput(0, P2PKH), 1) == 3  # 182 bytes × 0.001: rounded up to 1 sat
    assert dust_threshold(TxOutput(0, P2PKH), 0) == 0


def test_min_relay_fee_rounding() -> None:
    assert min_relay_fee(226) == 226
    assert min_relay_fee(226, 1500) == 339
    assert min_relay_fee(101, 1500) == 151  # 151.5 truncates
    assert min_relay_fee(999, 1) == 1  # 0.999 sat: never 0 for a positive rate
    assert min_relay_fee(0) == 0
    assert min_relay_fee(500, 0) == 0
    with pytest.raises(ValueError):
        min_relay_fee(-1)


def test_fee_check_on_a_real_transaction() -> None:
    tx, source = _vector("70kn5l")
    size = tx.size()
    assert tx_fee(tx, source) == 9000
    assert check_fee(tx, source) is None
    change = source[0].value - size  # fee exactly one sat per byte
    exact = _with_outputs(tx, dataclasses.replace(tx.outputs[0], value=change))
    assert exact.size() == size
    assert check_fee(exact, source) is None
    short = _with_outputs(tx, dataclasses.replace(tx.outputs[0], value=change + 1))
    assert check_fee(short, source) == PolicyViolation(
        "min relay fee not met", f"min relay fee not met, {size - 1} < {size}"
    )
    assert check_fee(tx, source, fee_per_kb=100_000) == PolicyViolation(
        "min relay fee not met", f"min relay fee not met, 9000 < {100 * size}"
    )
    over = _with_outputs(tx, dataclasses.replace(tx.outputs[0], value=source[0].value + 1))
    violation = check_fee(over, source)
    assert violation is not None and violation.reason == "bad-txns-in-belowout"
    assert tx_fee(over, source) == -1
    with pytest.raises(ValueError, match="source_outputs"):
        tx_fee(tx, [])
    with pytest.raises(ValueError, match="source_outputs"):
        check_fee(tx, source * 2)


# --- standardness, one rule at a time --------------------------------------------------------


def test_version() -> None:
    for version in (0, 3, -1):
        assert _reasons(_rebuild(_base(), version=version)) == ["version"]
    assert _reasons(_rebuild(_base(), version=1)) == []


def test_transaction_size() -> None:
    tx = _base()
    extra = tuple(TxInput(OutPoint(bytes([i]) * 32, 1), push_data(bytes(9_000))) for i in range(12))
    big = _rebuild(tx, inputs=(*tx.inputs, *extra))
    assert big.size() > MAX_STANDARD_TX_SIZE
    assert _reasons(big, 2026) == ["tx-size"]
    assert _reasons(big, 2025) == ["tx-size"] + ["scriptsig-size"] * 12
    assert [v.index for v in standardness_errors(big, vm_year=2025)[1:]] == list(range(1, 13))


def test_unlocking_size_limit_by_vm_year() -> None:
    at_legacy_limit = _with_unlocking(_base(), push_data(bytes(1647)))  # 3 + 1647 = 1650 bytes
    over_legacy = _with_unlocking(_base(), push_data(bytes(1648)))
    assert len(over_legacy.inputs[0].unlocking) == 1651
    assert _reasons(at_legacy_limit, 2025) == []
    assert _reasons(over_legacy, 2025) == ["scriptsig-size"]
    assert _reasons(over_legacy, 2026) == []
    over_2026 = _with_unlocking(_base(), push_data(bytes(9_998)))  # 3 + 9998 = 10,001 bytes
    assert _reasons(over_2026, 2026) == ["scriptsig-size"]


def test_unlocking_must_be_push_only() -> None:
    for unlocking in (b"\x51\x76", b"\x05abc"):  # OP_DUP; a push running past the end
        violations = standardness_errors(_with_unlocking(_base(), unlocking))
        assert [(v.reason, v.index) for v in violations] == [("scriptsig-not-pushonly", 0)]
    assert _reasons(_with_unlocking(_base(), b"\x00\x51\x4f\x60" + push_data(b"x" * 80))) == []


def _multisig(m: int, keys: list[bytes]) -> bytes:
    return (
        bytes([0x50 + m]) + b"".join(push_data(k) for k in keys) + bytes([0x50 + len(keys), 0xAE])
    )


@pytest.mark.parametrize(
    ("locking", "type_2025", "type_2026"),
    [
        (P2PKH, "pubkeyhash", "pubkeyhash"),
        (p2sh20_locking(bytes(20)), "scripthash", "scripthash"),
        (P2SH32, "scripthash", "scripthash"),
        (b"\x6a" + push_data(b"memo"), "nulldata", "nulldata"),
        (b"\x6a", "nulldata", "nulldata"),
        (push_data(KEY33) + b"\xac", "pubkey", "pubkey"),
        (push_data(KEY65) + b"\xac", "pubkey", "pubkey"),
        (push_data(b"\x05" + KEY33[1:]) + b"\xac", None, "script"),  # not a key header
        (_multisig(1, [KEY33] * 3), "multisig", "multisig"),
        (_multisig(2, [KEY33, KEY65]), "multisig", "multisig"),
        (_multisig(1, [KEY33] * 4), None, None),  # 139 bytes, but BCHN sees multisig first
        (b"\x51" + b"\x4c\x21" + KEY33 + b"\x51\xae", None, "script"),  # non-minimal key push
        (b"\x51", None, "script"),
        (b"", None, "script"),
        (b"\x6a\x76", None, "script"),  # OP_RETURN then a non-push
        (b"\x51" * 201, None, "script"),
        (b"\x51" * 202, None, None),
        (b"\x6a" + push_data(bytes(300)), "nulldata", "nulldata"),  # size is limited elsewhere
    ],
)
def test_output_types(locking: bytes, type_2025: str | None, type_2026: str | None) -> None:
    assert standard_output_type(locking, vm_year=2025) == type_2025
    assert standard_output_type(locking, vm_year=2026) == type_2026
    value = 0 if is_unspendable(locking) else 10_000
    tx = _with_outputs(_base(), _base().outputs[0], TxOutput(value, locking))
    for year, kind in ((2025, type_2025), (2026, type_2026)):
        expected = [] if kind is not None else ["scriptpubkey"]
        if kind == "nulldata" and len(locking) > MAX_OP_RETURN_RELAY:
            expected = ["oversize-op-return"]
        assert _reasons(tx, year) == expected


def test_data_carrier_total() -> None:
    def op_return(total: int) -> TxOutput:
        data = bytes(total - 3) if total > 77 else bytes(total - 2)
        out = TxOutput(0, b"\x6a" + push_data(data))
        assert len(out.locking) == total
        return out

    base = _base()
    assert _reasons(_with_outputs(base, base.outputs[0], op_return(223))) == []
    assert _reasons(_with_outputs(base, base.outputs[0], op_return(224))) == ["oversize-op-return"]
    two = _with_outputs(base, op_return(112), base.outputs[0], op_return(112))
    assert _reasons(two) == ["oversize-op-return"]
    assert _reasons(_with_outputs(base, op_return(111), base.outputs[0], op_return(112))) == []


def test_consensus_shape_rules() -> None:
    tx = _base()
    tiny = _rebuild(
        _with_unlocking(tx, b""), outputs=(TxOutput(0, b"\x6a"),)
    )  # 4 + 1 + 41 + 1 + 10 + 4 bytes
    assert tiny.size() == 61
    assert _reasons(tiny) == ["bad-txns-undersize"]
    no_inputs = _rebuild(tx, inputs=())
    assert "bad-txns-vin-empty" in _reasons(no_inputs)
    no_outputs = _rebuild(tx, outputs=())
    assert no_outputs.size() < 65
    assert _reasons(no_outputs) == ["bad-txns-undersize", "bad-txns-vout-empty"]
    twice = _rebuild(tx, inputs=(tx.inputs[0], tx.inputs[0]))
    assert [(v.reason, v.index) for v in standardness_errors(twice)] == [
        ("bad-txns-inputs-duplicate", 1)
    ]
    null = dataclasses.replace(tx.inputs[0], outpoint=OutPoint(bytes(32), 0xFFFFFFFF))
    assert _reasons(_rebuild(tx, inputs=(null,))) == ["bad-txns-prevout-null"]
    token_out = tx.outputs[0]
    assert _reasons(_with_outputs(tx, dataclasses.replace(token_out, value=MAX_SATS + 1))) == [
        "bad-txns-vout-toolarge"
    ]
    halves = [dataclasses.replace(token_out, value=MAX_SATS)] * 2
    assert _reasons(_with_outputs(tx, *halves)) == ["bad-txns-txouttotal-toolarge"]
    assert _reasons(_with_outputs(tx, dataclasses.replace(token_out, value=1 << 63))) == [
        "bad-txns-vout-negative"
    ]


def test_stray_token_prefix_byte() -> None:
    stray = TxOutput(10_000, b"\xef" + P2PKH)
    tx = _with_outputs(_base(), stray)
    assert _reasons(tx, 2025) == ["scriptpubkey", "bad-txns-vout-tokenprefix"]
    assert _reasons(tx, 2026) == ["bad-txns-vout-tokenprefix"]  # 26 bytes: fine as pay-to-script
    # Encoded, such an output would read back as a (malformed) token prefix: it cannot be relayed.
    with pytest.raises(DecodeError):
        decode_outputs(encode_outputs([stray]))


def test_commitment_length_by_vm_year() -> None:
    tx, _ = _vector("jff2kk")  # move immutable token
    out = tx.outputs[0]
    held = out.token
    assert held is not None

    def with_commitment(n: int, held: TokenData = held) -> Transaction:
        token = dataclasses.replace(held, nft=NFT(Capability.NONE, bytes(n)))
        return _with_outputs(tx, dataclasses.replace(out, value=10_000, token=token))

    assert MAX_COMMITMENT == {2025: 40, 2026: 128}
    assert _reasons(with_commitment(40), 2025) == []
    assert _reasons(with_commitment(41), 2025) == ["bad-txns-token-commitment-oversized"]
    assert _reasons(with_commitment(41), 2026) == []
    assert _reasons(with_commitment(128), 2026) == []
    assert _reasons(with_commitment(129), 2026) == ["bad-txns-token-commitment-oversized"]


def test_unknown_vm_year() -> None:
    with pytest.raises(ValueError, match="VM year"):
        standardness_errors(_base(), vm_year=2024)
    with pytest.raises(ValueError, match="VM year"):
        standard_output_type(P2PKH, vm_year=2027)


def test_violation_reads_as_its_message() -> None:
    (violation,) = standardness_errors(_rebuild(_base(), version=3))
    assert str(violation) == "transaction version 3 is not 1 or 2"
    assert violation.index is None


# --- token conservation ----------------------------------------------------------------------

# Burns the vectors' own descriptions state (libauth's test names, not our output).
DESCRIBED_BURNS: dict[str, list[TokenBurn]] = {
    "9sz6q8": [TokenBurn(100_000, 0)],  # merge …, implicit burn 100,000
    "2wt8mt": [TokenBurn(500_000, 0)],  # split …, implicit burn 500,000
    "j0qy5d": [TokenBurn(0, 1)],  # implicitly destroy immutable token
    "u64x5k": [TokenBurn(0, 1)],  # … (zero-length commitment)
    "waeq2z": [TokenBurn(0, 1)],  # implicitly destroy mutable token
    "clqavv": [TokenBurn(0, 1)],  # implicitly destroy minting token
    "x3jsvn": [TokenBurn(0, 1)],  # mint 1 immutable token, destroy minting token
    "sdz3rk": [TokenBurn(0, 1)],  # mint 9 immutable tokens, destroy minting token
    "mde0jy": [TokenBurn(0, 1)],  # mint mutable tokens, destroy minting token
    "acmrr6": [TokenBurn(0, 2)],  # … dropping an immutable token (…, burn minting token)
    "e463t3": [TokenBurn(0, 1)],  # modify 2 mutable tokens while dropping 1 immutable token
    "qmyswc": [TokenBurn(0, 1)],  # move 2 immutable tokens, drop 1 of the same category
}
DESCRIBED_NO_BURN = [
    "4pacw6",  # mint 1 immutable token, keep minting token
    "xdljg8",  # … keep minting token (with modified commitment)
    "4selcr",  # mint 9 immutable tokens, keep minting token
    "jff2kk",  # move immutable token
    "y0myqu",  # move minting token
    "4p3d25",  # move mutable token
    "cw9sk4",  # modify mutable token
    "jxs5tm",  # downgrade mutable token to immutable token
    "la40fw",  # downgrade 2 mutable tokens while moving 1 immutable token of the same category
    "usw9gf",  # send fungible token
    "rusexu",  # split fungible token outputs (1,000,000 to 2 * 500,000)
    "a0qahj",  # merge/split fungible token outputs of multiple categories
    "9rvyxp",  # mint immutable NFT (genesis)
]


@pytest.mark.parametrize("vid", sorted(DESCRIBED_BURNS))
def test_described_burns(vid: str) -> None:
    tx, source = _vector(vid)
    assert sorted(token_burns(tx, source).values()) == DESCRIBED_BURNS[vid]
    assert token_balance_errors(tx, source) == []  # burning is valid


def test_destroy_all_fungible_tokens() -> None:
    for vid in ("q9zae9", "3hhqa4"):  # implicitly destroy fungible tokens (all / all but 1)
        tx, source = _vector(vid)
        held = sum(o.token.amount for o in source if o.token is not None)
        kept = sum(o.token.amount for o in tx.outputs if o.token is not None)
        assert kept == (1 if vid == "3hhqa4" else 0)
        assert list(token_burns(tx, source).values()) == [TokenBurn(held - kept, 0)]


@pytest.mark.parametrize("vid", DESCRIBED_NO_BURN)
def test_described_transfers_burn_nothing(vid: str) -> None:
    tx, source = _vector(vid)
    assert token_burns(tx, source) == {}


def _retoken(tx: Transaction, *tokens: TokenData | None) -> Transaction:
    """The transaction paying its first output's bytecode once per token given."""
    first = tx.outputs[0]
    return _with_outputs(tx, *(TxOutput(10_000, first.locking, t) for t in tokens))


def _source_token(source: list[TxOutput]) -> TokenData:
    token = source[0].token
    assert token is not None
    return token


def test_immutable_nft_must_stay_identical() -> None:
    tx, source = _vector("jff2kk")  # move immutable token
    held = _source_token(source)
    assert held.nft is not None and held.nft.capability is Capability.NONE
    cat = held.category
    assert _token_reasons(_retoken(tx, held), source) == []
    changed = TokenData(cat, 0, NFT(Capability.NONE, b"changed"))
    assert _token_reasons(_retoken(tx, changed), source) == ["bad-txns-token-nft-ex-nihilo"]
    assert token_burns(_retoken(tx, changed), source) == {cat: TokenBurn(0, 1)}
    upgraded = TokenData(cat, 0, NFT(Capability.MUTABLE, held.nft.commitment))
    assert _token_reasons(_retoken(tx, upgraded), source) == ["bad-txns-token-nft-ex-nihilo"]
    copied = _retoken(tx, held, held)
    assert [(v.reason, v.index) for v in token_balance_errors(copied, source)] == [
        ("bad-txns-token-nft-ex-nihilo", 1)
    ]


def test_mutable_nft_may_change_or_downgrade_once() -> None:
    tx, source = _vector("4p3d25")  # move mutable token
    cat = _source_token(source).category
    for nft in (
        NFT(Capability.MUTABLE, b"new state"),
        NFT(Capability.NONE, b"frozen"),
        NFT(Capability.NONE),
    ):
        assert _token_reasons(_retoken(tx, TokenData(cat, 0, nft)), source) == []
    two = _retoken(tx, TokenData(cat, 0, NFT(Capability.MUTABLE)), TokenData(cat, 0, NFT()))
    assert _token_reasons(two, source) == ["bad-txns-token-nft-ex-nihilo"]
    minting = _retoken(tx, TokenData(cat, 0, NFT(Capability.MINTING)))
    assert _token_reasons(minting, source) == ["bad-txns-token-nft-ex-nihilo"]


def test_minting_nft_creates_nfts_but_not_fungible_tokens() -> None:
    tx, source = _vector("y0myqu")  # move minting token
    cat = _source_token(source).category
    many = _retoken(
        tx,
        TokenData(cat, 0, NFT(Capability.MINTING)),
        TokenData(cat, 0, NFT(Capability.MINTING, b"second baton")),
        TokenData(cat, 0, NFT(Capability.MUTABLE, b"m")),
        TokenData(cat, 0, NFT(Capability.NONE, b"a")),
        TokenData(cat, 0, NFT(Capability.NONE, b"a")),
    )
    assert _token_reasons(many, source) == []
    assert token_burns(many, source) == {}
    fungible = _retoken(tx, TokenData(cat, 5, NFT(Capability.MINTING)))
    assert _token_reasons(fungible, source) == ["bad-txns-token-in-belowout"]
    minted_then_burned = _retoken(tx, TokenData(cat, 0, NFT()), TokenData(cat, 0, NFT()))
    assert _token_reasons(minted_then_burned, source) == []
    assert token_burns(minted_then_burned, source) == {cat: TokenBurn(0, 1)}


def test_fungible_conservation_and_unknown_categories() -> None:
    tx, source = _vector("70kn5l")  # send fungible token (amount 1)
    held = _source_token(source)
    assert held.amount == 1
    more = _retoken(tx, TokenData(held.category, 2))
    assert _token_reasons(more, source) == ["bad-txns-token-in-belowout"]
    split = _retoken(tx, TokenData(held.category, 1), TokenData(held.category, 1))
    assert [(v.reason, v.index) for v in token_balance_errors(split, source)] == [
        ("bad-txns-token-in-belowout", 1)
    ]
    stranger = _retoken(tx, TokenData(OTHER_CATEGORY, 1))
    assert _token_reasons(stranger, source) == ["bad-txns-token-invalid-category"]
    assert token_burns(stranger, source) == {held.category: TokenBurn(1, 0)}
    assert token_burns(_retoken(tx, None), source) == {held.category: TokenBurn(1, 0)}


def test_genesis_needs_an_index_zero_outpoint() -> None:
    tx, source = _vector("9rvyxp")  # mint immutable NFT (with genesis input, index 0)
    created = tx.outputs[0].token
    assert created is not None
    assert genesis_categories(tx) == {tx.inputs[0].outpoint.txid} == {created.category}
    supply = _retoken(tx, TokenData(created.category, MAX_TOKEN_AMOUNT, NFT(Capability.MINTING)))
    assert _token_reasons(supply, source) == []
    too_much = _retoken(
        tx, TokenData(created.category, MAX_TOKEN_AMOUNT), TokenData(created.category, 1)
    )
    assert _token_reasons(too_much, source) == ["bad-txns-token-amount-overflow"]
    first = tx.inputs[0]
    moved = dataclasses.replace(first, outpoint=OutPoint(first.outpoint.txid, 1))
    not_genesis = _rebuild(tx, inputs=(moved,))
    assert genesis_categories(not_genesis) == set()
    assert _token_reasons(not_genesis, source) == ["bad-txns-token-invalid-category"]
    carrying = [dataclasses.replace(source[0], token=TokenData(created.category, 5))]
    assert _token_reasons(tx, carrying) == ["bad-txns-token-dupe-genesis"]


def test_input_amount_overflow_and_stray_prefix() -> None:
    tx, source = _vector("70kn5l")
    held = _source_token(source)
    second = TxInput(OutPoint(bytes(31) + b"\x09", 3), b"\x51")
    doubled = _rebuild(tx, inputs=(*tx.inputs, second))
    rich = [dataclasses.replace(source[0], token=TokenData(held.category, MAX_TOKEN_AMOUNT))] * 2
    assert _token_reasons(doubled, rich) == ["bad-txns-token-amount-overflow"]
    stray = [source[0], TxOutput(10_000, b"\xef" + P2PKH)]
    assert [(v.reason, v.index) for v in token_balance_errors(doubled, stray)] == [
        ("bad-txns-vin-tokenprefix", 1)
    ]
    with pytest.raises(ValueError, match="source_outputs"):
        token_balance_errors(doubled, source)
    with pytest.raises(ValueError, match="source_outputs"):
        token_burns(doubled, source)


def test_no_tokens_no_findings() -> None:
    tx, source = _vector("70kn5l")
    plain_source = [dataclasses.replace(source[0], token=None)]
    plain = _retoken(tx, None)
    assert token_balance_errors(plain, plain_source) == []
    assert token_burns(plain, plain_source) == {}


# --- independent check against libauth -------------------------------------------------------


@pytest.mark.node
def test_dust_thresholds_match_libauth() -> None:
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@bitauth" / "libauth").is_dir():
        pytest.skip("node or libauth is not installed")
    tokens: list[TokenData | None] = [
        None,
        SMALL_FT,
        TokenData(CATEGORY, 253),
        TokenData(CATEGORY, 70_000),
        TokenData(CATEGORY, 1 << 40),
        TokenData(CATEGORY, 0, NFT(Capability.MINTING)),
        TokenData(CATEGORY, 9, NFT(Capability.MUTABLE, bytes(40))),
        TokenData(CATEGORY, 0, NFT(Capability.NONE, bytes(128))),
    ]
    lockings = [
        P2PKH,
        P2SH32,
        p2sh20_locking(bytes(20)),
        b"",
        b"\x51",
        b"\x51" * 201,
        b"\x51" * 300,
        b"\x6a" + push_data(b"memo"),
        push_data(KEY33) + b"\xac",
    ]
    outputs = [TxOutput(0, locking, token) for locking in lockings for token in tokens]
    script = (
        "import {getDustThreshold, decodeTransactionOutputs, hexToBin} from '@bitauth/libauth';"
        "import {readFileSync} from 'node:fs';"
        "const outs = decodeTransactionOutputs(hexToBin(readFileSync(0, 'utf8').trim()));"
        "if (typeof outs === 'string') throw new Error(outs);"
        "console.log(JSON.stringify(outs.map((o) => getDustThreshold(o).toString())));"
    )
    result = subprocess.run(
        [node, "--input-type=module", "-e", script],
        input=encode_outputs(outputs).hex(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    theirs = [int(x) for x in json.loads(result.stdout)]
    assert theirs == [dust_threshold(o) for o in outputs]
    assert len(set(theirs)) > 10  # the sizes really vary
