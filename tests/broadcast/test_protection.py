"""Protection rules on constructed transactions (what the spent outputs hold is given)."""

from __future__ import annotations

import pytest

from bch.script import p2pkh_locking
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from broadcast.protection import (
    FEE_TOO_HIGH,
    NFT_BURN,
    TOKEN_BURN,
    Protection,
    check_protection,
)

LOCK = p2pkh_locking(bytes(20))
CAT = bytes(range(32))
FT = TokenData(CAT, 500)
ART = TokenData(CAT, 0, NFT(Capability.NONE, b"art"))


def tx_of(n_inputs: int, outputs: list[TxOutput]) -> Transaction:
    inputs = [TxInput(OutPoint(bytes([i + 1]) * 32, 0), b"\x00" * 100) for i in range(n_inputs)]
    return Transaction.build(inputs, outputs)


def test_fee_per_byte_above_the_maximum() -> None:
    spent = [TxOutput(100_000, LOCK)]
    tx = tx_of(1, [TxOutput(90_000, LOCK)])
    size = tx.size()
    rules = Protection(max_fee_per_byte=10_000 / size - 0.01)
    [violation] = check_protection(tx, spent, rules)
    assert violation.reason == FEE_TOO_HIGH
    assert violation.details["fee"] == 10_000
    assert violation.details["size"] == size
    assert violation.details["fee_per_byte"] == pytest.approx(10_000 / size, abs=1e-6)
    assert violation.details["max_fee_per_byte"] == rules.max_fee_per_byte
    # exactly at the maximum is allowed
    assert check_protection(tx, spent, Protection(max_fee_per_byte=10_000 / size)) == []


def test_fungible_burn_and_nft_burn_are_separate_rules() -> None:
    spent = [TxOutput(10_000, LOCK, FT), TxOutput(10_000, LOCK, ART)]
    burns_all = tx_of(2, [TxOutput(19_000, LOCK)])
    reasons = [v.reason for v in check_protection(burns_all, spent, Protection(None, True, True))]
    assert reasons == [TOKEN_BURN, NFT_BURN]
    only_ft = check_protection(burns_all, spent, Protection(reject_token_burn=True))
    assert [v.reason for v in only_ft] == [TOKEN_BURN]
    assert only_ft[0].details["tokens_burned"] == [{"category": CAT[::-1].hex(), "amount": "500"}]
    only_nft = check_protection(burns_all, spent, Protection(reject_nft_burn=True))
    assert only_nft[0].details["nfts_burned"] == [{"category": CAT[::-1].hex(), "count": 1}]


def test_partial_fungible_burn_and_kept_nft() -> None:
    spent = [TxOutput(10_000, LOCK, FT), TxOutput(10_000, LOCK, ART)]
    keeps_nft = tx_of(2, [TxOutput(9_000, LOCK, TokenData(CAT, 499)), TxOutput(9_000, LOCK, ART)])
    [v] = check_protection(keeps_nft, spent, Protection(None, True, True))
    assert v.reason == TOKEN_BURN
    assert v.details["tokens_burned"][0]["amount"] == "1"


def test_transfers_pass_every_rule() -> None:
    spent = [TxOutput(10_000, LOCK, FT), TxOutput(10_000, LOCK, ART)]
    moves = tx_of(2, [TxOutput(9_500, LOCK, FT), TxOutput(9_500, LOCK, ART)])
    assert check_protection(moves, spent, Protection(1.0e6, True, True)) == []


@pytest.mark.parametrize(
    "obj",
    [
        {"max_fee_per_byte": -1},
        {"max_fee_per_byte": "5"},
        {"max_fee_per_byte": True},
        {"reject_token_burn": "yes"},
        {"reject_everything": True},
        [],
    ],
)
def test_bad_rule_objects(obj: object) -> None:
    with pytest.raises(ValueError):
        Protection.from_json(obj)


def test_rule_object() -> None:
    rules = Protection.from_json({"max_fee_per_byte": 5, "reject_nft_burn": True})
    assert rules == Protection(5.0, False, True)
    assert rules.active
    assert not Protection.from_json({}).active
