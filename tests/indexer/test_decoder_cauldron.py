"""Units of the Cauldron decoder's pure helpers that have a fast path: the funding address of a
trade read from a P2PKH unlocking bytecode, known-owner membership, and a change's kind from
its deltas."""

from __future__ import annotations

import hashlib

import pytest

from bch.script import push_data
from indexer.decoders.cauldron.decode import OwnerOverlay, p2pkh_spender
from protocols.cauldron.detect import KnownOwners


def _hash160(data: bytes) -> bytes:
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


KEY33 = b"\x02" + bytes(range(32))
KEY65 = b"\x04" + bytes(range(64))


@pytest.mark.parametrize("sig_len", [9, 65, 71, 73])
@pytest.mark.parametrize("key", [KEY33, KEY65], ids=["33", "65"])
def test_p2pkh_spender_reads_the_pushed_key(sig_len: int, key: bytes) -> None:
    unlocking = bytes((sig_len,)) + b"\x30" * sig_len + bytes((len(key),)) + key
    assert p2pkh_spender(unlocking) == _hash160(key)
    pushdata1 = b"\x4c" + bytes((sig_len,)) + b"\x30" * sig_len + push_data(key)
    assert p2pkh_spender(pushdata1) == _hash160(key)  # same pushes, other encoding


@pytest.mark.parametrize(
    "unlocking",
    [
        b"",
        bytes((8,)) + b"\x30" * 8 + b"\x21" + KEY33,  # signature too short
        bytes((74,)) + b"\x30" * 74 + b"\x21" + KEY33,  # too long
        b"\x47" + b"\x30" * 71 + b"\x21" + b"\x04" + KEY33[1:],  # 33 bytes must start 02/03
        b"\x47" + b"\x30" * 71 + b"\x41" + b"\x02" + KEY65[1:],  # 65 bytes must start 04
        b"\x47" + b"\x30" * 71 + b"\x20" + KEY33[:32] + b"\x51",  # three items
        b"\x47" + b"\x30" * 71 + b"\x22" + KEY33,  # push runs past the end
    ],
)
def test_p2pkh_spender_rejects_other_shapes(unlocking: bytes) -> None:
    assert p2pkh_spender(unlocking) is None


def test_known_owner_membership() -> None:
    a, b, c = b"\x01" * 20, b"\x02" * 20, b"\x03" * 20
    base = KnownOwners([a])
    overlay = OwnerOverlay(base, [b, a])
    assert a in base and b not in base and b in overlay and a in overlay and c not in overlay
    assert bytearray(a) not in base and a[:19] not in base
    assert sorted(overlay) == [a, b] and len(overlay) == 2
    assert base.pkhs == {a} and overlay.pkhs == {a, b}
    base.add(c)
    assert c in base and c in overlay and c in base.pkhs
