"""Oracle data the scenario publishes: Delphi NFT commitments and signed GP price messages.

Layouts (little-endian, see ../shared/reference/oracle-registry-lending.md and docs/devnet.md):

- Delphi commitment, 16 bytes: `timestamp u48 ‖ use_fee u16 ‖ sequence u32 ‖ price u32`.
- GP message, 16 bytes: `timestamp i32 ‖ message_sequence i32 ‖ data_sequence i32 ‖ price i32`
  (a negative data_sequence marks a metadata message, −6 = attestation scaling), signed with BCH
  Schnorr over sha256(message) — what `OP_CHECKDATASIG` checks.
- Its on-chain publication (our devnet's convention; GP relays messages off-chain):
  `OP_RETURN "GPPM" <message:16> <signature:64> <pubkey:33>`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from bch.hashes import sha256
from bch.keys import PrivateKey, verify_schnorr
from bch.script import OP_RETURN, push_data
from bch.script import pushes as script_pushes

GP_TAG = b"GPPM"
METADATA_SCALING = -6  # data_sequence of the "attestation scaling" metadata message
_GP = struct.Struct("<iiii")
_DELPHI_TAIL = struct.Struct("<HII")


@dataclass(frozen=True, slots=True)
class DelphiCommitment:
    timestamp: int  # u48, seconds
    use_fee: int  # u16, sats paid per use
    sequence: int  # u32
    price: int  # u32, US cents per BCH

    def encode(self) -> bytes:
        if not 0 <= self.timestamp < 1 << 48:
            raise ValueError("timestamp does not fit in 48 bits")
        return self.timestamp.to_bytes(6, "little") + _DELPHI_TAIL.pack(
            self.use_fee, self.sequence, self.price
        )

    @classmethod
    def decode(cls, data: bytes) -> DelphiCommitment:
        if len(data) != 16:
            raise ValueError(f"a Delphi commitment is 16 bytes, got {len(data)}")
        use_fee, sequence, price = _DELPHI_TAIL.unpack_from(data, 6)
        return cls(int.from_bytes(data[:6], "little"), use_fee, sequence, price)


@dataclass(frozen=True, slots=True)
class GpMessage:
    timestamp: int
    message_sequence: int
    data_sequence: int  # negative: a metadata message
    price: int  # for metadata messages, the metadata value

    def encode(self) -> bytes:
        return _GP.pack(self.timestamp, self.message_sequence, self.data_sequence, self.price)

    @classmethod
    def decode(cls, data: bytes) -> GpMessage:
        if len(data) != 16:
            raise ValueError(f"a GP price message is 16 bytes, got {len(data)}")
        return cls(*_GP.unpack(data))

    def sign(self, key: PrivateKey) -> bytes:
        """64-byte BCH Schnorr signature over sha256(message)."""
        return key.sign_schnorr(sha256(self.encode()))


def verify_message(message: bytes, signature: bytes, pubkey: bytes) -> bool:
    return verify_schnorr(pubkey, sha256(message), signature)


def gp_publication(message: GpMessage, key: PrivateKey) -> bytes:
    """The OP_RETURN locking bytecode publishing a signed message."""
    return (
        bytes((OP_RETURN,))
        + push_data(GP_TAG)
        + push_data(message.encode())
        + push_data(message.sign(key))
        + push_data(key.public_key)
    )


def parse_gp_publication(locking: bytes) -> tuple[GpMessage, bytes, bytes] | None:
    """(message, signature, pubkey) of a publication output, or None for anything else."""
    if not locking.startswith(bytes((OP_RETURN,)) + push_data(GP_TAG)):
        return None
    try:
        items = script_pushes(locking[1:])
    except ValueError:
        return None
    if len(items) != 4 or len(items[1]) != 16 or len(items[2]) != 64 or len(items[3]) != 33:
        return None
    return GpMessage.decode(items[1]), items[2], items[3]
