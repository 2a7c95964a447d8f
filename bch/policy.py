"""Relay policy as Bitcoin Cash Node applies it by default, plus the CashTokens balance rules.

The router's safety gate and the devnet's mempool both reject transactions through these
functions, so violations carry BCHN's own reject reasons (`dust`, `scriptpubkey`, `tx-size`,
`bad-txns-token-in-belowout`, ...) and a sentence for humans.

Decisions where BCHN has a setting or libauth differs (documented, so nobody re-derives them):
- Output types follow BCHN's `Solver` with default settings: P2PKH, P2SH20, P2SH32, OP_RETURN
  followed by pushes only, bare P2PK, and bare multisig up to 3 keys (`-permitbaremultisig`
  defaults to on). From the 2026 rules any other locking bytecode of at most 201 bytes is
  standard ("pay to script"), including the empty one; bare multisig with more than 3 keys stays
  non-standard even then, because BCHN recognises it as multisig first.
- Data-carrier bytes are the summed locking-bytecode lengths of OP_RETURN outputs (BCHN);
  libauth counts one more byte per output.
- The dust exemption covers every locking bytecode that starts with OP_RETURN (BCHN's
  `IsUnspendable`), not only push-only ones.
- Signature-check counts (`MAX_TX_SIGCHECKS`) need script execution and are not checked here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from operator import attrgetter, lt
from types import MappingProxyType
from typing import NamedTuple

from bch.encoding import DecodeError
from bch.script import (
    OP_1,
    OP_16,
    OP_CHECKMULTISIG,
    OP_CHECKSIG,
    OP_RETURN,
    ScriptKind,
    classify_locking,
    is_push_only,
    iter_ops,
)
from bch.token import (
    MAX_COMMITMENT_2025,
    MAX_COMMITMENT_2026,
    MAX_TOKEN_AMOUNT,
    PREFIX_TOKEN,
    Capability,
)
from bch.tx import (
    MAX_SATS,
    FungibleTemplate,
    TemplatedTransaction,
    Transaction,
    TxInput,
    TxOutput,
)

MIN_RELAY_FEE_PER_KB = 1000
DUST_RELAY_FEE_PER_KB = 1000
MAX_STANDARD_TX_SIZE = 100_000
MIN_TX_SIZE = 65  # consensus
MAX_OP_RETURN_RELAY = 223
MAX_STANDARD_UNLOCKING_SIZE = 10_000  # from the 2026 rules
MAX_STANDARD_UNLOCKING_SIZE_LEGACY = 1650  # before them
MAX_STANDARD_LOCKING_SIZE = 201  # "pay to script", from the 2026 rules
MAX_SCRIPT_SIZE = 10_000  # longer locking bytecode is unspendable
MAX_TX_SIGCHECKS = 3000  # consensus; needs script execution, so not checked here
MAX_BARE_MULTISIG_KEYS = 3
# The spend a dust output is priced against: a P2PKH input with a 72-byte ECDSA signature.
DUST_SPEND_SIZE = 32 + 4 + 1 + 107 + 4
MAX_COMMITMENT: Mapping[int, int] = MappingProxyType(
    {2025: MAX_COMMITMENT_2025, 2026: MAX_COMMITMENT_2026}
)

REASON_MIN_RELAY_FEE = "min relay fee not met"

_MAX_INT64 = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class PolicyViolation:
    """One rejection: BCHN's reason string, a readable message, and the input or output index
    it concerns (inputs for `scriptsig-*`/`bad-txns-vin-*`, outputs otherwise; None if the whole
    transaction)."""

    reason: str
    message: str
    index: int | None = None

    def __str__(self) -> str:
        return self.message


class TokenBurn(NamedTuple):
    fungible: int  # fungible amount destroyed
    nfts: int  # NFTs destroyed (a minting NFT counts even when it minted others first)


# --- fees and dust ---------------------------------------------------------------------------


def _fee_for(size: int, fee_per_kb: int) -> int:
    """BCHN's `CFeeRate::GetFee`: truncating division, but never 0 for a positive rate."""
    if size < 0 or fee_per_kb < 0:
        raise ValueError("size and fee rate must not be negative")
    fee = size * fee_per_kb // 1000
    if fee == 0 and size and fee_per_kb:
        return 1
    return fee


