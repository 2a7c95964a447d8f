"""Recognising Cauldron pools in a transaction: one structural code path for blocks and mempool.

`detect` needs only the transaction (not the outputs it spends): pool spends are found by the
redeem script at the end of an unlocking bytecode, new pools by the SUMMON marker, a withdraw's
re-created pools, or outputs paying a known owner's pool bytecode. The indexer calls it on every
transaction, so the common non-Cauldron case costs one `endswith` per input and one
`startswith` (plus a dict lookup for P2SH32 outputs) per output.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal, NamedTuple

from bch.block import OutputView, TxView
from bch.script import iter_ops
from bch.tx import TxOutput
from protocols.cauldron.contract import (
    PKH_LEN,
    REDEEM_PREFIX,
    REDEEM_SUFFIX,
    TRADE_UNLOCK_LEN,
    pool_locking_bytecode,
)
from protocols.cauldron.formulas import PoolState

SpendKind = Literal["trade", "withdraw"]
CreationVia = Literal["summon", "withdraw_recreate", "known_owner"]
IgnoredReason = Literal["no_fungible_token", "has_nft"]
AnomalyReason = Literal[
    "continuation_missing",  # no output at the pool input's index
    "continuation_wrong_bytecode",  # output i does not pay this owner's P2SH32 pool bytecode
    "continuation_not_pool",  # output i pays it, but without FT or with an NFT (see `ignored`)
    "version_not_2",  # the trade path requires transaction version 2
]

_REDEEM_PUSH = 0x44  # a direct push of the 68-byte redeem script
_PKH_START = -(len(REDEEM_SUFFIX) + PKH_LEN)  # -63
_PKH_END = -len(REDEEM_SUFFIX)  # -43
_PREFIX_START = _PKH_START - len(REDEEM_PREFIX)  # -68
# The same offsets from the start of a trade-path unlocking bytecode (`TRADE_UNLOCK_LEN` long).
_TRADE_PREFIX = TRADE_UNLOCK_LEN + _PREFIX_START  # 1
_TRADE_PKH = TRADE_UNLOCK_LEN + _PKH_START  # 6
_TRADE_SUFFIX = TRADE_UNLOCK_LEN + _PKH_END  # 26
# OP_RETURN, push 6 "SUMMON", push 20: followed by the owner pkh.
SUMMON_HEAD = bytes.fromhex("6a06") + b"SUMMON" + bytes((PKH_LEN,))
SUMMON_LEN = len(SUMMON_HEAD) + PKH_LEN  # 28
_P2SH32_HEAD = b"\xaa\x20"
_P2SH32_LEN = 35


def pool_spend_pkh(unlocking: bytes) -> bytes | None:
    """Owner pkh if this unlocking bytecode spends a pool, else None.

    Read relative to the end: a withdraw carries `<sig> <pubkey>` in front of the redeem push.
    When there is something in front, it must parse as whole operations ending exactly where the
    redeem push starts, so that bytes merely *inside* some longer push are not taken for a pool.
    """
    n = len(unlocking)
    if (
        n < TRADE_UNLOCK_LEN
        or not unlocking.endswith(REDEEM_SUFFIX)
        or unlocking[-TRADE_UNLOCK_LEN] != _REDEEM_PUSH
        or unlocking[_PREFIX_START:_PKH_START] != REDEEM_PREFIX
    ):
        return None
    if n > TRADE_UNLOCK_LEN and not _ops_end_at(unlocking[: n - TRADE_UNLOCK_LEN]):
        return None
    return unlocking[_PKH_START:_PKH_END]


def _ops_end_at(head: bytes) -> bool:
    """Does `head` parse as complete operations (so the next byte starts a new one)?"""
    try:
        for _ in iter_ops(head):
            pass
    except ValueError:
        return False
    return True


def is_trade_path(unlocking: bytes) -> bool:
    """A pool spend by the signature-less trade/deposit path (exactly the 69-byte redeem push)."""
    return len(unlocking) == TRADE_UNLOCK_LEN and pool_spend_pkh(unlocking) is not None


def parse_summon(locking: bytes) -> bytes | None:
    """Owner pkh of an `OP_RETURN "SUMMON" <pkh:20>` pool-creation marker (exact form), or None."""
    if len(locking) == SUMMON_LEN and locking.startswith(SUMMON_HEAD):
        return locking[len(SUMMON_HEAD) :]
    return None


def pool_token_problem(output: OutputView) -> IgnoredReason | None:
    """Why an output paying a pool bytecode is not a pool, by its tokens; None if it is one.

    Without FT anyone can drain it; with an NFT a trader could rewrite the commitment.
    """
    token = output.token
    if token is not None and token.nft is not None:
        return "has_nft"
    if token is None or token.amount < 1:
        return "no_fungible_token"
    return None


def is_pool_utxo(output: TxOutput, owner_pkh: bytes) -> bool:
    """Pays the owner's pool bytecode with a fungible token and no NFT."""
    return output.locking == pool_locking_bytecode(owner_pkh) and pool_token_problem(output) is None


