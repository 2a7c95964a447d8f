"""Oracle price layouts: on-chain feed commitments and signed General Protocols price messages.

Exact layouts (little-endian; ../shared/reference/oracle-registry-lending.md):

- Delphi commitment, 16 bytes: `timestamp u48 ‖ use_fee u16 ‖ sequence u32 ‖ price u32`.
- 9-byte price contract: `00 ‖ sequence u32 ‖ price u32` (no timestamp: the block time is used).
- 36-byte legacy layout: `oracle_pkh[20] ‖ GP message[16]`.
- The lending protocol's interest-rate (basis-point) oracle, 10 bytes:
  `timestamp u48 ‖ use_fee u16 ‖ bp_value u16` (`protocols.lending.v1.RateCommitment`); its
  value is the bp rate, not a price, and it has no sequence (its timestamp stands in for one).
- GP message, 16 bytes: `timestamp i32 ‖ message_sequence i32 ‖ data_sequence i32 ‖ price i32`
  (a negative data_sequence marks a metadata message, −6 = attestation scaling), signed with BCH
  Schnorr over sha256(message) — what `OP_CHECKDATASIG` checks.
- The devnet's publication of a signed message (GP relays messages off chain; this project's
  convention): `OP_RETURN "GPPM" <message:16> <signature:64> <pubkey:33>`.

Feeds are decoded by a table of layouts keyed by token category (configurable), never by
guessing from a commitment's length: a 16-byte commitment of an unknown category means nothing.
A message whose signature does not verify against the configured key is reported as such and
never becomes a price.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from bch.encoding import DecodeError
from bch.hashes import sha256
from bch.keys import PrivateKey, verify_schnorr
from bch.script import OP_RETURN, push_data
from bch.script import pushes as script_pushes
from bch.tx import hex_to_hash
from protocols.lending.v1 import MAINNET_RATE_ORACLE, RateCommitment

GP_TAG = b"GPPM"
GP_HEAD = bytes((OP_RETURN,)) + push_data(GP_TAG)  # what a publication output starts with
METADATA_SCALING = -6  # data_sequence of the "attestation scaling" metadata message
PRODUCTION_BCH_USD_PUBKEY = bytes.fromhex(
    "02d09db08af1ff4e8453919cc866a4be427d7bfe18f2c05e5444c196fcf6fd2818"
)
MAINNET_DELPHI_CATEGORY = "d0d46f5cbd82188acede0d3e49c75700c19cb8331a30101f0bb6a260066ac972"

_GP = struct.Struct("<iiii")
_DELPHI_TAIL = struct.Struct("<HII")
_PRICE9 = struct.Struct("<II")

Layout = Literal["delphi", "price9", "legacy36", "rate"]
LAYOUTS: tuple[Layout, ...] = ("delphi", "price9", "legacy36", "rate")
MessageStatus = Literal["valid", "invalid_signature", "unknown_key"]


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
class Price9Commitment:
    """The 9-byte price contract's commitment: no timestamp of its own."""

    sequence: int  # u32
    price: int  # u32, US cents per BCH

    def encode(self) -> bytes:
        return b"\x00" + _PRICE9.pack(self.sequence, self.price)

    @classmethod
    def decode(cls, data: bytes) -> Price9Commitment:
        if len(data) != 9 or data[0] != 0:
            raise ValueError("a 9-byte price commitment is 00 ‖ sequence u32 ‖ price u32")
        return cls(*_PRICE9.unpack_from(data, 1))


@dataclass(frozen=True, slots=True)
class GpMessage:
    timestamp: int
    message_sequence: int
    data_sequence: int  # negative: a metadata message
    price: int  # for metadata messages, the metadata value

    @property
    def is_metadata(self) -> bool:
        return self.data_sequence < 0

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


@dataclass(frozen=True, slots=True)
class LegacyCommitment:
    """The 36-byte legacy layout: the oracle's pkh and the full GP message."""

    oracle_pkh: bytes  # 20 bytes
    message: GpMessage

    def encode(self) -> bytes:
        if len(self.oracle_pkh) != 20:
            raise ValueError("the oracle pkh is 20 bytes")
        return self.oracle_pkh + self.message.encode()

    @classmethod
    def decode(cls, data: bytes) -> LegacyCommitment:
        if len(data) != 36:
            raise ValueError(f"a legacy oracle commitment is 36 bytes, got {len(data)}")
        return cls(data[:20], GpMessage.decode(data[20:]))


def verify_message(message: bytes, signature: bytes, pubkey: bytes) -> bool:
    """BCH Schnorr over sha256(message), as `OP_CHECKDATASIG` checks it."""
    return len(signature) == 64 and verify_schnorr(pubkey, sha256(message), signature)


@dataclass(frozen=True, slots=True)
class CheckedMessage:
    """A signed GP message and what checking it against the configured keys found."""

    message: GpMessage
    signature: bytes
    pubkey: bytes
    status: MessageStatus

    @property
    def price(self) -> int | None:
        """The price, only for a valid price (not metadata) message."""
        if self.status != "valid" or self.message.is_metadata:
            return None
        return self.message.price