def min_relay_fee(size_bytes: int, fee_per_kb: int = MIN_RELAY_FEE_PER_KB) -> int:
    """Minimum fee for a transaction of `size_bytes` (whole serialized size).

    Rounds down, as BCHN does (`size * rate // 1000`), except that a positive rate never asks
    for less than 1 sat; at the default 1000 sat/kB this is exactly one sat per byte.
    """
    return _fee_for(size_bytes, fee_per_kb)


def is_unspendable(locking: bytes) -> bool:
    """BCHN's `IsUnspendable`: starts with OP_RETURN, or too long to ever be executed."""
    return (len(locking) > 0 and locking[0] == OP_RETURN) or len(locking) > MAX_SCRIPT_SIZE


def dust_threshold(output: TxOutput, fee_per_kb: int = DUST_RELAY_FEE_PER_KB) -> int:
    """Smallest standard value: 3 × fee(serialized output incl. token prefix + 148); 0 for
    unspendable (OP_RETURN) outputs."""
    if is_unspendable(output.locking):
        return 0
    size = output.size()
    if fee_per_kb == DUST_RELAY_FEE_PER_KB and size < _DUST_SIZES:
        return _DUST_AT_SIZE[size]
    return 3 * _fee_for(size + DUST_SPEND_SIZE, fee_per_kb)


# The default dust threshold by serialized output size, for the sizes real outputs have: a
# router's gate judges hundreds of outputs per transaction.
_DUST_SIZES = 1024
_DUST_AT_SIZE = tuple(
    3 * _fee_for(size + DUST_SPEND_SIZE, DUST_RELAY_FEE_PER_KB) for size in range(_DUST_SIZES)
)


def is_dust(output: TxOutput, fee_per_kb: int = DUST_RELAY_FEE_PER_KB) -> bool:
    return output.value < dust_threshold(output, fee_per_kb)


def _check_aligned(tx: Transaction, source_outputs: Sequence[TxOutput]) -> None:
    if len(source_outputs) != len(tx.inputs):
        raise ValueError(
            f"source_outputs has {len(source_outputs)} entries for {len(tx.inputs)} inputs"
        )


def tx_fee(tx: Transaction, source_outputs: Sequence[TxOutput]) -> int:
    """Sats in minus sats out (negative if the outputs overspend)."""
    _check_aligned(tx, source_outputs)
    return sum(o.value for o in source_outputs) - sum(o.value for o in tx.outputs)


def check_fee(
    tx: Transaction, source_outputs: Sequence[TxOutput], fee_per_kb: int = MIN_RELAY_FEE_PER_KB
) -> PolicyViolation | None:
    """None if the fee pays the relay minimum for the transaction's size, else the rejection."""
    _check_aligned(tx, source_outputs)
    value_in = sum(o.value for o in source_outputs)
    value_out = sum(o.value for o in tx.outputs)
    fee = value_in - value_out
    if fee < 0:
        return PolicyViolation(
            "bad-txns-in-belowout", f"value in ({value_in} sats) < value out ({value_out} sats)"
        )
    required = min_relay_fee(tx.size(), fee_per_kb)
    if fee < required:
        return PolicyViolation(REASON_MIN_RELAY_FEE, f"{REASON_MIN_RELAY_FEE}, {fee} < {required}")
    return None


# --- output types ----------------------------------------------------------------------------


def _pubkey_size_ok(key: bytes) -> bool:
    """BCHN's `CPubKey::ValidSize`: the header byte fixes the length."""
    if not key:
        return False
    if key[0] in (2, 3):
        return len(key) == 33
    if key[0] in (4, 6, 7):
        return len(key) == 65
    return False