def pool_transition(spent: TxOutput, continuation: TxOutput) -> tuple[PoolState, PoolState]:
    """The (before, after) states of a trade-path spend and its re-created output.

    ValueError unless both carry fungible tokens of one category under one locking bytecode
    (which consensus guarantees for a real trade of a real pool).
    """
    if spent.token is None or continuation.token is None:
        raise ValueError("both the spent pool and its continuation must carry tokens")
    if spent.token.category != continuation.token.category:
        raise ValueError("continuation carries a different token category")
    if spent.locking != continuation.locking:
        raise ValueError("continuation pays a different locking bytecode")
    return (
        PoolState(spent.value, spent.token.amount),
        PoolState(continuation.value, continuation.token.amount),
    )


# --- per-transaction detection ----------------------------------------------------------------


class KnownOwners(Collection[bytes]):
    """Owner pkhs with their pool bytecodes precomputed, so matching an output is one lookup.

    Pass this (not a plain set) to `detect` when there are many owners: a plain collection has
    its bytecodes hashed on every call.
    """

    __slots__ = ("_by_bytecode", "_pkhs")

    def __init__(self, pkhs: Iterable[bytes] = ()) -> None:
        self._by_bytecode: dict[bytes, bytes] = {}
        # The pkhs again, so membership is one set lookup (the indexer asks per pool touched).
        self._pkhs: set[bytes] = set()
        for pkh in pkhs:
            self.add(pkh)

    def add(self, pkh: bytes) -> None:
        self._by_bytecode[pool_locking_bytecode(pkh)] = pkh
        self._pkhs.add(pkh)

    def owner_of(self, locking: bytes) -> bytes | None:
        """The owner whose pool bytecode `locking` is, if known."""
        return self._by_bytecode.get(locking)

    def __contains__(self, pkh: object) -> bool:
        return isinstance(pkh, bytes) and pkh in self._pkhs

    @property
    def pkhs(self) -> AbstractSet[bytes]:
        """The owners' pkhs as a set (live, read-only): membership without a method call."""
        return self._pkhs

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._by_bytecode.values())

    def __len__(self) -> int:
        return len(self._by_bytecode)


@dataclass(frozen=True, slots=True)
class PoolSpend:
    input_index: int
    kind: SpendKind
    owner_pkh: bytes
    # Output index of the pool's next state: the input's own index on the trade path when that
    # output is a valid pool UTXO (otherwise None plus an anomaly); always None for a withdraw.
    continuation_index: int | None


@dataclass(frozen=True, slots=True)
class PoolCreation:
    output_index: int
    owner_pkh: bytes
    via: CreationVia


class Summon(NamedTuple):
    output_index: int
    owner_pkh: bytes


class IgnoredOutput(NamedTuple):
    output_index: int
    reason: IgnoredReason


class Anomaly(NamedTuple):
    input_index: int
    reason: AnomalyReason


