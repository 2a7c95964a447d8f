"""Which outputs are the lending protocol's, and the devnet's stand-in contracts.

The mainnet contracts' bytecodes are not in our reference, so identification is configuration:
a loan is an NFT of the stablecoin category with capability none and the version's commitment
size, at one of the configured loan lockings (None: any P2SH32, the mainnet default). The devnet
uses the stand-in redeem scripts below: `<tag> [<data>] OP_2DROP|OP_DROP OP_1`, spendable by
pushing the script (the devnet does not model the covenants; the decoders only read layouts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from bch.script import p2sh32_locking_for_redeem, push_data
from bch.tx import hex_to_hash
from protocols.lending import v1

Version = Literal["v1", "v11"]
VERSIONS: tuple[Version, ...] = ("v1", "v11")
OP_DROP, OP_2DROP, OP_1 = 0x75, 0x6D, 0x51
TAG_PREFIX = b"ladle-lending/"  # every stand-in script starts with a push of this prefix + role


def _stand_in(role: str, data: bytes = b"") -> bytes:
    tag = push_data(TAG_PREFIX + role.encode())
    if data:
        return tag + push_data(data) + bytes((OP_2DROP, OP_1))
    return tag + bytes((OP_DROP, OP_1))


def loan_redeem(version: Version) -> bytes:
    return _stand_in(f"loan-{version}")


def bar_redeem() -> bytes:
    return _stand_in("bar-v11")


def pool_redeem() -> bytes:
    return _stand_in("pool-v11")


def p2nfth_redeem(owner_hash: bytes) -> bytes:
    """Pay-to-NFT-hash: spendable by whoever holds the NFT hashing to `owner_hash`."""
    if len(owner_hash) != 32:
        raise ValueError("an NFT hash is 32 bytes")
    return _stand_in("p2nfth", owner_hash)


def p2nfth_locking(owner_hash: bytes) -> bytes:
    return p2sh32_locking_for_redeem(p2nfth_redeem(owner_hash))


def is_p2sh32(locking: bytes) -> bool:
    return len(locking) == 35 and locking[:2] == b"\xaa\x20" and locking[-1] == 0x87


@dataclass(frozen=True, slots=True)
class LendingConfig:
    """One deployment of one protocol version. Categories are display hex."""

    version: Version = "v1"
    stablecoin: str = v1.MAINNET_STABLECOIN
    price_oracle: str = v1.MAINNET_PRICE_ORACLE
    rate_oracle: str = v1.MAINNET_RATE_ORACLE
    agent_minter: str = v1.MAINNET_AGENT_MINTER
    loan_lockings: frozenset[bytes] | None = None  # None: any P2SH32
    bar_locking: bytes | None = None  # v11
    pool_locking: bytes | None = None  # v11
    # Byte strings whose presence marks a transaction worth decoding (besides the stablecoin
    # category): e.g. the loan contract's bytecode, which every spend of a loan pushes.
    patterns: tuple[bytes, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.version not in VERSIONS:
            raise ValueError(f"unknown lending version {self.version!r}; known: {VERSIONS}")
        for c in (self.stablecoin, self.price_oracle, self.rate_oracle, self.agent_minter):
            hex_to_hash(c)

    @property
    def stablecoin_wire(self) -> bytes:
        return hex_to_hash(self.stablecoin)

    def is_loan_locking(self, locking: bytes) -> bool:
        if self.loan_lockings is None:
            return is_p2sh32(locking)
        return locking in self.loan_lockings


def devnet_config(
    version: Version, stablecoin: str, price_oracle: str, rate_oracle: str, agent_minter: str
) -> LendingConfig:
    """The configuration matching the devnet's stand-in contracts."""
    loan = p2sh32_locking_for_redeem(loan_redeem(version))
    v11 = version == "v11"
    return LendingConfig(
        version=version,
        stablecoin=stablecoin,
        price_oracle=price_oracle,
        rate_oracle=rate_oracle,
        agent_minter=agent_minter,
        loan_lockings=frozenset({loan}),
        bar_locking=p2sh32_locking_for_redeem(bar_redeem()) if v11 else None,
        pool_locking=p2sh32_locking_for_redeem(pool_redeem()) if v11 else None,
        patterns=(TAG_PREFIX,),
    )
