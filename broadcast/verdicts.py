"""One node's answer to a broadcast, normalised to a reason: one table for every way a node
answers (an Electrum server's `blockchain.transaction.broadcast`, BCHN's `sendrawtransaction`
and `testmempoolaccept`; docs/real-nodes.md lists what each said, verbatim).

Nodes word rejections differently (BCHN reason codes, "18: " before them in `testmempoolaccept`,
" (code 18)" after them in `sendrawtransaction`, Fulcrum's wrapper, "Missing inputs" without a
code), so a verdict keeps the raw message and adds a reason clients can act on. The leading
reject code decides first; only if it is not recognised is the whole text searched, so words
inside a node's debug detail cannot change the class.

A code-1 answer is the node refusing the transaction, so it is a rejection even when no row
knows its words (reason `other`, the raw message kept): counting it as "no verdict" would let
nodes that refused it leave the majority to the one that took it. Transport errors, timeouts
and codes 2/3/4 say nothing about the transaction: the outcome is unknown (reason `unknown`)
and is confirmed later with `transaction.get_height`. BCHN's RPC says the same by its codes
(`RPC_CODES`): −26 and −25 carry a reject reason, −27 "already in block chain", −22 a decode
failure; any other code (−28 still loading, −1, …) says nothing about the transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

REJECTED_PREFIX = "the transaction was rejected by network rules."
REJECTION_CODE = 1  # Fulcrum's "bad request": how broadcast rejections come back


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


class Reason(StrEnum):
    CONFLICT = "conflict"
    MISSING_INPUTS = "missing_inputs"
    FEE = "fee"
    FEE_TOO_HIGH = "fee_too_high"
    NONSTANDARD = "nonstandard"
    INVALID = "invalid"
    MALFORMED = "malformed"
    OTHER = "other"  # refused, in words no row knows
    UNKNOWN = "unknown"  # no verdict: timeout, unreachable, codes 2/3/4


# Substrings meaning "the node has it": confirmed (`sendrawtransaction`'s −27 text; BCHN's
# `testmempoolaccept` says txn-already-known when the outputs are in its UTXO set), or in its
# mempool (a second `sendrawtransaction` answers the txid; `testmempoolaccept` says this).
_ALREADY_CONFIRMED = ("transaction already in block chain", "txn-already-known")
_ALREADY_KNOWN = ("txn-already-in-mempool",)

# (reason, substrings), tried in order: a specific pattern before a more general one that could
# also match it (non-mandatory before mandatory, nonstandard-inputs before the bad-txns- catch).
_TABLE: tuple[tuple[Reason, tuple[str, ...]], ...] = (
    (Reason.MALFORMED, ("TX decode failed",)),
    (Reason.FEE_TOO_HIGH, ("absurdly-high-fee",)),
    (
        Reason.CONFLICT,
        ("txn-mempool-conflict", "bad-txns-inputs-spent", "txn-double-spend-detected"),
    ),
    (
        Reason.MISSING_INPUTS,
        ("Missing inputs", "missing-inputs", "bad-txns-inputs-missingorspent"),
    ),
    (
        Reason.FEE,
        ("min relay fee not met", "mempool min fee not met", "mempool full", "insufficient fee"),
    ),
    (Reason.NONSTANDARD, ("non-mandatory-script-verify-flag", "bad-txns-nonstandard-inputs")),
    (
        Reason.INVALID,
        (
            "mandatory-script-verify-flag-failed",
            "bad-txns-in-belowout",
            "bad-txns-token-",
            "bad-txns-nonfinal",
            "bad-txns-vout-tokenprefix",
            "bad-txns-vin-tokenprefix",
            "bad-txns-premature-spend-of-coinbase",
        ),
    ),
    (
        Reason.NONSTANDARD,
        (
            "dust",
            "scriptpubkey",
            "tx-size",
            "scriptsig-size",
            "scriptsig-not-pushonly",
            "oversize-op-return",
            "non-BIP68-final",
            "too-many-sigchecks",
            "too-long-mempool-chain",
            "version",  # too common a word: matched only as the leading reject code
        ),
    ),
    # Every other BCHN consensus code starts like this (bad-txns-vin-empty, bad-tx-coinbase…).
    (Reason.INVALID, ("bad-txns-", "bad-tx-")),
)

_LEADING_ONLY = frozenset({"version"})
_LEADING_CODE = re.compile(r"(?:\d+: )?([^\s,(:]+)")  # BCHN's code, after an old "64: " prefix


@dataclass(frozen=True, slots=True)
class Classification:
    outcome: Outcome
    reason: Reason | None  # None when accepted
    confirmed: bool = False  # the node says the transaction is already in a block


ACCEPTED = Classification(Outcome.ACCEPTED, None)
UNKNOWN = Classification(Outcome.UNKNOWN, Reason.UNKNOWN)
OTHER = Classification(Outcome.REJECTED, Reason.OTHER)


def node_message(message: str) -> str:
    """The node's own reject text, without Fulcrum's wrapper and trailing newline."""
    text = message.strip()
    if text.startswith(REJECTED_PREFIX):
        text = text[len(REJECTED_PREFIX) :].strip()
    return text


def _search(text: str, *, leading: bool) -> Classification | None:
    if any(s in text for s in _ALREADY_CONFIRMED):
        return Classification(Outcome.ACCEPTED, None, confirmed=True)
    if any(s in text for s in _ALREADY_KNOWN):
        return ACCEPTED
    for reason, substrings in _TABLE:
        for s in substrings:
            if s in text and (leading or s not in _LEADING_ONLY):
                return Classification(Outcome.REJECTED, reason)
    return None


def classify_message(message: str) -> Classification:
    """Classify a node's rejection text (wrapped by Fulcrum or not); text no row knows is
    still a rejection (`other`)."""
    text = node_message(message)
    leading = _LEADING_CODE.match(text)
    if leading is not None:
        found = _search(leading.group(1), leading=True)
        if found is not None:
            return found
    return _search(text, leading=False) or OTHER


def classify_error(code: int, message: str) -> Classification:
    """Classify a JSON-RPC error answered to `blockchain.transaction.broadcast`."""
    if code != REJECTION_CODE:
        return UNKNOWN  # daemon error, flood, limit, protocol errors: nothing is known
    return classify_message(message)


# BCHN's RPC error codes (src/rpc/protocol.h) answered to `sendrawtransaction` and
# `testmempoolaccept`: None means "classify the message" (it holds the reject reason).
RPC_CODES: dict[int, Classification | None] = {
    -26: None,  # RPC_VERIFY_REJECTED: "txn-mempool-conflict (code 18)", "dust (code 64)", …
    -25: None,  # RPC_VERIFY_ERROR: "Missing inputs" (also spent in the chain), other failures
    -27: Classification(Outcome.ACCEPTED, None, confirmed=True),  # RPC_VERIFY_ALREADY_IN_CHAIN
    -22: Classification(Outcome.REJECTED, Reason.MALFORMED),  # "TX decode failed"
}


def classify_rpc_error(code: int, message: str) -> Classification:
    """Classify a BCHN JSON-RPC error answered to `sendrawtransaction` / `testmempoolaccept`."""
    if code not in RPC_CODES:
        return UNKNOWN  # warming up (−28), misc (−1), method not found, …: nothing is known
    return RPC_CODES[code] or classify_message(message)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one node said about one transaction."""

    node: str
    outcome: Outcome
    reason: Reason | None = None
    message: str = ""  # the node's raw message, or what went wrong reaching it
    confirmed: bool = False
    elapsed: float = 0.0  # seconds from sending to the answer

    @classmethod
    def of(
        cls, node: str, classification: Classification, message: str = "", elapsed: float = 0.0
    ) -> Verdict:
        return cls(
            node,
            classification.outcome,
            classification.reason,
            message,
            classification.confirmed,
            elapsed,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "outcome": self.outcome.value,
            "reason": None if self.reason is None else self.reason.value,
            "message": self.message,
            "confirmed": self.confirmed,
            "elapsed": round(self.elapsed, 6),
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> Verdict:
        reason = obj.get("reason")
        elapsed = obj.get("elapsed", 0.0)
        return cls(
            str(obj["node"]),
            Outcome(str(obj["outcome"])),
            None if reason is None else Reason(str(reason)),
            str(obj.get("message", "")),
            bool(obj.get("confirmed", False)),
            float(elapsed) if isinstance(elapsed, int | float) else 0.0,
        )
