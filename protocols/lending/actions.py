"""Reading a transaction's lending activity: loan outputs, state outputs, allowances, and the
action each loan went through (borrow, repay, redeem, refinance, add_collateral, liquidation;
v11 adds delegate and accrue).

Classification uses only the transaction and the loans it spends (which the indexer knows):

- a loan output without a spent loan of the same borrower hash: **borrow**;
- a spent loan re-created for the same borrower hash (paired in order): only the delegate
  changed ⇒ **delegate** (v11); principal grew, rate kept, timestamp moved and no owner NFT in
  the outputs ⇒ **accrue** (v11, a keeper's crank); principal, rate or timestamp changed ⇒
  **refinance**; otherwise more collateral ⇒ **add_collateral** (less: refinance);
- a spent loan not re-created: the v11 pool re-created in the transaction ⇒ **liquidation** (the
  pool absorbed it); the owner's (or delegate's) NFT among the outputs ⇒ **repay**; an output
  paying the borrower's NFT hash ⇒ **redeem**; else ⇒ **liquidation** (a repay without the
  owner).

The owner is "present" when an output carries an NFT whose `nft_hash` is the loan's borrower or
delegate hash: spending an NFT to prove ownership means sending it on, and it stays in view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bch.token import Capability
from bch.tx import OutPoint, Transaction
from protocols.lending import v1, v11
from protocols.lending.contracts import LendingConfig, Version, p2nfth_locking

ActionKind = Literal[
    "borrow", "repay", "redeem", "refinance", "add_collateral", "liquidation", "delegate", "accrue"
]
ACTION_KINDS: tuple[ActionKind, ...] = (
    "borrow",
    "repay",
    "redeem",
    "refinance",
    "add_collateral",
    "liquidation",
    "delegate",
    "accrue",
)


@dataclass(frozen=True, slots=True)
class Loan:
    """One loan UTXO, whatever its version (v1 loans have no delegate)."""

    outpoint: OutPoint
    version: Version
    borrower_hash: bytes
    delegate_hash: bytes | None
    principal: int  # cents
    rate_bp: int
    timestamp: int
    collateral: int  # sats

    def as_v1(self) -> v1.LoanV1:
        return v1.LoanV1(self.borrower_hash, self.principal, self.rate_bp, self.timestamp)


@dataclass(frozen=True, slots=True)
class StateOutput:
    kind: Literal["bar", "pool"]
    vout: int
    staked: int
    shares: int
    bch_pot: int  # 0 for the bar
    token_amount: int  # fungible tokens the UTXO holds (should equal staked)
    sats: int


@dataclass(frozen=True, slots=True)
class LoanAction:
    kind: ActionKind
    version: Version
    borrower_hash: bytes
    before: Loan | None  # the spent loan (None: borrow)
    after: Loan | None  # the re-created loan (None: the loan ended)
    input_index: int | None
    interest: int | None  # cents owed at the block time, for actions ending or resetting a loan


def decode_loan(config: LendingConfig, op: OutPoint, sats: int, commitment: bytes) -> Loan:
    if config.version == "v1":
        a = v1.LoanV1.decode(commitment)
        return Loan(op, "v1", a.borrower_hash, None, a.principal, a.rate_bp, a.timestamp, sats)
    b = v11.LoanV11.decode(commitment)
    return Loan(op, "v11", b.borrower_hash, b.delegate, b.principal, b.rate_bp, b.timestamp, sats)


def loan_outputs(tx: Transaction, config: LendingConfig) -> list[Loan]:
    """The loans `tx` creates (by configured locking, category, capability and size)."""
    size = v1.COMMITMENT_SIZE if config.version == "v1" else v11.COMMITMENT_SIZE
    category = config.stablecoin_wire
    txid = tx.txid
    found = []
    for i, out in enumerate(tx.outputs):
        t = out.token
        if t is None or t.nft is None or t.category != category:
            continue
        if t.nft.capability != Capability.NONE or len(t.nft.commitment) != size:
            continue
        if not config.is_loan_locking(out.locking):
            continue
        found.append(decode_loan(config, OutPoint(txid, i), out.value, t.nft.commitment))
    return found


def state_outputs(tx: Transaction, config: LendingConfig) -> list[StateOutput]:
    """v11 bar and pool states `tx` creates."""
    if config.version != "v11":
        return []
    category = config.stablecoin_wire
    found = []
    for i, out in enumerate(tx.outputs):
        t = out.token
        if t is None or t.nft is None or t.category != category:
            continue
        if t.nft.capability != Capability.MUTABLE:
            continue
        c = t.nft.commitment
        try:
            if out.locking == config.bar_locking:
                b = v11.BarState.decode(c)
                found.append(StateOutput("bar", i, b.staked, b.shares, 0, t.amount, out.value))
            elif out.locking == config.pool_locking:
                p = v11.PoolState.decode(c)
                found.append(
                    StateOutput("pool", i, p.staked, p.shares, p.bch_pot, t.amount, out.value)
                )
        except ValueError:
            continue
    return found


def owner_hashes_present(tx: Transaction) -> set[bytes]:
    """nft_hash of every NFT among the outputs."""
    return {
        v1.nft_hash(o.token.category, o.token.nft.capability, o.token.nft.commitment)
        for o in tx.outputs
        if o.token is not None and o.token.nft is not None
    }


def allowance_outputs(tx: Transaction, lockings: Mapping[bytes, bytes]) -> list[tuple[int, bytes]]:
    """(vout, owner hash) of outputs paying a known owner's pay-to-NFT-hash locking."""
    return [(i, lockings[o.locking]) for i, o in enumerate(tx.outputs) if o.locking in lockings]