def _multisig_keys(locking: bytes) -> tuple[int, int] | None:
    """(m, n) if `locking` is `OP_m <key>… OP_n OP_CHECKMULTISIG` as BCHN matches it."""
    if len(locking) < 3 or locking[-1] != OP_CHECKMULTISIG:
        return None
    try:
        ops = list(iter_ops(locking))
    except DecodeError:
        return None
    if len(ops) < 3 or not OP_1 <= ops[0][0] <= OP_16 or not OP_1 <= ops[-2][0] <= OP_16:
        return None
    m = ops[0][0] - OP_1 + 1
    n = ops[-2][0] - OP_1 + 1
    keys = ops[1:-2]
    for op, data in keys:  # minimal direct pushes of well-sized keys only
        if data is None or op != len(data) or not _pubkey_size_ok(data):
            return None
    if len(keys) != n or n < m:
        return None
    return m, n


def _is_p2pk(locking: bytes) -> bool:
    n = len(locking)
    return (
        n in (35, 67)
        and locking[0] == n - 2
        and locking[-1] == OP_CHECKSIG
        and _pubkey_size_ok(locking[1:-1])
    )


def _check_year(vm_year: int) -> None:
    if vm_year not in MAX_COMMITMENT:
        raise ValueError(f"unsupported VM year {vm_year}: use one of {sorted(MAX_COMMITMENT)}")


@lru_cache(maxsize=4096)
def _solve(locking: bytes, vm_year: int) -> str | None:
    """BCHN's `Solver`: the output type name, or None for TX_NONSTANDARD (any multisig size).
    Cached: a transaction repeats a few lockings (a router's pools, a wallet's addresses)."""
    kind, _ = classify_locking(locking)
    if kind in (ScriptKind.P2SH20, ScriptKind.P2SH32):
        return "scripthash"
    if locking and locking[0] == OP_RETURN and is_push_only(locking[1:]):
        return "nulldata"
    if kind is ScriptKind.P2PKH:
        return "pubkeyhash"
    if _is_p2pk(locking):
        return "pubkey"
    if _multisig_keys(locking) is not None:
        return "multisig"
    if vm_year >= 2026 and len(locking) <= MAX_STANDARD_LOCKING_SIZE:
        return "script"
    return None


def standard_output_type(locking: bytes, *, vm_year: int = 2026) -> str | None:
    """BCHN's type name for a locking bytecode that is standard in a new output, else None.

    Names: `pubkeyhash`, `scripthash` (P2SH20 and P2SH32), `nulldata`, `pubkey`, `multisig`
    (at most 3 keys), `script` (2026 "pay to script").
    """
    _check_year(vm_year)
    return _output_type(locking, vm_year)


def _output_type(locking: bytes, vm_year: int) -> str | None:
    """`standard_output_type` without the year check (callers check it once per transaction)."""
    kind = _solve(locking, vm_year)
    if kind == "multisig":
        m, n = _multisig_keys(locking) or (0, 0)
        return kind if 1 <= m <= n <= MAX_BARE_MULTISIG_KEYS else None
    return kind


def input_standardness_errors(
    tx: Transaction, source_outputs: Sequence[TxOutput], *, vm_year: int = 2026, vetted: int = 0
) -> list[PolicyViolation]:
    """BCHN's `AreInputsStandard`: every spent output must be of a known type (bare multisig of
    any size counts; from 2026 so does any bytecode of at most 201 bytes). `vetted`: as in
    `standardness_errors`, the first `vetted` spent outputs are known to be of a known type."""
    _check_year(vm_year)
    _check_aligned(tx, source_outputs)
    if None not in _kinds_of(source_outputs[vetted:], vm_year):
        return []  # every type known (a router's pools, build after build): nothing to report
    return [
        PolicyViolation(
            "bad-txns-nonstandard-inputs",
            f"input {i} spends a non-standard locking bytecode ({len(spent.locking)} bytes)",
            i,
        )
        for i, spent in enumerate(source_outputs)
        if _solve(spent.locking, vm_year) is None
    ]


# --- standardness ----------------------------------------------------------------------------


_TOKEN_PREFIX_BYTE = bytes((PREFIX_TOKEN,))
_OP_RETURN_BYTE = bytes((OP_RETURN,))

