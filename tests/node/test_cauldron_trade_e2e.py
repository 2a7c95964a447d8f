"""Acceptance test of the foundation layer: a real two-pool Cauldron trade, built and signed by
`bch` + `protocols.cauldron`, judged by libauth's 2025 and 2026 standard VMs.

Honest trade: valid. Each tamper is re-signed, so the funding input's signature stays good and
the only thing that can fail is the pool covenant (the error must name a pool input). Burning
tokens is valid by consensus, so those variants assert what libauth decides and why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from bch.hashes import sha256
from bch.keys import PrivateKey
from bch.script import push_int
from bch.sighash import SIGHASH_DEFAULT
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from protocols.cauldron.contract import pool_locking_bytecode, redeem_script, trade_unlocking
from protocols.cauldron.formulas import (
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    is_valid_pool_transition,
)
from verify.libauth import LibauthVerifier, VerifyResult

pytestmark = pytest.mark.node

VMS = (2025, 2026)
VALID = VerifyResult(True, None)

# The pool contract as published (cauldron.md), with the pkh spliced between these halves.
REFERENCE_REDEEM_HEAD = "746376a914"
REFERENCE_REDEEM_TAIL = (
    "88ac67c0d1c0ce88c25288c0cdc0c788c0c6c0d095c0c6c0cc9490539502e80396c0cc7c94c0d3957ca268"
)

OWNER_A = PrivateKey.from_int(0xA0A0_0001)
OWNER_B = PrivateKey.from_int(0xB0B0_0002)
BUYER = Wallet(PrivateKey.from_int(0xC0C0_0003))
CATEGORY = sha256(b"ladle e2e cauldron token")  # wire order; libauth needs no genesis for it

POOL_A = PoolState(sats=1_000_000, tokens=50_000_000)
POOL_B = PoolState(sats=2_500_000, tokens=100_000_000)
TOKENS_FROM_A = 2_000_000  # bought with buy_tokens_exact_out
SATS_INTO_B = 150_000  # spent with buy_tokens_exact_in
FUNDING_SATS = 1_000_000
TOKEN_OUTPUT_SATS = 1_000  # above the ~663-sat dust of a P2PKH output carrying an FT amount


@dataclass(frozen=True, slots=True)
class Trade:
    tx: Transaction
    source_outputs: tuple[TxOutput, ...]

    def verify(self, verifier: LibauthVerifier, vm: int) -> VerifyResult:
        return verifier.verify(self.tx, self.source_outputs, vm=vm, standard=True)


def _pool_output(owner: PrivateKey, state: PoolState) -> TxOutput:
    return TxOutput(state.sats, pool_locking_bytecode(owner.pkh), TokenData(CATEGORY, state.tokens))


SOURCE_OUTPUTS = (
    _pool_output(OWNER_A, POOL_A),
    _pool_output(OWNER_B, POOL_B),
    TxOutput(FUNDING_SATS, BUYER.locking_bytecode),
)
INPUTS = (
    TxInput(OutPoint(sha256(b"pool A utxo"), 0), trade_unlocking(OWNER_A.pkh)),
    TxInput(OutPoint(sha256(b"pool B utxo"), 1), trade_unlocking(OWNER_B.pkh)),
    TxInput(OutPoint(sha256(b"buyer funding utxo"), 3)),
)

SATS_INTO_A = buy_tokens_exact_out(POOL_A, TOKENS_FROM_A)
TOKENS_FROM_B = buy_tokens_exact_in(POOL_B, SATS_INTO_B)
NEW_A = PoolState(POOL_A.sats + SATS_INTO_A, POOL_A.tokens - TOKENS_FROM_A)
NEW_B = PoolState(POOL_B.sats + SATS_INTO_B, POOL_B.tokens - TOKENS_FROM_B)
BOUGHT = TOKENS_FROM_A + TOKENS_FROM_B


def _sign(
    inputs: tuple[TxInput, ...], outputs: list[TxOutput], *, schnorr: bool, version: int
) -> Transaction:
    """Sign the funding input (index 2) with ALL|UTXOS|FORKID over exactly these outputs."""
    unsigned = Transaction.build(inputs, outputs, version=version, locktime=0)
    unlocking = BUYER.sign_p2pkh_input(
        unsigned, 2, SOURCE_OUTPUTS, sighash_type=SIGHASH_DEFAULT, schnorr=schnorr
    )
    signed = list(inputs)
    signed[2] = dataclasses.replace(signed[2], unlocking=unlocking)
    return Transaction.build(signed, outputs, version=version, locktime=0)


def _honest_outputs(change: int) -> list[TxOutput]:
    return [
        _pool_output(OWNER_A, NEW_A),
        _pool_output(OWNER_B, NEW_B),
        TxOutput(TOKEN_OUTPUT_SATS, BUYER.locking_bytecode, TokenData(CATEGORY, BOUGHT)),
        TxOutput(change, BUYER.locking_bytecode),
    ]


def build_trade(
    *,
    schnorr: bool,
    tamper: Callable[[list[TxOutput]], list[TxOutput]] = list,
    version: int = 2,
    inputs: tuple[TxInput, ...] = INPUTS,
) -> Trade:
    """The trade at 1 sat/byte (+2 bytes of slack for ECDSA's variable length), then tampered
    and re-signed. A tamper that moves value keeps the transaction balanced itself."""
    spendable = FUNDING_SATS - SATS_INTO_A - SATS_INTO_B - TOKEN_OUTPUT_SATS
    draft = _sign(inputs, _honest_outputs(spendable), schnorr=schnorr, version=version)
    fee = draft.size() + 2
    outputs = tamper(_honest_outputs(spendable - fee))
    return Trade(_sign(inputs, outputs, schnorr=schnorr, version=version), SOURCE_OUTPUTS)


@pytest.fixture(scope="module")
def verifier() -> Iterator[LibauthVerifier]:
    with LibauthVerifier() as v:
        yield v


# --- the honest trade --------------------------------------------------------------------------


def test_pool_contract_is_the_published_one() -> None:
    """libauth runs whatever script we give it, so pin the script to the published contract."""
    for owner in (OWNER_A, OWNER_B):
        expected = REFERENCE_REDEEM_HEAD + owner.pkh.hex() + REFERENCE_REDEEM_TAIL
        assert redeem_script(owner.pkh).hex() == expected
        assert trade_unlocking(owner.pkh) == bytes.fromhex("44" + expected)
    # Worked vector from cauldron.md.
    pkh = bytes.fromhex("b034dc7821b2b25c38b5825cdc4af9e6ace02be7")
    assert pool_locking_bytecode(pkh).hex() == (
        "aa20095f68844b48e2ed5c77a622d8371ac02b3e03d59b185df6278c2a3c09aa6e1187"
    )


def test_trade_amounts_follow_the_contract_predicate() -> None:
    assert SATS_INTO_A > 0
    assert TOKENS_FROM_B > 0
    assert is_valid_pool_transition(POOL_A, NEW_A)
    assert is_valid_pool_transition(POOL_B, NEW_B)
    # Tightest: one sat less into A, or one token more out of B, breaks the predicate.
    assert not is_valid_pool_transition(POOL_A, PoolState(NEW_A.sats - 1, NEW_A.tokens))
    assert not is_valid_pool_transition(POOL_B, PoolState(NEW_B.sats, NEW_B.tokens - 1))


@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
def test_honest_two_pool_trade_is_valid(verifier: LibauthVerifier, schnorr: bool) -> None:
    trade = build_trade(schnorr=schnorr)
    tx = trade.tx
    # Layout of a Cauldron trade.
    assert (tx.version, tx.locktime) == (2, 0)
    assert [len(i.unlocking) for i in tx.inputs[:2]] == [69, 69]
    assert all(i.unlocking[0] == 0x44 for i in tx.inputs[:2])
    assert [o.locking for o in tx.outputs[:2]] == [s.locking for s in SOURCE_OUTPUTS[:2]]
    sig = tx.inputs[2].unlocking[1 : 1 + tx.inputs[2].unlocking[0]]
    assert sig[-1] == 0x61
    assert (len(sig) == 65) is schnorr
    # Tokens are conserved and the transaction pays at least 1 sat per byte (libauth checks
    # neither a burn nor the relay fee).
    token_in = sum(o.token.amount for o in trade.source_outputs if o.token)
    token_out = sum(o.token.amount for o in tx.outputs if o.token)
    assert token_in == token_out
    assert tx.outputs[2].token == TokenData(CATEGORY, BOUGHT)
    fee = sum(o.value for o in trade.source_outputs) - sum(o.value for o in tx.outputs)
    assert tx.size() <= fee <= tx.size() + 3
    for vm in VMS:
        assert trade.verify(verifier, vm) == VALID


# --- tampered trades ---------------------------------------------------------------------------


def _k_decreased_a(outputs: list[TxOutput]) -> list[TxOutput]:
    """Pool A keeps one sat fewer than buy_tokens_exact_out demands; the sat goes to change."""
    outputs[0] = dataclasses.replace(outputs[0], value=outputs[0].value - 1)
    outputs[3] = dataclasses.replace(outputs[3], value=outputs[3].value + 1)
    return outputs


def _k_decreased_b(outputs: list[TxOutput]) -> list[TxOutput]:
    """Pool B gives one token more than buy_tokens_exact_in allows, to the buyer."""
    outputs[1] = dataclasses.replace(outputs[1], token=TokenData(CATEGORY, NEW_B.tokens - 1))
    outputs[2] = dataclasses.replace(outputs[2], token=TokenData(CATEGORY, BOUGHT + 1))
    return outputs


def _pools_swapped(outputs: list[TxOutput]) -> list[TxOutput]:
    """Pools re-created at each other's index: the owners differ, so the bytecode check fails."""
    outputs[0], outputs[1] = outputs[1], outputs[0]
    return outputs


def _token_removed_from_pool(outputs: list[TxOutput]) -> list[TxOutput]:
    """One token taken out of pool B's output and burned (sent nowhere). Pool B's token amount
    came from buy_tokens_exact_in, which is tight in tokens, so one token breaks k."""
    outputs[1] = dataclasses.replace(outputs[1], token=TokenData(CATEGORY, NEW_B.tokens - 1))
    return outputs


def _pool_prefix_dropped(outputs: list[TxOutput]) -> list[TxOutput]:
    """Pool B re-created without any token: its category is then empty, not the pool's."""
    outputs[1] = dataclasses.replace(outputs[1], token=None)
    return outputs


def _other_category(outputs: list[TxOutput]) -> list[TxOutput]:
    """Pool A's output carries a different token (minted nowhere: the VM must refuse)."""
    outputs[0] = dataclasses.replace(
        outputs[0], token=TokenData(sha256(b"another token"), NEW_A.tokens)
    )
    return outputs


# libauth's words for the two ways the trade path fails: one of its OP_EQUALVERIFYs (category,
# version, bytecode), or the final k comparison leaving false on the stack.
EQUALVERIFY_FAILED = "failed an OP_VERIFY operation"
K_FAILED = "completed with a non-truthy value on top of the stack"

TAMPERS: dict[str, tuple[Callable[[list[TxOutput]], list[TxOutput]], int, str]] = {
    # name: (tamper, the pool input whose covenant must fail first, how it fails)
    "k_decreased_pool_a_one_sat": (_k_decreased_a, 0, K_FAILED),
    "k_decreased_pool_b_one_token": (_k_decreased_b, 1, K_FAILED),
    "pools_recreated_at_swapped_indices": (_pools_swapped, 0, EQUALVERIFY_FAILED),
    "token_removed_from_pool_output": (_token_removed_from_pool, 1, K_FAILED),
    "pool_output_without_tokens": (_pool_prefix_dropped, 1, EQUALVERIFY_FAILED),
}


@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
@pytest.mark.parametrize("name", list(TAMPERS))
def test_tampered_trade_is_invalid(verifier: LibauthVerifier, name: str, schnorr: bool) -> None:
    tamper, failing_input, reason = TAMPERS[name]
    trade = build_trade(schnorr=schnorr, tamper=tamper)
    for vm in VMS:
        result = trade.verify(verifier, vm)
        assert not result.valid, (name, vm)
        assert result.error is not None
        assert f"evaluating input index {failing_input}: " in result.error, result.error
        assert reason in result.error, result.error


def test_tampered_pool_states_fail_our_predicate_too() -> None:
    """Our Python predicate agrees with libauth on the amount tampers."""
    assert not is_valid_pool_transition(POOL_A, PoolState(NEW_A.sats - 1, NEW_A.tokens))
    assert not is_valid_pool_transition(POOL_B, PoolState(NEW_B.sats, NEW_B.tokens - 1))
    assert not is_valid_pool_transition(POOL_B, PoolState(NEW_B.sats, 0))


def test_token_removal_boundary_matches_libauth(verifier: LibauthVerifier) -> None:
    """Pool A's amounts came from buy_tokens_exact_out, which is tight in sats; at 0.02 sats
    per token, rounding leaves room in tokens. Straight from cauldron.md's predicate, the pool
    must keep t ≥ cdiv(X·T, out_sats − fee) tokens: burning down to that many is valid (and a
    silent burn is valid by consensus), one more token breaks k, for libauth and for us."""
    fee = (NEW_A.sats - POOL_A.sats) * 3 // 1000
    least = -(-(POOL_A.sats * POOL_A.tokens) // (NEW_A.sats - fee))
    spare = NEW_A.tokens - least
    assert spare >= 1
    for burned, valid in ((spare, True), (spare + 1, False)):

        def burn(outputs: list[TxOutput], n: int = burned) -> list[TxOutput]:
            outputs[0] = dataclasses.replace(
                outputs[0], token=TokenData(CATEGORY, NEW_A.tokens - n)
            )
            return outputs

        after = PoolState(NEW_A.sats, NEW_A.tokens - burned)
        assert is_valid_pool_transition(POOL_A, after) is valid
        trade = build_trade(schnorr=True, tamper=burn)
        for vm in VMS:
            result = trade.verify(verifier, vm)
            assert result.valid is valid, (burned, vm, result.error)
            if not valid:
                assert result.error is not None
                assert "evaluating input index 0: " in result.error
                assert K_FAILED in result.error


@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
def test_version_1_is_invalid(verifier: LibauthVerifier, schnorr: bool) -> None:
    """Version 1 is standard and the signature covers it, so only OP_TXVERSION OP_2 fails."""
    trade = build_trade(schnorr=schnorr, version=1)
    assert trade.tx.version == 1
    for vm in VMS:
        result = trade.verify(verifier, vm)
        assert not result.valid
        assert result.error is not None
        assert "evaluating input index 0: " in result.error, result.error
        assert EQUALVERIFY_FAILED in result.error


@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
def test_extra_push_on_the_trade_path_is_invalid(verifier: LibauthVerifier, schnorr: bool) -> None:
    """Any extra push makes OP_DEPTH non-zero: the owner's branch runs and fails."""
    inputs = list(INPUTS)
    inputs[1] = dataclasses.replace(inputs[1], unlocking=push_int(1) + inputs[1].unlocking)
    trade = build_trade(schnorr=schnorr, inputs=tuple(inputs))
    for vm in VMS:
        result = trade.verify(verifier, vm)
        assert not result.valid
        assert result.error is not None
        assert "evaluating input index 1: " in result.error, result.error


def test_a_foreign_category_in_a_pool_output_is_invalid(verifier: LibauthVerifier) -> None:
    """Token validation rejects it before any script runs: those tokens have no genesis."""
    trade = build_trade(schnorr=True, tamper=_other_category)
    for vm in VMS:
        result = trade.verify(verifier, vm)
        assert not result.valid
        assert result.error is not None
        assert "genesis" in result.error, result.error


@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
def test_burning_the_bought_tokens_is_consensus_valid(
    verifier: LibauthVerifier, schnorr: bool
) -> None:
    """The buyer's token output loses its tokens: the pools are untouched, so every covenant
    holds, and an implicit burn is valid by consensus (CHIP-2022-02) — libauth says VALID.
    Only our own conservation check sees the loss, which is why the router must run it."""

    def burn(outputs: list[TxOutput]) -> list[TxOutput]:
        outputs[2] = dataclasses.replace(outputs[2], token=None)
        return outputs

    trade = build_trade(schnorr=schnorr, tamper=burn)
    for vm in VMS:
        assert trade.verify(verifier, vm) == VALID
    token_in = sum(o.token.amount for o in trade.source_outputs if o.token)
    token_out = sum(o.token.amount for o in trade.tx.outputs if o.token)
    assert token_in - token_out == BOUGHT


def test_unsigned_tamper_fails_at_the_signature(verifier: LibauthVerifier) -> None:
    """Control for the re-signing above: tampering a signed trade without re-signing leaves the
    covenants satisfied (burning the bought tokens) but breaks the funding input's signature."""
    trade = build_trade(schnorr=True)
    outputs = list(trade.tx.outputs)
    outputs[2] = dataclasses.replace(outputs[2], token=None)
    tampered = Transaction.build(trade.tx.inputs, outputs)
    for vm in VMS:
        result = verifier.verify(tampered, trade.source_outputs, vm=vm)
        assert not result.valid
        assert result.error is not None
        assert "evaluating input index 2: " in result.error, result.error
        assert "signature" in result.error