def check_message(
    message: GpMessage, signature: bytes, pubkey: bytes, trusted: Iterable[bytes]
) -> CheckedMessage:
    """`unknown_key` when `pubkey` is not configured (its signature is not even looked at: an
    unconfigured key proves nothing), else `valid` / `invalid_signature`."""
    if pubkey not in set(trusted):
        return CheckedMessage(message, signature, pubkey, "unknown_key")
    ok = verify_message(message.encode(), signature, pubkey)
    return CheckedMessage(message, signature, pubkey, "valid" if ok else "invalid_signature")


def gp_publication(message: GpMessage, key: PrivateKey) -> bytes:
    """The OP_RETURN locking bytecode publishing a signed message (the devnet's convention)."""
    return (
        GP_HEAD
        + push_data(message.encode())
        + push_data(message.sign(key))
        + push_data(key.public_key)
    )


def parse_gp_publication(locking: bytes) -> tuple[GpMessage, bytes, bytes] | None:
    """(message, signature, pubkey) of a publication output, or None for anything else."""
    if not locking.startswith(GP_HEAD):
        return None
    try:
        items = script_pushes(locking[1:])
    except (ValueError, DecodeError):
        return None
    if len(items) != 4 or len(items[1]) != 16 or len(items[2]) != 64 or len(items[3]) != 33:
        return None
    return GpMessage.decode(items[1]), items[2], items[3]


# --- feeds ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedConfig:
    """One configured feed: its category (display hex), layout and, for message-carrying layouts,
    the keys whose signatures are trusted."""

    category: str
    layout: Layout
    name: str = "BCH/USD"
    pubkeys: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown oracle layout {self.layout!r}; known: {LAYOUTS}")
        hex_to_hash(self.category)  # raises on a malformed id

    @property
    def category_wire(self) -> bytes:
        return hex_to_hash(self.category)


@dataclass(frozen=True, slots=True)
class FeedPrice:
    """One decoded oracle UTXO. `time` is the commitment's timestamp, or the block time for a
    layout without one; `price` is None when the value is not a trusted price (a metadata
    message, or a legacy message whose signature could not be checked). For the `rate` layout,
    `price` is the bp value and `sequence` the timestamp (the layout has no sequence; its
    updates re-create one UTXO, so the latest timestamp is the current value)."""

    layout: Layout
    time: int
    sequence: int
    price: int | None
    use_fee: int | None = None
    oracle_pkh: bytes | None = None


def decode_feed(layout: Layout, commitment: bytes, block_time: int) -> FeedPrice:
    """Decode one commitment by its configured layout; ValueError if it does not fit."""
    if layout == "delphi":
        d = DelphiCommitment.decode(commitment)
        return FeedPrice(layout, d.timestamp, d.sequence, d.price, use_fee=d.use_fee)
    if layout == "price9":
        p = Price9Commitment.decode(commitment)
        return FeedPrice(layout, block_time, p.sequence, p.price)
    if layout == "rate":
        r = RateCommitment.decode(commitment)
        return FeedPrice(layout, r.timestamp, r.timestamp, r.bp_value, use_fee=r.use_fee)
    legacy = LegacyCommitment.decode(commitment)
    m = legacy.message
    price = None if m.is_metadata else m.price
    return FeedPrice(layout, m.timestamp, m.data_sequence, price, oracle_pkh=legacy.oracle_pkh)


class FeedTable:
    """Configured feeds by category (wire order, as token data holds it)."""

    def __init__(self, feeds: Iterable[FeedConfig] = ()) -> None:
        self._by_category: dict[bytes, FeedConfig] = {}
        for f in feeds:
            if f.category_wire in self._by_category:
                raise ValueError(f"feed {f.category} is configured twice")
            self._by_category[f.category_wire] = f

    def get(self, category_wire: bytes) -> FeedConfig | None:
        return self._by_category.get(category_wire)

    def __len__(self) -> int:
        return len(self._by_category)

    @property
    def feeds(self) -> tuple[FeedConfig, ...]:
        return tuple(self._by_category.values())

    @property
    def trusted_keys(self) -> tuple[bytes, ...]:
        return tuple(k for f in self._by_category.values() for k in f.pubkeys)

    @classmethod
    def from_json(cls, obj: Iterable[Mapping[str, object]]) -> FeedTable:
        """`[{"category": hex, "layout": "delphi", "name": "...", "pubkeys": [hex…]}, …]`."""
        feeds = []
        for item in obj:
            keys = item.get("pubkeys", [])
            if not isinstance(keys, list):
                raise ValueError("pubkeys is a list of hex strings")
            layout = str(item["layout"])
            if layout not in LAYOUTS:
                raise ValueError(f"unknown oracle layout {layout!r}; known: {LAYOUTS}")
            feeds.append(
                FeedConfig(
                    str(item["category"]),
                    layout,
                    str(item.get("name", "BCH/USD")),
                    tuple(bytes.fromhex(str(k)) for k in keys),
                )
            )
        return cls(feeds)


RATE_FEED_NAME = "interest rate (bp)"


def mainnet_feeds() -> FeedTable:
    """The default configuration: the lending protocol's Delphi BCH/USD feed and its
    interest-rate oracle."""
    return FeedTable(
        [
            FeedConfig(MAINNET_DELPHI_CATEGORY, "delphi", "BCH/USD"),
            FeedConfig(MAINNET_RATE_ORACLE, "rate", RATE_FEED_NAME),
        ]
    )