# `is_push_only` per unlocking bytecode, kept across calls (a pure function of the bytes; the
# bytes objects cache their hash). Bounded: cleared when full.
_PUSH_ONLY: dict[bytes, bool] = {}
_PUSH_ONLY_MAX = 1 << 16
# Per size limit: unlocking bytecode → push-only and within the limit (nothing to report),
# recorded once an input was looked at one by one. Bounded like `_PUSH_ONLY`.
_UNLOCKING_CLEAN: dict[int, dict[bytes, bool]] = {}


def standardness_errors(
    tx: Transaction, *, vm_year: int = 2026, vetted: int = 0
) -> list[PolicyViolation]:
    """Everything BCHN rejects about `tx` on its own, without looking at the coins it spends.

    Relay-policy reasons come in the order of BCHN's `IsStandardTx`; the context-free consensus
    reasons it checks elsewhere (`bad-txns-*`) follow. Empty list: standard.

    `vetted`: the caller knows that the first `vetted` inputs, and of a `TemplatedTransaction`
    the first `vetted` templated outputs, are each standard on their own (`standard_spend` of
    the input, the coin it spends and the template, for this `vm_year`, said so), so those
    unlocking bytecodes and template bytecodes are not looked at again: a router spends and
    re-creates the same pools build after build. What depends on the transaction (values,
    dust, sizes, duplicate outpoints) is checked for every input and output regardless.
    """
    _check_year(vm_year)
    errors: list[PolicyViolation] = []
    add = errors.append
    size = tx.size()

    if tx.version not in (1, 2):
        add(PolicyViolation("version", f"transaction version {tx.version} is not 1 or 2"))
    if size > MAX_STANDARD_TX_SIZE:
        add(
            PolicyViolation(
                "tx-size",
                f"transaction is {size} bytes; the standard maximum is {MAX_STANDARD_TX_SIZE}",
            )
        )

    max_unlocking = (
        MAX_STANDARD_UNLOCKING_SIZE if vm_year >= 2026 else MAX_STANDARD_UNLOCKING_SIZE_LEGACY
    )
    push_only = _PUSH_ONLY  # a router spends the same pools' unlockings in build after build
    if len(push_only) > _PUSH_ONLY_MAX:
        push_only.clear()
    unlocking_clean = _UNLOCKING_CLEAN.setdefault(max_unlocking, {})
    if len(unlocking_clean) > _PUSH_ONLY_MAX:
        unlocking_clean.clear()
    # Every unlocking already known push-only and within the limit (a router's pools, build
    # after build): nothing to report, decided by one C-level lookup per input.
    inputs = tx.inputs[vetted:] if vetted else tx.inputs
    known = all(map(unlocking_clean.get, map(_unlocking_of, inputs)))
    for i, txin in enumerate(() if known else inputs, vetted):
        unlocking = txin.unlocking
        pushes = push_only.get(unlocking)
        if pushes is None:
            pushes = push_only[unlocking] = is_push_only(unlocking)
        unlocking_clean[unlocking] = pushes and len(unlocking) <= max_unlocking
        if len(unlocking) > max_unlocking:
            add(
                PolicyViolation(
                    "scriptsig-size",
                    f"input {i} unlocking bytecode is {len(txin.unlocking)} bytes; "
                    f"the standard maximum is {max_unlocking}",
                    i,
                )
            )
        if not pushes:
            add(
                PolicyViolation(
                    "scriptsig-not-pushonly",
                    f"input {i} unlocking bytecode contains non-push operations",
                    i,
                )
            )

    max_commitment = MAX_COMMITMENT[vm_year]
    data_bytes = 0
    # One pass over the outputs: the relay-policy reasons go to `errors` now, the consensus
    # ones to `later`, reported after the inputs' (BCHN's order, as in separate passes).
    later: list[PolicyViolation] = []
    total_out = 0
    dust_at = _DUST_AT_SIZE
    outputs: Sequence[TxOutput]
    if isinstance(tx, TemplatedTransaction) and (clean := _templated_clean(tx, vm_year, vetted)):
        # The templated outputs report nothing: only the others are looked at one by one.
        (first, total_out), outputs = clean, tx.rest
    else:
        first, outputs = 0, tx.outputs
    for i, out in enumerate(outputs, first):
        locking = out.locking
        value = out.value
        kind = _solve(locking, vm_year)
        if kind == "multisig":
            kind = _output_type(locking, vm_year)
        if kind is None:
            add(
                PolicyViolation(
                    "scriptpubkey",
                    f"output {i} locking bytecode ({len(locking)} bytes) is not a standard type",
                    i,
                )
            )
        if kind == "nulldata":
            data_bytes += len(locking)
        else:
            out_size = len(out._encoded or out.encode())
            if locking[:1] == _OP_RETURN_BYTE or len(locking) > MAX_SCRIPT_SIZE:  # unspendable
                threshold = 0
            elif out_size < _DUST_SIZES:
                threshold = dust_at[out_size]
            else:
                threshold = 3 * _fee_for(out_size + DUST_SPEND_SIZE, DUST_RELAY_FEE_PER_KB)
            if value < threshold:
                add(
                    PolicyViolation(
                        "dust",
                        f"output {i} carries {value} sats; its dust threshold is {threshold}",
                        i,
                    )
                )
        if value > _MAX_INT64:
            later.append(
                PolicyViolation("bad-txns-vout-negative", f"output {i} value is negative", i)
            )
        elif value > MAX_SATS:
            later.append(
                PolicyViolation(
                    "bad-txns-vout-toolarge", f"output {i} value {value} exceeds 21M BCH", i
                )
            )
        total_out += value
        token = out.token
        if token is None:
            if locking[:1] == _TOKEN_PREFIX_BYTE:
                later.append(
                    PolicyViolation(
                        "bad-txns-vout-tokenprefix",
                        f"output {i} locking bytecode starts with the token prefix byte 0xef "
                        "but the output carries no token data",
                        i,
                    )
                )
        elif token.nft is not None:
            length = len(token.nft.commitment)
            if length > max_commitment:
                later.append(
                    PolicyViolation(
                        "bad-txns-token-commitment-oversized",
                        f"output {i} NFT commitment is {length} bytes; the {vm_year} VM allows "
                        f"at most {max_commitment}",
                        i,
                    )
                )
    if data_bytes > MAX_OP_RETURN_RELAY:
        add(
            PolicyViolation(
                "oversize-op-return",
                f"OP_RETURN outputs carry {data_bytes} bytes in total; "
                f"the standard maximum is {MAX_OP_RETURN_RELAY}",
            )
        )

    # Context-free consensus rules (BCHN: CheckRegularTransaction, ContextualCheckTransaction,
    # CheckTxTokens), reported here so one call vets a transaction before it is broadcast.
    if size < MIN_TX_SIZE:
        add(
            PolicyViolation(
                "bad-txns-undersize", f"transaction is {size} bytes; the minimum is {MIN_TX_SIZE}"
            )
        )
    if not tx.inputs:
        add(PolicyViolation("bad-txns-vin-empty", "transaction has no inputs"))
    if not (first or outputs):
        add(PolicyViolation("bad-txns-vout-empty", "transaction has no outputs"))
    # Distinct outpoints, none of them null (every router transaction): nothing to report.
    outpoints = {txin.outpoint for txin in tx.inputs}
    if len(outpoints) < len(tx.inputs) or _NULL_OUTPOINT in outpoints:
        seen: set[tuple[bytes, int]] = set()
        for i, txin in enumerate(tx.inputs):
            key = (txin.outpoint.txid, txin.outpoint.index)
            if key in seen:
                add(
                    PolicyViolation(
                        "bad-txns-inputs-duplicate",
                        f"input {i} spends {txin.outpoint}, which an earlier input also spends",
                        i,
                    )
                )
            seen.add(key)
            if txin.outpoint.index == 0xFFFFFFFF and not any(txin.outpoint.txid):
                add(
                    PolicyViolation(
                        "bad-txns-prevout-null",
                        f"input {i} spends the null outpoint (only a coinbase may)",
                        i,
                    )
                )
    errors += later
    if total_out > MAX_SATS and all(o.value <= MAX_SATS for o in tx.outputs):
        add(
            PolicyViolation(
                "bad-txns-txouttotal-toolarge", f"outputs total {total_out} sats, above 21M BCH"
            )
        )
    return errors


