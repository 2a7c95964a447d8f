"""The scenario's building blocks: oracle layouts (the reference's worked examples), registry
publications and CIDs, order splitting (property-based), exact fees, parameters."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.keys import verify_schnorr
from bch.policy import check_fee
from bch.script import pushes
from bch.sighash import signature_digest
from bch.token import TokenData
from bch.tx import OutPoint, TxOutput
from bch.wallet import Wallet
from devnet.scenario.coins import CHANGE_DUST, TOKEN_DUST, Book, Draft, InsufficientFunds, Purse
from devnet.scenario.oracle import (
    DelphiCommitment,
    GpMessage,
    gp_publication,
    parse_gp_publication,
    verify_message,
)
from devnet.scenario.params import PRESETS, ScenarioParams
from devnet.scenario.pools import deposit, split_buy, split_sell
from devnet.scenario.registry import cid_v1_raw, publication_locking
from protocols.cauldron.formulas import PoolState, is_valid_pool_transition

# --- oracle layouts (../shared/reference/oracle-registry-lending.md) ----------------------------


def test_delphi_commitment_worked_example() -> None:
    c = DelphiCommitment(timestamp=1700000000, use_fee=1000, sequence=12345, price=47622)
    assert c.encode().hex() == "00f153650000e8033930000006ba0000"
    assert DelphiCommitment.decode(c.encode()) == c
    with pytest.raises(ValueError):
        DelphiCommitment.decode(bytes(15))


def test_gp_message_worked_example_and_signature() -> None:
    m = GpMessage(timestamp=1700000000, message_sequence=123456, data_sequence=12345, price=47622)
    assert m.encode().hex() == "00f1536540e201003930000006ba0000"
    key = Wallet.from_seed("oracle test key").key
    sig = m.sign(key)
    assert verify_schnorr(key.public_key, hashlib.sha256(m.encode()).digest(), sig)
    assert verify_message(m.encode(), sig, key.public_key)
    other = GpMessage(1700000000, 123456, 12345, 47623)
    assert not verify_message(other.encode(), sig, key.public_key)


def test_gp_publication_layout() -> None:
    key = Wallet.from_seed("oracle test key").key
    m = GpMessage(1700000000, 7, -6, 100)
    locking = gp_publication(m, key)
    assert locking[:6] == b"\x6a\x04GPPM"
    tag, message, sig, pubkey = pushes(locking[1:])
    assert (tag, message, pubkey) == (b"GPPM", m.encode(), key.public_key)
    assert len(sig) == 64
    assert parse_gp_publication(locking) == (m, sig, key.public_key)
    assert parse_gp_publication(locking[:-1]) is None
    assert parse_gp_publication(b"\x6a\x04BCMR") is None


# --- registries ---------------------------------------------------------------------------------


def test_cid_of_the_empty_file() -> None:
    # The well-known CIDv1 (raw, sha2-256) of zero bytes.
    assert cid_v1_raw(b"") == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def test_bcmr_publication_bytes() -> None:
    digest = hashlib.sha256(b"registry").digest()
    raw = publication_locking(digest, ["ipfs://bafk"], "digest")
    assert raw == bytes.fromhex("6a0442434d5220") + digest + b"\x0bipfs://bafk"
    text = publication_locking(digest, ["example.com"], "ascii-hex")
    assert pushes(text[1:]) == [b"BCMR", digest.hex().encode(), b"example.com"]


# --- order splitting ------------------------------------------------------------------------------

pools = st.lists(
    st.builds(PoolState, st.integers(10_000, 10**10), st.integers(1_000, 10**15)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(pools, st.floats(1e-5, 0.3), st.booleans())
def test_split_buy_is_valid_and_tight(
    states: list[PoolState], share: float, exact_out: bool
) -> None:
    sats = max(1, int(share * sum(p.sats for p in states)))
    afters = split_buy(states, sats, exact_out=exact_out)
    assert len(afters) == len(states)
    paid = 0
    for before, after in zip(states, afters, strict=True):
        if after is None:
            continue
        assert after.sats > before.sats and after.tokens < before.tokens
        assert is_valid_pool_transition(before, after)
        # One more token out, or one sat less in, and the contract refuses.
        assert not is_valid_pool_transition(before, PoolState(after.sats, after.tokens - 1))
        if exact_out:
            assert not is_valid_pool_transition(before, PoolState(after.sats - 1, after.tokens))
        paid += after.sats - before.sats
    assert paid <= sats


@settings(max_examples=60, deadline=None)
@given(pools, st.floats(1e-5, 0.3), st.booleans())
def test_split_sell_is_valid_and_keeps_reserves(
    states: list[PoolState], share: float, exact_out: bool
) -> None:
    tokens = max(1, int(share * sum(p.tokens for p in states)))
    afters = split_sell(states, tokens, exact_out=exact_out)
    for before, after in zip(states, afters, strict=True):
        if after is None:
            continue
        assert after.sats < before.sats and after.tokens > before.tokens
        assert after.sats >= 693
        assert is_valid_pool_transition(before, after)
        assert not is_valid_pool_transition(before, PoolState(after.sats - 1, after.tokens))
        if exact_out:
            assert not is_valid_pool_transition(before, PoolState(after.sats, after.tokens - 1))


@given(st.builds(PoolState, st.integers(1_000, 10**10), st.integers(1, 10**15)), st.floats(0, 2))
def test_deposit_grows_both_sides_at_the_same_price(pool: PoolState, share: float) -> None:
    after = deposit(pool, int(pool.sats * share))
    if after is None:
        return
    assert after.sats > pool.sats and after.tokens > pool.tokens
    assert is_valid_pool_transition(pool, after)
    assert (after.tokens - pool.tokens) * pool.sats <= (after.sats - pool.sats) * pool.tokens


# --- fees and signatures --------------------------------------------------------------------------


def test_complete_pays_exactly_one_sat_per_byte_and_books_the_change() -> None:
    alice = Purse("alice", Wallet.from_seed("alice"), "test")
    bob = Purse("bob", Wallet.from_seed("bob"), "test")
    book = Book()
    book.register(alice)
    book.register(bob)
    category = hashlib.sha256(b"a token").digest()
    book.credit(alice, OutPoint(b"\x01" * 32, 0), TxOutput(50_000, alice.locking))
    book.credit(alice, OutPoint(b"\x02" * 32, 1), TxOutput(70_000, alice.locking))
    token = TokenData(category, 500)
    book.credit(alice, OutPoint(b"\x03" * 32, 0), TxOutput(TOKEN_DUST, alice.locking, token))
    draft = Draft()
    draft.pay(TxOutput(90_000, bob.locking))
    draft.spend_tokens(alice, category, 200)
    draft.pay_tokens(bob, category, 200)
    tx = draft.complete(alice)
    sources = draft.source_outputs()
    fee = sum(o.value for o in sources) - sum(o.value for o in tx.outputs)
    assert fee == tx.size()  # 1 sat/byte: the size was known before signing
    assert check_fee(tx, sources) is None
    book.apply(tx)
    assert alice.token_balance(category) == 300 and bob.token_balance(category) == 200
    assert bob.bch_balance() == 90_000
    assert alice.bch_balance() == 50_000 + 70_000 + TOKEN_DUST - 90_000 - TOKEN_DUST * 2 - fee
    # Every input carries alice's BCH Schnorr signature, type ALL|UTXOS|FORKID.
    for i, inp in enumerate(tx.inputs):
        sig, pubkey = pushes(inp.unlocking)
        assert pubkey == alice.wallet.public_key and len(sig) == 65 and sig[-1] == 0x61
        digest = signature_digest(tx, i, sources, 0x61, alice.locking)
        assert verify_schnorr(pubkey, digest, sig[:64])


def test_complete_refuses_what_the_purse_cannot_pay() -> None:
    poor = Purse("poor", Wallet.from_seed("poor"), "test")
    poor.add(OutPoint(b"\x04" * 32, 0), TxOutput(1_000, poor.locking))
    draft = Draft()
    draft.pay(TxOutput(CHANGE_DUST * 2, poor.locking))
    with pytest.raises(InsufficientFunds):
        draft.complete(poor)


# --- parameters ---------------------------------------------------------------------------------


def test_presets_are_valid_and_overrides_ignore_none() -> None:
    assert PRESETS["large"].pools == 2000 and PRESETS["large"].days == 90
    small = PRESETS["small"]
    assert small.replace(seed=None, days=5).days == 5
    assert small.replace(seed=None).seed == small.seed


@pytest.mark.parametrize(
    "bad",
    [
        {"days": 0},
        {"tokens": 5},
        {"block_interval": 10},
        {"max_trade_pools": 400},
        {"oracle_interval": 60, "block_interval": 600},
        {"http_base": "ftp://x"},
        {"traders": 1},
    ],
)
def test_bad_parameters_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ScenarioParams(**bad)  # type: ignore[arg-type]
