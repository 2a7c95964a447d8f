"""Recognising Cauldron pools in real transactions built with `bch.tx`.

Every transaction is also serialized and parsed back before detection, so what is tested is what
the indexer sees from a block or the mempool. Detection is structural: dummy 65-byte signatures
and 33-byte keys stand in for real ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from bch.script import p2pkh_locking, push_data
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.cauldron.contract import pool_locking_bytecode, redeem_script, trade_unlocking
from protocols.cauldron.detect import (
    NO_ACTIVITY,
    Anomaly,
    CauldronActivity,
    IgnoredOutput,
    KnownOwners,
    PoolCreation,
    PoolSpend,
    Summon,
    detect,
    is_pool_utxo,
    is_trade_path,
    parse_summon,
    pool_spend_pkh,
    pool_transition,
)
from protocols.cauldron.formulas import PoolState, classify_change
from tests.conftest import load_vectors

A = bytes.fromhex("b034dc7821b2b25c38b5825cdc4af9e6ace02be7")
B = bytes([0x11]) * 20
C = bytes([0x22]) * 20
USER = bytes([0x33]) * 20
CAT = bytes(range(32))
CAT2 = bytes(range(32, 64))
SIG = bytes([0x30]) * 65
PUBKEY = bytes([0x02]) + bytes([0x44]) * 32


def outpoint(n: int) -> OutPoint:
    return OutPoint(bytes([n]) * 32, n % 3)


def pool_in(pkh: bytes, n: int) -> TxInput:
    return TxInput(outpoint(n), trade_unlocking(pkh))


def withdraw_in(pkh: bytes, n: int) -> TxInput:
    return TxInput(outpoint(n), push_data(SIG) + push_data(PUBKEY) + push_data(redeem_script(pkh)))


def funding_in(n: int) -> TxInput:
    return TxInput(outpoint(n), push_data(SIG) + push_data(PUBKEY))


def pool_out(pkh: bytes, sats: int = 10_000, amount: int = 500, category: bytes = CAT) -> TxOutput:
    return TxOutput(sats, pool_locking_bytecode(pkh), TokenData(category, amount))


def summon(pkh: bytes) -> TxOutput:
    return TxOutput(0, b"\x6a\x06SUMMON\x14" + pkh)


def pay(sats: int = 5_000, token: TokenData | None = None) -> TxOutput:
    return TxOutput(sats, p2pkh_locking(USER), token)


def run(
    inputs: list[TxInput],
    outputs: list[TxOutput],
    known: Any = frozenset(),
    version: int = 2,
) -> CauldronActivity:
    tx = Transaction.build(inputs, outputs, version=version)
    parsed = Transaction.from_bytes(tx.to_bytes())
    assert parsed == tx
    return detect(parsed, known)


# --- primitives --------------------------------------------------------------------------------


def test_pool_spend_pkh_trade_and_withdraw() -> None:
    trade = trade_unlocking(A)
    assert pool_spend_pkh(trade) == A
    assert is_trade_path(trade)
    withdraw = push_data(SIG) + push_data(PUBKEY) + trade
    assert pool_spend_pkh(withdraw) == A
    assert not is_trade_path(withdraw)


@pytest.mark.parametrize(
    "unlocking",
    [
        b"",
        trade_unlocking(A)[1:],  # no push opcode
        b"\x4c\x44" + redeem_script(A),  # OP_PUSHDATA1: not the 0x44 direct push
        trade_unlocking(A)[:-1] + b"\x69",  # suffix changed (OP_VERIFY instead of OP_ENDIF)
        b"\x44\x74\x63\x76\xa9\x15" + A + redeem_script(A)[25:],  # prefix changed
        # The pattern inside one longer push: the script's real last push is something else.
        push_data(bytes(30) + trade_unlocking(A)),
        # A PUSHDATA1 whose length byte swallows the pattern's 0x44.
        push_data(SIG) + b"\x4c" + trade_unlocking(A),
    ],
    ids=[
        "empty",
        "no-push",
        "pushdata1",
        "suffix-changed",
        "prefix-changed",
        "inside-a-push",
        "swallowed-push-byte",
    ],
)
def test_pool_spend_pkh_rejects_lookalikes(unlocking: bytes) -> None:
    assert pool_spend_pkh(unlocking) is None
    assert not is_trade_path(unlocking)


def test_parse_summon() -> None:
    assert parse_summon(summon(B).locking) == B
    assert parse_summon(summon(B).locking + b"\x00") is None
    assert parse_summon(summon(B).locking[:-1]) is None
    assert parse_summon(b"\x6a\x06SUMMOM\x14" + B) is None
    assert parse_summon(b"\x6a\x06SUMMON\x15" + B + b"\x00") is None
    assert parse_summon(p2pkh_locking(B)) is None


def test_is_pool_utxo() -> None:
    assert is_pool_utxo(pool_out(A), A)
    assert not is_pool_utxo(pool_out(A), B)  # someone else's pool bytecode
    assert not is_pool_utxo(TxOutput(10_000, pool_locking_bytecode(A)), A)
    nft = NFT(Capability.NONE, b"\x01")
    assert not is_pool_utxo(TxOutput(10_000, pool_locking_bytecode(A), TokenData(CAT, 5, nft)), A)
    assert not is_pool_utxo(TxOutput(10_000, pool_locking_bytecode(A), TokenData(CAT, 0, nft)), A)
    assert not is_pool_utxo(TxOutput(10_000, p2pkh_locking(A), TokenData(CAT, 5)), A)


def test_pool_transition() -> None:
    before, after = pool_transition(pool_out(A, 10_000, 500), pool_out(A, 10_102, 495))
    assert (before, after) == (PoolState(10_000, 500), PoolState(10_102, 495))
    assert classify_change(before, after) == "buy"
    with pytest.raises(ValueError, match="category"):
        pool_transition(pool_out(A), pool_out(A, category=CAT2))
    with pytest.raises(ValueError, match="locking"):
        pool_transition(pool_out(A), pool_out(B))
    with pytest.raises(ValueError, match="tokens"):
        pool_transition(pool_out(A), TxOutput(10_000, pool_locking_bytecode(A)))


# --- whole transactions ------------------------------------------------------------------------


def test_trade_against_two_pools() -> None:
    got = run(
        [pool_in(A, 1), pool_in(B, 2), funding_in(3)],
        [pool_out(A, 10_102, 495), pool_out(B, 9_000, 560), pay(token=TokenData(CAT, 5)), pay()],
    )
    assert got == CauldronActivity(
        spends=(PoolSpend(0, "trade", A, 0), PoolSpend(1, "trade", B, 1)),
    )


def test_summon_creation() -> None:
    got = run([funding_in(1)], [pool_out(A), summon(A), pay()])
    assert got == CauldronActivity(
        created=(PoolCreation(0, A, "summon"),),
        summons=(Summon(1, A),),
    )


def test_summon_without_matching_output() -> None:
    got = run([funding_in(1)], [pool_out(A), summon(B), pay()])
    # The pool output pays A, not the summoned B, and A is not known: nothing is created.
    assert got == CauldronActivity(summons=(Summon(1, B),))


def test_summon_with_outputs_that_are_not_pools() -> None:
    nft = NFT(Capability.MUTABLE, b"\xbe\xef")
    got = run(
        [funding_in(1)],
        [
            TxOutput(10_000, pool_locking_bytecode(A)),  # no token at all
            TxOutput(10_000, pool_locking_bytecode(A), TokenData(CAT, 7, nft)),  # FT + NFT
            TxOutput(10_000, pool_locking_bytecode(A), TokenData(CAT, 0, nft)),  # NFT only
            pool_out(A, amount=1),  # the one real pool
            summon(A),
        ],
    )
    assert got == CauldronActivity(
        created=(PoolCreation(3, A, "summon"),),
        summons=(Summon(4, A),),
        ignored=(
            IgnoredOutput(0, "no_fungible_token"),
            IgnoredOutput(1, "has_nft"),
            IgnoredOutput(2, "has_nft"),
        ),
    )


def test_withdraw_ends_the_pool_and_recreates() -> None:
    got = run(
        [withdraw_in(A, 1), funding_in(2)],
        [pay(token=TokenData(CAT, 100)), pool_out(A, 20_000, 400), pay()],
    )
    assert got == CauldronActivity(
        spends=(PoolSpend(0, "withdraw", A, None),),
        created=(PoolCreation(1, A, "withdraw_recreate"),),
    )


def test_withdraw_without_recreation() -> None:
    got = run([withdraw_in(A, 1)], [pay(token=TokenData(CAT, 500))])
    assert got == CauldronActivity(spends=(PoolSpend(0, "withdraw", A, None),))


def test_known_owner_creation_without_marker() -> None:
    inputs, outputs = [funding_in(1)], [pay(), pool_out(C)]
    assert run(inputs, outputs) is NO_ACTIVITY  # invisible until first spent (rule 4)
    expected = CauldronActivity(created=(PoolCreation(1, C, "known_owner"),))
    assert run(inputs, outputs, frozenset({C, B})) == expected
    assert run(inputs, outputs, KnownOwners([B, C])) == expected
    assert run(inputs, outputs, KnownOwners([B])) is NO_ACTIVITY


def test_trade_reveals_owner_of_an_extra_pool_output() -> None:
    got = run(
        [pool_in(A, 1), funding_in(2)],
        [pool_out(A, 10_102, 495), pay(), pool_out(A, 5_000, 50, category=CAT2)],
    )
    assert got == CauldronActivity(
        spends=(PoolSpend(0, "trade", A, 0),),
        created=(PoolCreation(2, A, "known_owner"),),
    )


def test_mixed_trade_withdraw_and_creation() -> None:
    got = run(
        [pool_in(B, 1), withdraw_in(A, 2), funding_in(3)],
        [pool_out(B, 12_000, 420), pool_out(A, 1_000, 10), summon(C), pool_out(C), pay()],
        KnownOwners([A]),
    )
    assert got == CauldronActivity(
        spends=(PoolSpend(0, "trade", B, 0), PoolSpend(1, "withdraw", A, None)),
        created=(PoolCreation(1, A, "withdraw_recreate"), PoolCreation(3, C, "summon")),
        summons=(Summon(2, C),),
    )


@pytest.mark.parametrize(
    ("continuation", "reason", "ignored"),
    [
        (TxOutput(10_000, pool_locking_bytecode(A)), "continuation_not_pool", "no_fungible_token"),
        (
            TxOutput(10_000, pool_locking_bytecode(A), TokenData(CAT, 9, NFT())),
            "continuation_not_pool",
            "has_nft",
        ),
        (pay(token=TokenData(CAT, 500)), "continuation_wrong_bytecode", None),
        (pool_out(B), "continuation_wrong_bytecode", None),
    ],
)
def test_trade_continuation_anomalies(
    continuation: TxOutput, reason: str, ignored: str | None
) -> None:
    got = run([pool_in(A, 1), funding_in(2)], [continuation, pay()])
    assert got.spends == (PoolSpend(0, "trade", A, None),)
    assert got.anomalies == (Anomaly(0, reason),)  # type: ignore[arg-type]
    assert got.ignored == (() if ignored is None else (IgnoredOutput(0, ignored),))  # type: ignore[arg-type]
    assert got.created == ()


def test_trade_continuation_missing() -> None:
    got = run([funding_in(1), pool_in(A, 2)], [pay()])
    assert got == CauldronActivity(
        spends=(PoolSpend(1, "trade", A, None),),
        anomalies=(Anomaly(1, "continuation_missing"),),
    )


def test_trade_in_a_version_1_transaction_is_flagged() -> None:
    got = run([pool_in(A, 1)], [pool_out(A)], version=1)
    assert got == CauldronActivity(
        spends=(PoolSpend(0, "trade", A, 0),),
        anomalies=(Anomaly(0, "version_not_2"),),
    )


def test_lookalike_input_is_not_a_spend() -> None:
    hidden = push_data(SIG) + push_data(bytes(30) + trade_unlocking(A))
    got = run([TxInput(outpoint(1), hidden)], [pool_out(A), pay()])
    assert got.is_empty


def test_known_owners_collection() -> None:
    owners = KnownOwners([A])
    owners.add(B)
    owners.add(B)
    assert len(owners) == 2
    assert set(owners) == {A, B}
    assert A in owners and B in owners
    assert C not in owners
    assert b"short" not in owners
    assert owners.owner_of(pool_locking_bytecode(B)) == B
    assert owners.owner_of(pool_locking_bytecode(C)) is None


# --- non-Cauldron transactions -----------------------------------------------------------------


def test_cashtokens_vectors_detect_nothing() -> None:
    vectors = load_vectors("vmb/bch_2025_standard.core.cashtokens.vmb_tests.json")
    owners = KnownOwners([A, B, C, bytes(20)])
    checked = 0
    for vector in vectors:
        tx = Transaction.from_hex(vector[4])
        assert detect(tx) is NO_ACTIVITY, vector[0]
        assert detect(tx, owners) is NO_ACTIVITY, vector[0]
        checked += 1
    assert checked > 500


def test_plain_payment_takes_the_fast_path() -> None:
    tx = Transaction.build([funding_in(1)], [pay(), pay(token=TokenData(CAT, 5))])
    assert detect(tx) is NO_ACTIVITY
    assert detect(tx, {A}) is NO_ACTIVITY
