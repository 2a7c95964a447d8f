"""Protection rules a client can ask for: checked against the outputs the transaction spends,
before anything is sent, because nodes relay what is valid, not what the sender meant.

A high fee and a token burn are both valid by consensus; they are the costly mistakes a wallet
bug or a wrong router build makes, and once broadcast they cannot be undone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bch.policy import token_burns, tx_fee
from bch.tx import Transaction, TxOutput

FEE_TOO_HIGH = "FEE_TOO_HIGH"
TOKEN_BURN = "TOKEN_BURN"
NFT_BURN = "NFT_BURN"
INPUTS_UNKNOWN = "INPUTS_UNKNOWN"  # the rules cannot be evaluated: fail closed

_FIELDS = ("max_fee_per_byte", "reject_token_burn", "reject_nft_burn")
# The whole 21 million BCH, in sats: a bound every meaningful cap is under, written into the
# OpenAPI schema so that the schema and the parser agree on every number.
MAX_FEE_PER_BYTE_LIMIT = 2_100_000_000_000_000


@dataclass(frozen=True, slots=True)
class Protection:
    max_fee_per_byte: float | None = None  # sats per byte of the whole transaction
    reject_token_burn: bool = False  # fungible tokens destroyed
    reject_nft_burn: bool = False  # an NFT destroyed

    @property
    def active(self) -> bool:
        return self.max_fee_per_byte is not None or self.reject_token_burn or self.reject_nft_burn

    @classmethod
    def from_json(cls, obj: object) -> Protection:
        """The request's `protection` object; ValueError names what is wrong."""
        if not isinstance(obj, Mapping):
            raise ValueError("protection must be an object")
        unknown = set(obj) - set(_FIELDS)
        if unknown:
            raise ValueError(
                f"unknown protection field(s): {', '.join(sorted(map(str, unknown)))}; "
                f"known: {', '.join(_FIELDS)}"
            )
        max_fee = obj.get("max_fee_per_byte")
        if max_fee is not None and (
            isinstance(max_fee, bool)
            or not isinstance(max_fee, int | float)
            or not math.isfinite(max_fee)
            or not 0 <= max_fee <= MAX_FEE_PER_BYTE_LIMIT
        ):
            raise ValueError(
                "protection.max_fee_per_byte must be a number from 0 to "
                f"{MAX_FEE_PER_BYTE_LIMIT} (sats per byte)"
            )
        flags = {}
        for key in ("reject_token_burn", "reject_nft_burn"):
            value = obj.get(key, False)
            if not isinstance(value, bool):
                raise ValueError(f"protection.{key} must be true or false")
            flags[key] = value
        return cls(None if max_fee is None else float(max_fee), **flags)

    def to_json(self) -> dict[str, object]:
        return {
            "max_fee_per_byte": self.max_fee_per_byte,
            "reject_token_burn": self.reject_token_burn,
            "reject_nft_burn": self.reject_nft_burn,
        }


@dataclass(frozen=True, slots=True)
class ProtectionViolation:
    reason: str  # FEE_TOO_HIGH, TOKEN_BURN, NFT_BURN, INPUTS_UNKNOWN
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def fee_per_byte(tx: Transaction, source_outputs: Sequence[TxOutput]) -> float:
    return tx_fee(tx, source_outputs) / tx.size()


def check_protection(
    tx: Transaction, source_outputs: Sequence[TxOutput], rules: Protection
) -> list[ProtectionViolation]:
    """Every rule `tx` breaks, in the order fee, fungible burn, NFT burn; empty if none.

    Each violation's details carry the fee figures (`fee`, `size`, `fee_per_byte`,
    `max_fee_per_byte`) so a client sees the whole picture whichever rule fired.
    """
    fee = tx_fee(tx, source_outputs)
    size = tx.size()
    base: dict[str, Any] = {
        "fee": fee,
        "size": size,
        "fee_per_byte": round(fee / size, 6),
        "max_fee_per_byte": rules.max_fee_per_byte,
    }
    violations: list[ProtectionViolation] = []
    if rules.max_fee_per_byte is not None and fee / size > rules.max_fee_per_byte:
        violations.append(
            ProtectionViolation(
                FEE_TOO_HIGH,
                f"the fee is {fee} sats for {size} bytes ({fee / size:.2f} sat/B), above the "
                f"maximum of {rules.max_fee_per_byte:g} sat/B",
                {"reason": FEE_TOO_HIGH, **base},
            )
        )
    burns = (
        token_burns(tx, source_outputs) if rules.reject_token_burn or rules.reject_nft_burn else {}
    )
    fungible = [
        {"category": cat[::-1].hex(), "amount": str(b.fungible)}
        for cat, b in burns.items()
        if b.fungible
    ]
    if rules.reject_token_burn and fungible:
        total = ", ".join(f"{f['amount']} of {f['category']}" for f in fungible)
        violations.append(
            ProtectionViolation(
                TOKEN_BURN,
                f"the transaction destroys fungible tokens ({total})",
                {"reason": TOKEN_BURN, **base, "tokens_burned": fungible},
            )
        )
    nfts = [{"category": cat[::-1].hex(), "count": b.nfts} for cat, b in burns.items() if b.nfts]
    if rules.reject_nft_burn and nfts:
        total = ", ".join(f"{n['count']} of {n['category']}" for n in nfts)
        violations.append(
            ProtectionViolation(
                NFT_BURN,
                f"the transaction destroys NFTs ({total})",
                {"reason": NFT_BURN, **base, "nfts_burned": nfts},
            )
        )
    return violations


def inputs_unknown(
    tx: Transaction, missing: Sequence[int], rules: Protection
) -> ProtectionViolation:
    """The violation answered when spent outputs cannot be found: unknown is not safe."""
    outpoints = [str(tx.inputs[i].outpoint) for i in missing]
    return ProtectionViolation(
        INPUTS_UNKNOWN,
        "protection was requested but the outputs spent by input(s) "
        f"{', '.join(map(str, missing))} could not be found, so the rules cannot be checked",
        {
            "reason": INPUTS_UNKNOWN,
            "inputs": list(missing),
            "outpoints": outpoints,
            # the same members as every other violation; the fee needs every spent output
            "fee": None,
            "size": tx.size(),
            "fee_per_byte": None,
            "max_fee_per_byte": rules.max_fee_per_byte,
        },
    )
