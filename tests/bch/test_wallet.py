"""Wallet: addresses, deterministic seeds, and P2PKH signing checked against the preimage and by
libauth's 2025 VM."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from bch.cashaddr import Address, AddressKind
from bch.hashes import hash160, hash256
from bch.keys import PrivateKey, decode_der, verify_ecdsa, verify_schnorr
from bch.script import p2pkh_locking, pushes
from bch.sighash import SIGHASH_DEFAULT, VALID_SIGHASH_TYPES, signing_preimage
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput, encode_outputs
from bch.wallet import Wallet
from tests.conftest import ROOT

ALICE = Wallet.from_seed("ladle test alice")
BOB = Wallet.from_seed("ladle test bob")
CATEGORY = hashlib.sha256(b"category").digest()


def _spend() -> tuple[Transaction, list[TxOutput]]:
    """Inputs 0 and 2 pay Alice (input 2 with tokens), input 1 pays Bob."""
    token = TokenData(CATEGORY, 1000, NFT(Capability.MUTABLE, b"\xca\xfe"))
    source = [
        TxOutput(50_000, ALICE.locking_bytecode),
        TxOutput(20_000, BOB.locking_bytecode),
        TxOutput(1_000, ALICE.locking_bytecode, token),
    ]
    inputs = [
        TxInput(OutPoint(hashlib.sha256(b"prev%d" % i).digest(), i), b"", 0xFFFFFFFF - i)
        for i in range(3)
    ]
    outputs = [
        TxOutput(1_000, BOB.locking_bytecode, token),
        TxOutput(60_000, ALICE.locking_bytecode),
        TxOutput(9_000, b"\x6a\x04test"),
    ]
    return Transaction.build(inputs, outputs), source


def _check_input(tx: Transaction, source: list[TxOutput], index: int, wallet: Wallet) -> int:
    """Verify input `index` independently; return its sighash type."""
    sig, pubkey = pushes(tx.inputs[index].unlocking)
    assert pubkey == wallet.public_key
    assert p2pkh_locking(hash160(pubkey)) == source[index].locking
    sighash_type = sig[-1]
    digest = hash256(signing_preimage(tx, index, source, sighash_type, source[index].locking))
    if len(sig) == 65:
        assert verify_schnorr(pubkey, digest, sig[:-1])
    else:
        decode_der(sig[:-1])
        assert verify_ecdsa(pubkey, digest, sig[:-1])
    return sighash_type


def test_default_signs_only_this_wallets_inputs() -> None:
    tx, source = _spend()
    signed = ALICE.sign_transaction(tx, source)
    assert signed.inputs[1].unlocking == b""
    for index in (0, 2):
        assert _check_input(signed, source, index, ALICE) == SIGHASH_DEFAULT
        assert len(pushes(signed.inputs[index].unlocking)[0]) == 65  # Schnorr by default
    # Everything but the unlocking bytecode is unchanged.
    assert signed.outputs == tx.outputs and signed.locktime == tx.locktime
    assert [i.outpoint for i in signed.inputs] == [i.outpoint for i in tx.inputs]
    assert [i.sequence for i in signed.inputs] == [i.sequence for i in tx.inputs]
    fully = BOB.sign_transaction(signed, source)
    assert _check_input(fully, source, 1, BOB) == SIGHASH_DEFAULT
    assert fully.inputs[0] == signed.inputs[0] and fully.inputs[2] == signed.inputs[2]
    # The result is a fresh transaction: its bytes parse back to itself.
    assert Transaction.from_bytes(fully.to_bytes()) == fully


@pytest.mark.parametrize("schnorr", [True, False])
@pytest.mark.parametrize("sighash_type", sorted(VALID_SIGHASH_TYPES))
def test_every_sighash_type_and_algorithm(sighash_type: int, schnorr: bool) -> None:
    tx, source = _spend()
    signed = ALICE.sign_transaction(tx, source, [2], sighash_type=sighash_type, schnorr=schnorr)
    assert signed.inputs[0].unlocking == b""
    assert _check_input(signed, source, 2, ALICE) == sighash_type
    sig = pushes(signed.inputs[2].unlocking)[0]
    assert (len(sig) == 65) is schnorr
    unlocking = ALICE.sign_p2pkh_input(tx, 2, source, sighash_type=sighash_type, schnorr=schnorr)
    assert unlocking == signed.inputs[2].unlocking  # deterministic signatures


def test_signature_does_not_verify_for_another_input_or_tampered_tx() -> None:
    tx, source = _spend()
    signed = ALICE.sign_transaction(tx, source, [0])
    sig = pushes(signed.inputs[0].unlocking)[0][:-1]
    other = hash256(signing_preimage(tx, 2, source, SIGHASH_DEFAULT, source[2].locking))
    assert not verify_schnorr(ALICE.public_key, other, sig)
    changed = [source[0], source[1], TxOutput(999, source[2].locking, source[2].token)]
    digest = hash256(signing_preimage(tx, 0, changed, SIGHASH_DEFAULT, source[0].locking))
    assert not verify_schnorr(ALICE.public_key, digest, sig)  # 0x61 covers every spent UTXO


def test_refuses_inputs_it_cannot_unlock() -> None:
    tx, source = _spend()
    with pytest.raises(ValueError):
        ALICE.sign_p2pkh_input(tx, 1, source)
    with pytest.raises(ValueError):
        ALICE.sign_transaction(tx, source, [1])
    with pytest.raises(ValueError):
        ALICE.sign_p2pkh_input(tx, 3, source)
    with pytest.raises(ValueError):
        ALICE.sign_p2pkh_input(tx, 0, source[:2])
    with pytest.raises(ValueError):
        ALICE.sign_p2pkh_input(tx, 0, source, sighash_type=0x01)


def test_from_seed_is_deterministic() -> None:
    assert Wallet.from_seed("ladle test alice") == ALICE
    assert Wallet.from_seed(b"ladle test alice") == ALICE
    assert ALICE.key.secret == hashlib.sha256(b"ladle test alice").digest()
    assert ALICE != BOB and ALICE.pkh != BOB.pkh
    assert Wallet.from_seed("x", prefix="bchreg").key == Wallet.from_seed("x").key


def test_addresses() -> None:
    one = Wallet(PrivateKey.from_int(1))
    assert one.pkh.hex() == "751e76e8199196d454941c45d1b3a323f1433bd6"
    assert one.public_key == PrivateKey.from_int(1).public_key
    assert one.locking_bytecode == bytes.fromhex(
        "76a914751e76e8199196d454941c45d1b3a323f1433bd688ac"
    )
    # Encoded independently with libauth's encodeCashAddress.
    assert one.address == "bitcoincash:qp63uahgrxged4z5jswyt5dn5v3lzsem6cy4spdc2h"
    assert one.token_address == "bitcoincash:zp63uahgrxged4z5jswyt5dn5v3lzsem6crlrlr74y"
    test = Wallet(one.key, "bchtest")
    assert test.address == "bchtest:qp63uahgrxged4z5jswyt5dn5v3lzsem6cq85x00dt"
    assert Wallet(one.key, "bchreg").token_address == (
        "bchreg:zp63uahgrxged4z5jswyt5dn5v3lzsem6ca33ez637"
    )
    decoded = Address.decode(ALICE.token_address)
    assert (decoded.kind, decoded.hash, decoded.token_aware) == (
        AddressKind.P2PKH,
        ALICE.pkh,
        True,
    )
    with pytest.raises(ValueError):
        Wallet(one.key, "bitcoin")


_NODE_VERIFY = """
import { createVirtualMachineBch2025, decodeTransaction, decodeTransactionOutputs,
  hexToBin } from '@bitauth/libauth';