def _templated_clean(
    tx: TemplatedTransaction, vm_year: int, vetted: int = 0
) -> tuple[int, int] | None:
    """(count, value total) of `tx`'s templated outputs when the output checks of
    `standardness_errors` have nothing to say about any of them, else None (the caller then
    checks every output one by one). Decided from the templates' bytecodes, the values and the
    outputs' sizes without a Python-level step per output: each is a fungible-token output
    (no NFT, never a bare 0xef prefix) whose bytecode is of a standard non-data type (known
    for the first `vetted` templates), whose value is within 21e14 sats and at least the dust
    threshold of its size (the threshold grows with the size, so a least value at or above
    the threshold of the largest such output settles it at once, and only otherwise output
    by output)."""
    values = tx.values
    if not values or _kinds_of(tx.templates[vetted:], vm_year) & _NOT_TEMPLATED_KINDS:
        return None
    if min(values) < _DUST_AT_SIZE[_LARGEST_TEMPLATED] and any(
        map(lt, values, map(_DUST_AT_SIZE.__getitem__, map(len, tx.encoded)))
    ):
        return None
    # Every value positive now (none is dust), so a total within 21e14 has no part above it.
    total = sum(values)
    if total > MAX_SATS and max(values) > MAX_SATS:
        return None
    return len(values), total


