"""The Cauldron contract's bytes, addresses and unlocking, and the contract run in libauth's VM.

The redeem script is re-assembled here from the reference's opcode listing; the worked vectors
come from the reference (cross-checked there) or, where marked, from libauth. The VM test runs
real trade transactions against the real P2SH32 pool in libauth's 2025 VM, which is the
independent check that `is_valid_pool_transition` is what the contract enforces.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator

import pytest

from bch.cashaddr import Address, AddressKind
from bch.script import electrum_scripthash, pushes
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.cauldron.contract import (
    REDEEM_PREFIX,
    REDEEM_SUFFIX,
    owner_address,
    pool_address,
    pool_locking_bytecode,
    redeem_script,
    trade_unlocking,
)
from protocols.cauldron.formulas import (
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    is_valid_pool_transition,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)
from verify.libauth import LibauthVerifier

PKH = bytes.fromhex("b034dc7821b2b25c38b5825cdc4af9e6ace02be7")
ZERO_PKH = bytes(20)

# Opcode values from the BCH VM specification (CashTokens and introspection codes included).
OPCODES = {
    "OP_2": 0x52,
    "OP_3": 0x53,
    "OP_IF": 0x63,
    "OP_ELSE": 0x67,
    "OP_ENDIF": 0x68,
    "OP_DEPTH": 0x74,
    "OP_DUP": 0x76,
    "OP_SWAP": 0x7C,
    "OP_EQUALVERIFY": 0x88,
    "OP_ABS": 0x90,
    "OP_SUB": 0x94,
    "OP_MUL": 0x95,
    "OP_DIV": 0x96,
    "OP_GREATERTHANOREQUAL": 0xA2,
    "OP_HASH160": 0xA9,
    "OP_CHECKSIG": 0xAC,
    "OP_INPUTINDEX": 0xC0,
    "OP_TXVERSION": 0xC2,
    "OP_UTXOVALUE": 0xC6,
    "OP_UTXOBYTECODE": 0xC7,
    "OP_OUTPUTVALUE": 0xCC,
    "OP_OUTPUTBYTECODE": 0xCD,
    "OP_UTXOTOKENCATEGORY": 0xCE,
    "OP_UTXOTOKENAMOUNT": 0xD0,
    "OP_OUTPUTTOKENCATEGORY": 0xD1,
    "OP_OUTPUTTOKENAMOUNT": 0xD3,
}

# The reference's opcode listing, verbatim.
LISTING = """OP_DEPTH OP_IF OP_DUP OP_HASH160 <pkh> OP_EQUALVERIFY OP_CHECKSIG OP_ELSE OP_INPUTINDEX
OP_OUTPUTTOKENCATEGORY OP_INPUTINDEX OP_UTXOTOKENCATEGORY OP_EQUALVERIFY OP_TXVERSION OP_2
OP_EQUALVERIFY OP_INPUTINDEX OP_OUTPUTBYTECODE OP_INPUTINDEX OP_UTXOBYTECODE OP_EQUALVERIFY
OP_INPUTINDEX OP_UTXOVALUE OP_INPUTINDEX OP_UTXOTOKENAMOUNT OP_MUL OP_INPUTINDEX OP_UTXOVALUE
OP_INPUTINDEX OP_OUTPUTVALUE OP_SUB OP_ABS OP_3 OP_MUL <1000> OP_DIV OP_INPUTINDEX OP_OUTPUTVALUE
OP_SWAP OP_SUB OP_INPUTINDEX OP_OUTPUTTOKENAMOUNT OP_MUL OP_SWAP OP_GREATERTHANOREQUAL OP_ENDIF"""


def assemble(listing: str, pkh: bytes) -> bytes:
    out = bytearray()
    for word in listing.split():
        if word == "<pkh>":
            out += bytes((len(pkh),)) + pkh
        elif word == "<1000>":
            out += bytes((2,)) + (1000).to_bytes(2, "little")  # minimal script number
        else:
            out.append(OPCODES[word])
    return bytes(out)


# --- bytes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pkh", [PKH, ZERO_PKH, bytes(range(20))])
def test_redeem_script_is_the_listing(pkh: bytes) -> None:
    redeem = redeem_script(pkh)
    assert redeem == assemble(LISTING, pkh)
    assert len(redeem) == 68
    assert redeem == REDEEM_PREFIX + pkh + REDEEM_SUFFIX
    assert len(REDEEM_PREFIX) == 5
    assert len(REDEEM_SUFFIX) == 43


def test_worked_vector() -> None:
    locking = pool_locking_bytecode(PKH)
    assert locking.hex() == "aa20095f68844b48e2ed5c77a622d8371ac02b3e03d59b185df6278c2a3c09aa6e1187"
    assert (
        electrum_scripthash(locking)
        == "95e37f7ec48a47415396bc46ead04e296aa584137449547a4304e6b5a330efac"
    )
    assert (
        pool_address(PKH)
        == "bitcoincash:rvy476yyfdyw9m2uw7nz9kphrtqzk0sr6kd3sh0ky7xz50qf4fhpzw8rgvlmz"
    )


def test_zero_pkh_vector() -> None:
    assert (
        pool_locking_bytecode(ZERO_PKH).hex()
        == "aa20416963a62a6389230e2b6bb2058799415f8b7f4079ce99690ed5079156f8e74187"
    )
    # From libauth's lockingBytecodeToCashAddress({bytecode, prefix: "bchtest", tokenSupport}).
    assert (
        pool_address(ZERO_PKH, prefix="bchtest")
        == "bchtest:rdqkjcax9f3cjgcw9d4mypv8n9q4lzmlgpuuaxtfpm2s0y2klrn5z8k8g2hyt"
    )


@pytest.mark.parametrize("pkh", [PKH, ZERO_PKH, b"\xff" * 20])
def test_locking_is_p2sh32_of_double_sha256(pkh: bytes) -> None:
    redeem = assemble(LISTING, pkh)
    digest = hashlib.sha256(hashlib.sha256(redeem).digest()).digest()
    locking = pool_locking_bytecode(pkh)
    assert locking == b"\xaa\x20" + digest + b"\x87"
    assert len(locking) == 35
    assert electrum_scripthash(locking) == hashlib.sha256(locking).digest()[::-1].hex()


def test_owner_address() -> None:
    # From libauth's encodeCashAddress({type: "p2pkhWithTokens", payload: pkh, prefix}).
    assert owner_address(PKH) == "bitcoincash:zzcrfhrcyxetyhpckkp9ehz2l8n2ecptuuqhmd6af9"
    assert (
        owner_address(PKH, prefix="bchtest") == "bchtest:zzcrfhrcyxetyhpckkp9ehz2l8n2ecptuuy9l2c2we"
    )
    assert owner_address(ZERO_PKH) == "bitcoincash:zqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqweyg7usz"


def test_addresses_decode_to_the_pool_and_owner() -> None:
    pool = Address.decode(pool_address(PKH, prefix="bchreg"))
    assert (pool.kind, pool.token_aware, pool.prefix) == (AddressKind.P2SH32, True, "bchreg")
    assert pool.locking_bytecode() == pool_locking_bytecode(PKH)
    owner = Address.decode(owner_address(PKH))
    assert (owner.kind, owner.token_aware, owner.hash) == (AddressKind.P2PKH, True, PKH)


def test_trade_unlocking_is_one_push_of_the_redeem_script() -> None:
    unlocking = trade_unlocking(PKH)
    assert len(unlocking) == 69
    assert unlocking[0] == 0x44
    assert unlocking[1:] == redeem_script(PKH)
    assert pushes(unlocking) == [redeem_script(PKH)]


@pytest.mark.parametrize("bad", [b"", bytes(19), bytes(21), bytes(32)])
def test_wrong_pkh_length_is_refused(bad: bytes) -> None:
    for build in (redeem_script, pool_locking_bytecode, trade_unlocking, pool_address):
        with pytest.raises(ValueError, match="20 bytes"):
            build(bad)
    with pytest.raises(ValueError):
        owner_address(bad)


# --- the contract in libauth's VM --------------------------------------------------------------

CATEGORY = bytes.fromhex("c0ffee" * 10 + "00c0")
ANYONE = bytes((0x51,))  # OP_1: a funding output anyone can spend (nonstandard VM only)


def trade(
    before: PoolState, after: PoolState, version: int = 2
) -> tuple[Transaction, list[TxOutput]]:
    """A transaction moving the pool from `before` to `after`; a funding input covers the rest.

    Surplus sats are the miner fee and surplus tokens are burnt (both valid by consensus), so the
    only rule that can fail is the pool contract's.
    """
    locking = pool_locking_bytecode(PKH)
    pool_utxo = TxOutput(before.sats, locking, TokenData(CATEGORY, before.tokens))
    fund_tokens = max(after.tokens - before.tokens, 0) + 1
    fund_utxo = TxOutput(
        max(after.sats - before.sats, 0) + 1000, ANYONE, TokenData(CATEGORY, fund_tokens)
    )
    token = TokenData(CATEGORY, after.tokens) if after.tokens > 0 else None
    tx = Transaction.build(
        [
            TxInput(OutPoint(bytes([1]) * 32, 0), trade_unlocking(PKH)),
            TxInput(OutPoint(bytes([2]) * 32, 1), b""),
        ],
        [TxOutput(after.sats, locking, token)],
        version=version,
    )
    return tx, [pool_utxo, fund_utxo]


def vm_cases() -> Iterator[tuple[PoolState, PoolState]]:
    """Formula results and their ±1 neighbours, random moves, and the structural edge cases."""
    rng = random.Random(20250515)
    for _ in range(12):
        x = rng.choice([693, 1000, 123_456, 10**8, 10**12, 10**15]) + rng.randrange(1000)
        t = rng.choice([2, 3, 1000, 10**6, 2**40, 2**62]) + rng.randrange(1000)
        pool = PoolState(x, t)
        d = rng.randrange(1, t // 2 + 1)  # at most half: the price stays under 21e14 sats
        pay = buy_tokens_exact_out(pool, d)
        yield pool, PoolState(x + pay, t - d)
        yield pool, PoolState(x + pay - 1, t - d)
        pay = rng.randrange(1, 10**9)
        got = buy_tokens_exact_in(pool, pay)
        yield pool, PoolState(x + pay, t - got)
        yield pool, PoolState(x + pay, t - got - 1)
        s = rng.randrange(1, 10**9)
        got = sell_tokens_exact_in(pool, s)
        yield pool, PoolState(x - got, t + s)
        yield pool, PoolState(x - got - 1, t + s)
        out = rng.randrange(1, x // 2)
        s = sell_tokens_exact_out(pool, out)
        yield pool, PoolState(x - out, t + s)
        yield pool, PoolState(x - out, t + s - 1)
        yield pool, PoolState(x + rng.randrange(10**6), t - rng.randrange(3))
    pool = PoolState(10_000, 100)
    yield pool, PoolState(10_100, 101)  # deposit
    yield pool, pool  # unchanged
    yield pool, PoolState(9_999, 100)  # drain
    yield pool, PoolState(10**9, 1)  # last token kept
    yield pool, PoolState(10**9, 0)  # no token prefix: empty category ≠ the pool's


@pytest.mark.node
def test_vm_accepts_exactly_what_the_predicate_accepts() -> None:
    verdicts = {True: 0, False: 0}
    with LibauthVerifier() as verifier:
        for before, after in vm_cases():
            tx, utxos = trade(before, after)
            result = verifier.verify(tx, utxos, vm=2025, standard=False)
            expected = is_valid_pool_transition(before, after)
            assert result.valid == expected, (before, after, result.error)
            if not expected:  # the pool input's script failed, not the transaction's shape
                assert result.error is not None
                assert "evaluating input index 0" in result.error, result.error
            verdicts[expected] += 1
        # The trade path also requires version 2.
        tx, utxos = trade(PoolState(10_000, 100), PoolState(10_100, 101), version=1)
        result = verifier.verify(tx, utxos, vm=2025, standard=False)
        assert not result.valid
        assert "evaluating input index 0" in (result.error or "")
    assert verdicts[True] > 40
    assert verdicts[False] > 40