const [txHex, outsHex] = JSON.parse(process.argv[1]);
const vm = createVirtualMachineBch2025(true);
const transaction = decodeTransaction(hexToBin(txHex));
const sourceOutputs = decodeTransactionOutputs(hexToBin(outsHex));
if (typeof transaction === 'string' || typeof sourceOutputs === 'string')
  console.log(JSON.stringify(String(transaction) + String(sourceOutputs)));
else console.log(JSON.stringify(vm.verify({ sourceOutputs, transaction })));
"""


def _libauth_verify(tx: Transaction, source: list[TxOutput]) -> object:
    result = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            _NODE_VERIFY,
            json.dumps([tx.hex(), encode_outputs(source).hex()]),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


@pytest.mark.node
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
def test_signed_transactions_pass_libauth_2025_vm() -> None:
    tx, source = _spend()
    schnorr = BOB.sign_transaction(ALICE.sign_transaction(tx, source), source)
    assert _libauth_verify(schnorr, source) is True
    mixed = BOB.sign_transaction(
        ALICE.sign_transaction(tx, source, schnorr=False, sighash_type=0xC3),
        source,
        sighash_type=0x42,
    )
    assert _libauth_verify(mixed, source) is True
    # Control: a signature over different spent values must fail in the VM too.
    wrong = [TxOutput(49_999, source[0].locking), *source[1:]]
    forged = BOB.sign_transaction(ALICE.sign_transaction(tx, wrong), wrong)
    verdict = _libauth_verify(forged, source)
    assert isinstance(verdict, str) and "input index 0" in verdict and "signature" in verdict
