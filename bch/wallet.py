"""A single-key P2PKH wallet for tests and the devnet: addresses and input signing.

Not a user wallet (no key storage, coin selection or fee logic); it exists so tests and the
devnet can build genuinely signed transactions from reproducible keys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bch.cashaddr import KNOWN_PREFIXES, Address, AddressKind
from bch.hashes import sha256
from bch.keys import N, PrivateKey
from bch.script import p2pkh_locking, push_data
from bch.sighash import SIGHASH_DEFAULT, SighashCache
from bch.tx import Transaction, TxOutput


@dataclass(frozen=True, slots=True)
class Wallet:
    key: PrivateKey
    prefix: str = "bitcoincash"

    def __post_init__(self) -> None:
        if self.prefix not in KNOWN_PREFIXES:
            raise ValueError(f"unknown network prefix {self.prefix!r}")

    @classmethod
    def from_seed(cls, seed: str | bytes, prefix: str = "bitcoincash") -> Wallet:
        """Deterministic wallet: secret = sha256(seed) mod n (re-hashed in the ~2⁻²⁵⁶ case
        that this is zero). A str seed is UTF-8 encoded."""
        digest = sha256(seed.encode() if isinstance(seed, str) else seed)
        while (scalar := int.from_bytes(digest, "big") % N) == 0:
            digest = sha256(digest)
        return cls(PrivateKey.from_int(scalar), prefix)

    @classmethod
    def generate(cls, prefix: str = "bitcoincash") -> Wallet:
        return cls(PrivateKey.generate(), prefix)

    @property
    def public_key(self) -> bytes:
        return self.key.public_key

    @property
    def pkh(self) -> bytes:
        return self.key.pkh

    @property
    def locking_bytecode(self) -> bytes:
        return p2pkh_locking(self.key.pkh)

    @property
    def address(self) -> str:
        return Address(AddressKind.P2PKH, self.key.pkh, False, self.prefix).encode()

    @property
    def token_address(self) -> str:
        """The token-aware form (`z…`), the only kind wallets send tokens to."""
        return Address(AddressKind.P2PKH, self.key.pkh, True, self.prefix).encode()

    def _unlocking(
        self, cache: SighashCache, index: int, sighash_type: int, schnorr: bool
    ) -> bytes:
        spent = cache.source_outputs[index] if 0 <= index < len(cache.source_outputs) else None
        if spent is None:
            raise ValueError(f"input index {index} out of range")
        if spent.locking != self.locking_bytecode:
            raise ValueError(f"input {index} does not spend this wallet's P2PKH output")
        digest = cache.digest(index, sighash_type, self.locking_bytecode)
        sig = self.key.sign_schnorr(digest) if schnorr else self.key.sign_ecdsa(digest)
        return push_data(sig + bytes((sighash_type,))) + push_data(self.key.public_key)

    def sign_p2pkh_input(
        self,
        tx: Transaction,
        index: int,
        source_outputs: Sequence[TxOutput],
        *,
        sighash_type: int = SIGHASH_DEFAULT,
        schnorr: bool = True,
    ) -> bytes:
        """Unlocking bytecode `<sig ‖ sighash byte> <pubkey>` for input `index`."""
        return self._unlocking(SighashCache(tx, source_outputs), index, sighash_type, schnorr)

    def sign_transaction(
        self,
        tx: Transaction,
        source_outputs: Sequence[TxOutput],
        indices: Iterable[int] | None = None,
        *,
        sighash_type: int = SIGHASH_DEFAULT,
        schnorr: bool = True,
    ) -> Transaction:
        """A copy of `tx` with the given inputs unlocked (default: every input spending this
        wallet's P2PKH bytecode). Preimages never cover unlocking bytecode, so every input is
        signed against the same unsigned transaction."""
        cache = SighashCache(tx, source_outputs)
        if indices is None:
            mine = self.locking_bytecode
            indices = [i for i, out in enumerate(cache.source_outputs) if out.locking == mine]
        inputs = list(tx.inputs)
        for index in indices:
            unlocking = self._unlocking(cache, index, sighash_type, schnorr)
            inputs[index] = dataclasses.replace(inputs[index], unlocking=unlocking)
        return Transaction(tx.version, tuple(inputs), tx.outputs, tx.locktime)
