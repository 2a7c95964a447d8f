"""CashTokens (CHIP-2022-02): token data and the output token prefix.

Categories are kept in wire order (as serialized); `category_hex` gives the display order used
by every API and by libauth.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from bch.encoding import DecodeError, Reader, compact_size

PREFIX_TOKEN = 0xEF
MAX_TOKEN_AMOUNT = (1 << 63) - 1
MAX_COMMITMENT_2025 = 40
MAX_COMMITMENT_2026 = 128

_RESERVED = 0x80
_HAS_COMMITMENT = 0x40
_HAS_NFT = 0x20
_HAS_AMOUNT = 0x10


class TokenPrefixError(DecodeError):
    """A token prefix breaks one of the encoding rules."""


class Capability(IntEnum):
    NONE = 0
    MUTABLE = 1
    MINTING = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Capability:
        try:
            return cls[label.upper()]
        except KeyError:
            raise ValueError(f"unknown NFT capability {label!r}") from None


@dataclass(frozen=True, slots=True)
class NFT:
    capability: Capability = Capability.NONE
    commitment: bytes = b""


@dataclass(frozen=True, slots=True)
class TokenData:
    """The tokens carried by one output."""

    category: bytes  # 32 bytes, wire order
    amount: int = 0
    nft: NFT | None = None

    def __post_init__(self) -> None:
        if len(self.category) != 32:
            raise ValueError("token category must be 32 bytes")
        if not 0 <= self.amount <= MAX_TOKEN_AMOUNT:
            raise ValueError(f"token amount out of range: {self.amount}")
        if self.amount == 0 and self.nft is None:
            raise ValueError("token data must carry an amount or an NFT")

    @property
    def category_hex(self) -> str:
        """Display-order hex, as APIs and libauth show it."""
        return self.category[::-1].hex()

    @classmethod
    def from_hex_category(
        cls, category_hex: str, amount: int = 0, nft: NFT | None = None
    ) -> TokenData:
        return cls(bytes.fromhex(category_hex)[::-1], amount, nft)

    def bitfield(self) -> int:
        bits = 0
        if self.nft is not None:
            bits |= _HAS_NFT | int(self.nft.capability)
            if self.nft.commitment:
                bits |= _HAS_COMMITMENT
        if self.amount:
            bits |= _HAS_AMOUNT
        return bits

    def encode_prefix(self) -> bytes:
        """The serialized prefix: `ef ‖ category ‖ bitfield ‖ [commitment] ‖ [amount]`."""
        parts = [b"\xef", self.category, bytes((self.bitfield(),))]
        if self.nft is not None and self.nft.commitment:
            parts += (compact_size(len(self.nft.commitment)), self.nft.commitment)
        if self.amount:
            parts.append(compact_size(self.amount))
        return b"".join(parts)

    def to_json(self) -> dict[str, object]:
        """The Electrum/API `token_data` shape (amount as a decimal string)."""
        out: dict[str, object] = {"category": self.category_hex, "amount": str(self.amount)}
        if self.nft is not None:
            out["nft"] = {
                "capability": self.nft.capability.label,
                "commitment": self.nft.commitment.hex(),
            }
        return out

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> TokenData:
        """Parse the `token_data` shape; raises ValueError on anything malformed."""
        category = obj.get("category")
        if not isinstance(category, str) or len(category) != 64:
            raise ValueError("token category must be 64 hex characters")
        raw_amount = obj.get("amount", "0")
        if isinstance(raw_amount, bool) or not isinstance(raw_amount, (str, int)):
            raise ValueError("token amount must be an integer or a decimal string")
        if isinstance(raw_amount, str) and not raw_amount.isdigit():
            raise ValueError(f"token amount is not a non-negative integer: {raw_amount!r}")
        nft_obj = obj.get("nft")
        nft = None
        if nft_obj is not None:
            if not isinstance(nft_obj, dict):
                raise ValueError("nft must be an object")
            capability = Capability.from_label(str(nft_obj.get("capability", "none")))
            commitment = bytes.fromhex(str(nft_obj.get("commitment", "")))
            nft = NFT(capability, commitment)
        return cls(bytes.fromhex(category)[::-1], int(raw_amount), nft)


def decode_token_prefix(reader: Reader) -> TokenData:
    """Decode a prefix whose 0xef byte the reader is positioned at.

    Commitment length is not limited here: that limit is a VM-version rule
    (see `bch.policy`), not an encoding rule.
    """
    start = reader.pos
    if reader.remaining() < 34:
        raise TokenPrefixError(
            f"Invalid token prefix: insufficient length. The minimum possible length is 34. "
            f"Missing bytes: {34 - reader.remaining()}"
        )
    if reader.u8() != PREFIX_TOKEN:
        reader.pos = start
        raise TokenPrefixError("Invalid token prefix: does not start with 0xef")
    category = reader.take(32)
    bits = reader.u8()
    if bits & _RESERVED:
        raise TokenPrefixError(f"Invalid token prefix: reserved bit is set. Bitfield: {bits:#010b}")
    capability = bits & 0x0F
    has_nft = bool(bits & _HAS_NFT)
    has_commitment = bool(bits & _HAS_COMMITMENT)
    has_amount = bool(bits & _HAS_AMOUNT)
    if capability > 2:
        raise TokenPrefixError(
            "Invalid token prefix: capability must be none (0), mutable (1), or minting (2). "
            f"Capability value: {capability}"
        )
    # Same check order as libauth, so each malformed prefix reports the vectors' reason.
    if not has_nft and has_commitment:
        raise TokenPrefixError(
            f"Invalid token prefix: commitment requires an NFT. Bitfield: {bits:#b}"
        )
    if not has_nft and capability:
        raise TokenPrefixError(
            f"Invalid token prefix: capability requires an NFT. Bitfield: {bits:#b}"
        )
    if not has_nft and not has_amount:
        raise TokenPrefixError(
            f"Invalid token prefix: must encode at least one token. Bitfield: {bits:#b}"
        )
    nft = None
    if has_nft:
        commitment = b""
        if has_commitment:
            try:
                length = reader.compact("commitment length")
                commitment = reader.take(length, "commitment")
            except TokenPrefixError:
                raise
            except DecodeError as exc:
                raise TokenPrefixError(
                    f"Invalid token prefix: invalid non-fungible token commitment. {exc}"
                ) from None
            if length == 0:
                raise TokenPrefixError(
                    "Invalid token prefix: if encoded, commitment length must be greater than 0."
                )
        nft = NFT(Capability(capability), commitment)
    amount = 0
    if has_amount:
        try:
            amount = reader.compact("amount")
        except DecodeError as exc:
            raise TokenPrefixError(
                f"Invalid token prefix: invalid fungible token amount encoding. {exc}"
            ) from None
        if amount == 0:
            raise TokenPrefixError(
                "Invalid token prefix: if encoded, fungible token amount must be greater than 0."
            )
        if amount > MAX_TOKEN_AMOUNT:
            raise TokenPrefixError(
                "Invalid token prefix: exceeds maximum fungible token amount of "
                f"{MAX_TOKEN_AMOUNT}. Encoded amount: {amount}"
            )
    return TokenData(category, amount, nft)


def split_token_prefix(script_field: bytes) -> tuple[TokenData | None, bytes]:
    """Split an output's script field into (token data, locking bytecode)."""
    if not script_field or script_field[0] != PREFIX_TOKEN:
        return None, script_field
    reader = Reader(script_field)
    token = decode_token_prefix(reader)
    return token, script_field[reader.pos :]