@dataclass(frozen=True, slots=True)
class CauldronActivity:
    """Everything Cauldron-related in one transaction, each tuple in index order."""

    spends: tuple[PoolSpend, ...] = ()
    created: tuple[PoolCreation, ...] = ()
    summons: tuple[Summon, ...] = ()
    ignored: tuple[IgnoredOutput, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.spends or self.created or self.summons or self.ignored or self.anomalies)


NO_ACTIVITY = CauldronActivity()


def _owner_lookup(known: Collection[bytes]) -> Callable[[bytes], bytes | None]:
    if isinstance(known, KnownOwners):
        return known.owner_of
    if not known:
        return _nobody
    table: dict[bytes, bytes] = {}

    def lookup(locking: bytes) -> bytes | None:
        # Built on first use: most transactions have no P2SH32 output to look up.
        if not table:
            table.update((pool_locking_bytecode(pkh), pkh) for pkh in known)
        return table.get(locking)

    return lookup


def _nobody(_locking: bytes) -> bytes | None:
    return None


def detect(tx: TxView, known_owner_pkhs: Collection[bytes] = frozenset()) -> CauldronActivity:
    """Find pool spends, continuations, new pools and SUMMON markers in `tx`.

    New pools (outputs that pay an owner's pool bytecode, carry FT and no NFT, and are not a
    trade continuation) are labelled by the first rule that finds them: "summon" (a SUMMON for
    that owner in this tx), "withdraw_recreate" (this tx withdraws one of that owner's pools),
    "known_owner" (`known_owner_pkhs`, or an owner whose pool this tx trades against). Outputs
    paying such a bytecode that are not pools are reported in `ignored`.
    """
    known_owner = _owner_lookup(known_owner_pkhs)
    outputs = tx.outputs
    # Fast path: nothing that could be Cauldron's.
    suffix = REDEEM_SUFFIX
    if not any(inp.unlocking.endswith(suffix) for inp in tx.inputs):
        for out in outputs:
            lk = out.locking
            if lk.startswith(SUMMON_HEAD) or (
                len(lk) == _P2SH32_LEN and lk.startswith(_P2SH32_HEAD) and known_owner(lk)
            ):
                break
        else:
            return NO_ACTIVITY
    summons = summon_markers(tx)
    found = classify(tx, pool_inputs(tx), summons, known_owner)
    return CauldronActivity(
        spends=tuple(PoolSpend(*s) for s in found.spends),
        created=tuple(PoolCreation(*c) for c in found.created),
        summons=tuple(Summon(*m) for m in summons),
        ignored=tuple(IgnoredOutput(j, r) for j, r in sorted(found.ignored.items())),
        anomalies=tuple(found.anomalies),
    )


# --- the two passes of `detect`, as plain tuples ----------------------------------------------
#
# The indexer runs them on every candidate of a block (the first pass over all candidates
# before the second: owners revealed anywhere in the block count for the whole block), and
# builds its rows straight from the tuples, without the per-pool objects of `CauldronActivity`.

# (input index, owner pkh, on the signature-less trade path)
PoolInput = tuple[int, bytes, bool]
# (input index, kind, owner pkh, continuation output index): `PoolSpend`'s fields
SpendTuple = tuple[int, SpendKind, bytes, int | None]
# (output index, owner pkh, via): `PoolCreation`'s fields
CreationTuple = tuple[int, bytes, CreationVia]


def pool_inputs(tx: TxView) -> list[PoolInput]:
    """The inputs spending a pool (`pool_spend_pkh`), in input order."""
    suffix, prefix = REDEEM_SUFFIX, REDEEM_PREFIX
    found: list[PoolInput] = []
    for i, inp in enumerate(tx.inputs):
        unlocking = inp.unlocking
        if unlocking.endswith(suffix):
            if len(unlocking) == TRADE_UNLOCK_LEN:
                # The trade path, most pool spends: `pool_spend_pkh`'s checks read in place.
                if unlocking[0] == _REDEEM_PUSH and unlocking.startswith(prefix, _TRADE_PREFIX):
                    found.append((i, unlocking[_TRADE_PKH:_TRADE_SUFFIX], True))
                continue
            pkh = pool_spend_pkh(unlocking)
            if pkh is not None:
                found.append((i, pkh, False))
    return found