# Output types a templated output may not have for `_templated_clean`: non-standard, data
# (dust-exempt, counted against the OP_RETURN limit), bare multisig (limited by its keys).
_NOT_TEMPLATED_KINDS = frozenset({None, "nulldata", "multisig"})
# The largest templated output of any other type (their bytecodes are at most 201 bytes):
# value, CompactSize, token prefix with the widest amount, bytecode.
_LARGEST_TEMPLATED = 8 + 1 + (1 + 32 + 1 + 9) + MAX_STANDARD_LOCKING_SIZE


def standard_spend(
    txin: TxInput, spent: TxOutput, template: FungibleTemplate, *, vm_year: int = 2026
) -> bool:
    """Whether an input `txin` spending `spent`, and outputs made by `template`, are each
    standard on their own: the unlocking bytecode is push-only and within the size limit,
    `spent`'s bytecode is of a known type, and the template's of a standard non-data type
    other than bare multisig. Checked once per coin, it lets a caller pass `vetted` to
    `standardness_errors` and `input_standardness_errors` for every transaction that spends
    the coin through `txin` and re-creates it from `template`."""
    _check_year(vm_year)
    unlocking = txin.unlocking
    limit = MAX_STANDARD_UNLOCKING_SIZE if vm_year >= 2026 else MAX_STANDARD_UNLOCKING_SIZE_LEGACY
    return (
        len(unlocking) <= limit
        and is_push_only(unlocking)
        and _solve(spent.locking, vm_year) is not None
        and _solve(template.locking, vm_year) not in _NOT_TEMPLATED_KINDS
    )


def _kinds_of(holders: Sequence[TxOutput | FungibleTemplate], vm_year: int) -> set[str | None]:
    """`{_solve(h.locking, vm_year) for h in holders}` with a C-level lookup per bytecode: a
    router's transactions repeat its pools' bytecodes build after build, so each is solved
    once."""
    kinds = _KINDS.setdefault(vm_year, {})
    found = set(map(kinds.get, map(_locking_of, holders), repeat(_UNKNOWN)))
    if _UNKNOWN in found:  # bytecodes not seen yet
        lockings = list(map(_locking_of, holders))
        if len(kinds) > _KINDS_MAX:
            kinds.clear()
        for locking in lockings:
            if locking not in kinds:
                kinds[locking] = _solve(locking, vm_year)
        found = set(map(kinds.__getitem__, lockings))
    return found