def classify(
    tx: Transaction,
    config: LendingConfig,
    spent: Mapping[int, Loan],
    now: int,
    created: list[Loan] | None = None,
) -> list[LoanAction]:
    """Actions of `tx` for one configured version. `spent`: input index → the loan it spends."""
    new = list(created if created is not None else loan_outputs(tx, config))
    present = owner_hashes_present(tx) if spent else set()
    pool_moved = any(s.kind == "pool" for s in state_outputs(tx, config)) if spent else False
    paid_to = {o.locking for o in tx.outputs}
    actions: list[LoanAction] = []
    for index in sorted(spent):
        before = spent[index]
        after = next((n for n in new if n.borrower_hash == before.borrower_hash), None)
        owed = v1.interest(before.principal, before.rate_bp, now, before.timestamp)
        if after is not None:
            new.remove(after)
            kind = _continuation(before, after, present)
            actions.append(
                LoanAction(
                    kind,
                    config.version,
                    before.borrower_hash,
                    before,
                    after,
                    index,
                    owed if kind in ("refinance", "accrue") else None,
                )
            )
            continue
        owners = {before.borrower_hash} | (
            {before.delegate_hash} if before.delegate_hash else set()
        )
        if config.version == "v11" and pool_moved:
            kind = "liquidation"
        elif owners & present:
            kind = "repay"
        elif p2nfth_locking(before.borrower_hash) in paid_to:
            kind = "redeem"
        else:
            kind = "liquidation"
        actions.append(
            LoanAction(kind, config.version, before.borrower_hash, before, None, index, owed)
        )
    for loan in new:
        actions.append(
            LoanAction("borrow", config.version, loan.borrower_hash, None, loan, None, None)
        )
    return actions


def _continuation(before: Loan, after: Loan, present: set[bytes]) -> ActionKind:
    same_terms = (before.principal, before.rate_bp, before.timestamp) == (
        after.principal,
        after.rate_bp,
        after.timestamp,
    )
    if before.version == "v11":
        if (
            same_terms
            and before.collateral == after.collateral
            and (before.delegate_hash != after.delegate_hash)
        ):
            return "delegate"
        owners = {before.borrower_hash} | (
            {before.delegate_hash} if before.delegate_hash else set()
        )
        if (
            after.principal > before.principal
            and after.rate_bp == before.rate_bp
            and after.timestamp > before.timestamp
            and not owners & present
        ):
            return "accrue"
    if not same_terms:
        return "refinance"
    if after.collateral > before.collateral:
        return "add_collateral"
    return "refinance"