def summon_markers(tx: TxView) -> list[tuple[int, bytes]]:
    """The SUMMON markers (`parse_summon`): (output index, owner pkh), in output order."""
    head = SUMMON_HEAD
    found: list[tuple[int, bytes]] = []
    for j, out in enumerate(tx.outputs):
        locking = out.locking
        if locking.startswith(head):
            pkh = parse_summon(locking)
            if pkh is not None:
                found.append((j, pkh))
    return found


class Classified(NamedTuple):
    """`detect`'s findings for one transaction, before they become `CauldronActivity` (a
    named tuple: made for every candidate of every block, a third the cost of a frozen
    dataclass)."""

    spends: list[SpendTuple]
    created: list[CreationTuple]
    ignored: dict[int, IgnoredReason]
    anomalies: list[Anomaly]

    @property
    def is_empty(self) -> bool:
        return not (self.spends or self.created or self.ignored or self.anomalies)


def classify(
    tx: TxView,
    inputs: list[PoolInput],
    summons: list[tuple[int, bytes]],
    known_owner: Callable[[bytes], bytes | None],
) -> Classified:
    """The second pass of `detect`: the spends' continuations and the new pools, given the
    pool inputs (`pool_inputs`), the SUMMON markers (`summon_markers`) and the known owners
    (`KnownOwners.owner_of`)."""
    outputs = tx.outputs
    n_outputs = len(outputs)
    spends: list[SpendTuple] = []
    anomalies: list[Anomaly] = []
    ignored: dict[int, IgnoredReason] = {}
    continuations: set[int] = set()
    # Owners this transaction reveals, by the rule that reveals them (first rule wins).
    revealed: dict[bytes, CreationVia] = {}
    for _, pkh in summons:
        revealed.setdefault(pkh, "summon")
    traded: list[bytes] = []
    version_2 = tx.version == 2
    for i, pkh, trade_path in inputs:
        if not trade_path:
            spends.append((i, "withdraw", pkh, None))
            revealed.setdefault(pkh, "withdraw_recreate")
            continue
        traded.append(pkh)
        if not version_2:
            anomalies.append(Anomaly(i, "version_not_2"))
        cont: int | None = None
        if i >= n_outputs:
            anomalies.append(Anomaly(i, "continuation_missing"))
        else:
            out = outputs[i]
            if out.locking != pool_locking_bytecode(pkh):
                anomalies.append(Anomaly(i, "continuation_wrong_bytecode"))
            else:
                token = out.token  # `pool_token_problem`, inline: once per pool move
                if token is not None and token.nft is None and token.amount >= 1:
                    cont = i
                else:
                    anomalies.append(Anomaly(i, "continuation_not_pool"))
                    problem = pool_token_problem(out)
                    if problem is not None:  # (always, here)
                        ignored[i] = problem
                continuations.add(i)
        spends.append((i, "trade", pkh, cont))
    for pkh in traded:
        revealed.setdefault(pkh, "known_owner")
    # Built when first needed: in a plain trade every P2SH32 output is a continuation.
    by_bytecode: dict[bytes, bytes] | None = None

    created: list[CreationTuple] = []
    for j, out in enumerate(outputs):
        if j in continuations:
            continue
        lk = out.locking
        if len(lk) != _P2SH32_LEN or not lk.startswith(_P2SH32_HEAD):
            continue
        if by_bytecode is None:
            by_bytecode = {pool_locking_bytecode(pkh): pkh for pkh in revealed}
        owner = by_bytecode.get(lk)
        via: CreationVia = "known_owner"
        if owner is not None:
            via = revealed[owner]
        else:
            owner = known_owner(lk)
            if owner is None:
                continue
        problem = pool_token_problem(out)
        if problem is None:
            created.append((j, owner, via))
        else:
            ignored[j] = problem
    return Classified(spends, created, ignored, anomalies)