# `_solve` per locking bytecode and VM year (`_kinds_of`). Bounded: cleared when full.
_KINDS: dict[int, dict[bytes, str | None]] = {}
_KINDS_MAX = 1 << 16
_UNKNOWN = "?"  # not a kind `_solve` returns
_locking_of = attrgetter("locking")
_unlocking_of = attrgetter("unlocking")
_NULL_OUTPOINT = (bytes(32), 0xFFFFFFFF)  # equal to the `OutPoint` only a coinbase spends


def is_standard(tx: Transaction, *, vm_year: int = 2026) -> bool:
    return not standardness_errors(tx, vm_year=vm_year)


# --- token balances --------------------------------------------------------------------------


def genesis_categories(tx: Transaction) -> set[bytes]:
    """Categories `tx` may create (wire order): txids of the outpoints it spends at index 0."""
    return {txin.outpoint.txid for txin in tx.inputs if txin.outpoint.index == 0}


@dataclass(slots=True)
class _SpentTokens:
    """What the inputs bring of one category."""

    amount: int = 0
    immutables: Counter[bytes] = field(default_factory=Counter)  # commitment -> count
    mutables: int = 0
    minting: int = 0


def _tally_inputs(source_outputs: Iterable[TxOutput]) -> dict[bytes, _SpentTokens]:
    spent: dict[bytes, _SpentTokens] = {}
    for out in source_outputs:
        token = out.token
        if token is None:
            continue
        entry = spent.get(token.category)
        if entry is None:
            entry = spent[token.category] = _SpentTokens()
        entry.amount += token.amount
        if token.nft is not None:
            cap = token.nft.capability
            if cap is Capability.MINTING:
                entry.minting += 1
            elif cap is Capability.MUTABLE:
                entry.mutables += 1
            else:
                entry.immutables[token.nft.commitment] += 1
    return spent


def _take_nft(entry: _SpentTokens, capability: Capability, commitment: bytes) -> bool:
    """Find an input NFT that may become this output NFT, in BCHN's order: an identical
    immutable, then a mutable (not for minting outputs), then any minting NFT (not used up)."""
    if capability is Capability.NONE and entry.immutables[commitment] > 0:
        entry.immutables[commitment] -= 1
        return True
    if capability is not Capability.MINTING and entry.mutables > 0:
        entry.mutables -= 1
        return True
    return entry.minting > 0


def token_balance_errors(
    tx: Transaction, source_outputs: Sequence[TxOutput]
) -> list[PolicyViolation]:
    """Consensus token rules (BCHN `CheckTxTokens`): per category, fungible outputs may not
    exceed inputs, and every output NFT must descend from an input NFT, unless the category is
    created here (its id is the txid of an outpoint this transaction spends at index 0).

    Burns are valid and not reported here; see `token_burns`. Commitment length and stray 0xef
    prefixes on outputs are reported by `standardness_errors`.
    """
    _check_aligned(tx, source_outputs)
    errors: list[PolicyViolation] = []
    add = errors.append
    for i, spent_out in enumerate(source_outputs):
        if spent_out.token is None and spent_out.locking[:1] == bytes((PREFIX_TOKEN,)):
            add(
                PolicyViolation(
                    "bad-txns-vin-tokenprefix",
                    f"input {i} spends an output whose bytecode starts with 0xef but that "
                    "carries no valid token data",
                    i,
                )
            )
    genesis = genesis_categories(tx)
    spent = _tally_inputs(source_outputs)
    for category, entry in spent.items():
        if entry.amount > MAX_TOKEN_AMOUNT:
            add(
                PolicyViolation(
                    "bad-txns-token-amount-overflow",
                    f"inputs of category {category[::-1].hex()} sum above 2^63-1",
                )
            )
    remaining = {category: entry.amount for category, entry in spent.items()}
    created: Counter[bytes] = Counter()
    reported: set[tuple[str, bytes]] = set()
    for i, out in enumerate(tx.outputs):
        token = out.token
        if token is None:
            continue
        category = token.category
        label = category[::-1].hex()
        held = spent.get(category)
        if category in genesis:
            if held is not None:
                add(
                    PolicyViolation(
                        "bad-txns-token-dupe-genesis",
                        f"output {i}: category {label} is both spent and created",
                        i,
                    )
                )
                continue
            created[category] += token.amount
            if created[category] > MAX_TOKEN_AMOUNT and ("overflow", category) not in reported:
                reported.add(("overflow", category))
                add(
                    PolicyViolation(
                        "bad-txns-token-amount-overflow",
                        f"output {i}: new category {label} mints more than 2^63-1",
                        i,
                    )
                )
            continue
        if held is None:
            add(
                PolicyViolation(
                    "bad-txns-token-invalid-category",
                    f"output {i} has category {label}, which no input carries; creating it "
                    f"requires spending output 0 of transaction {label}",
                    i,
                )
            )
            continue
        remaining[category] -= token.amount
        if remaining[category] < 0 and ("belowout", category) not in reported:
            reported.add(("belowout", category))
            add(
                PolicyViolation(
                    "bad-txns-token-in-belowout",
                    f"output {i}: category {label} pays out more fungible tokens than the "
                    f"inputs hold ({held.amount})",
                    i,
                )
            )
        nft = token.nft
        if nft is not None and not _take_nft(held, nft.capability, nft.commitment):
            add(
                PolicyViolation(
                    "bad-txns-token-nft-ex-nihilo",
                    f"output {i}: {nft.capability.label} NFT of category {label} does not "
                    "descend from any input NFT that may create it",
                    i,
                )
            )
    return errors


def token_burns(tx: Transaction, source_outputs: Sequence[TxOutput]) -> dict[bytes, TokenBurn]:
    """Tokens the transaction destroys, per category (wire-order id); empty if none.

    Burning is valid by consensus, so wallets and routers must catch it themselves. An input NFT
    survives if an output NFT takes it over under BCHN's matching (`token_balance_errors`); a
    minting NFT survives only as a minting output, even if it minted others.
    """
    _check_aligned(tx, source_outputs)
    spent = _tally_inputs(source_outputs)
    remaining = {category: entry.amount for category, entry in spent.items()}
    minting_out: Counter[bytes] = Counter()
    for out in tx.outputs:
        token = out.token
        if token is None or token.category not in spent:
            continue
        remaining[token.category] -= token.amount
        nft = token.nft
        if nft is not None:
            _take_nft(spent[token.category], nft.capability, nft.commitment)
            if nft.capability is Capability.MINTING:
                minting_out[token.category] += 1
    burns: dict[bytes, TokenBurn] = {}
    for category, entry in spent.items():
        fungible = max(0, remaining[category])
        nfts = (
            sum(entry.immutables.values())
            + entry.mutables
            + max(0, entry.minting - minting_out[category])
        )
        if fungible or nfts:
            burns[category] = TokenBurn(fungible, nfts)
    return burns


__all__ = [
    "DUST_RELAY_FEE_PER_KB",
    "DUST_SPEND_SIZE",
    "MAX_BARE_MULTISIG_KEYS",
    "MAX_COMMITMENT",
    "MAX_OP_RETURN_RELAY",
    "MAX_SCRIPT_SIZE",
    "MAX_STANDARD_LOCKING_SIZE",
    "MAX_STANDARD_TX_SIZE",
    "MAX_STANDARD_UNLOCKING_SIZE",
    "MAX_STANDARD_UNLOCKING_SIZE_LEGACY",
    "MAX_TX_SIGCHECKS",
    "MIN_RELAY_FEE_PER_KB",
    "MIN_TX_SIZE",
    "REASON_MIN_RELAY_FEE",
    "PolicyViolation",
    "TokenBurn",
    "check_fee",
    "dust_threshold",
    "genesis_categories",
    "input_standardness_errors",
    "is_dust",
    "is_standard",
    "is_unspendable",
    "min_relay_fee",
    "standard_output_type",
    "standard_spend",
    "standardness_errors",
    "token_balance_errors",
    "token_burns",
    "tx_fee",
]
