"""Classifying lending transactions, for both versions, from hand-built transactions."""

from __future__ import annotations

from bch.script import p2pkh_locking, p2sh32_locking_for_redeem
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.lending import classify, devnet_config, loan_outputs, state_outputs, v1, v11
from protocols.lending.actions import Loan
from protocols.lending.contracts import loan_redeem, p2nfth_locking

STABLE = bytes([0x5C]) * 32  # wire order
AGENT = bytes([0xA6]) * 32
CFG = devnet_config("v1", STABLE[::-1].hex(), "01" * 32, "02" * 32, AGENT[::-1].hex())
CFG11 = devnet_config("v11", STABLE[::-1].hex(), "01" * 32, "02" * 32, AGENT[::-1].hex())
USER = p2pkh_locking(bytes(20))
OWNER_NFT = NFT(Capability.NONE, b"borrower-1")
OWNER_HASH = v1.nft_hash(AGENT, Capability.NONE, b"borrower-1")
LOAN_LOCK = p2sh32_locking_for_redeem(loan_redeem("v1"))
LOAN11_LOCK = p2sh32_locking_for_redeem(loan_redeem("v11"))


def loan_out(sats: int, loan: v1.LoanV1, locking: bytes = LOAN_LOCK) -> TxOutput:
    return TxOutput(sats, locking, TokenData(STABLE, 0, NFT(Capability.NONE, loan.encode())))


def owner_out() -> TxOutput:
    return TxOutput(1000, USER, TokenData(AGENT, 0, OWNER_NFT))


def build(inputs: int, outputs: list[TxOutput]) -> Transaction:
    return Transaction.build(
        [TxInput(OutPoint(bytes([i + 1]) * 32, 0), b"") for i in range(inputs)], outputs
    )


def spent(loan: v1.LoanV1, sats: int) -> Loan:
    return Loan(
        OutPoint(bytes(32), 0),
        "v1",
        loan.borrower_hash,
        None,
        loan.principal,
        loan.rate_bp,
        loan.timestamp,
        sats,
    )


L = v1.LoanV1(OWNER_HASH, 20_000, 400, 1_000_000)


def test_loan_outputs_need_locking_category_capability_and_size() -> None:
    good = loan_out(10**8, L)
    wrong_lock = loan_out(10**8, L, USER)
    mutable = TxOutput(10**8, LOAN_LOCK, TokenData(STABLE, 0, NFT(Capability.MUTABLE, L.encode())))
    other_cat = TxOutput(10**8, LOAN_LOCK, TokenData(AGENT, 0, NFT(Capability.NONE, L.encode())))
    short = TxOutput(10**8, LOAN_LOCK, TokenData(STABLE, 0, NFT(Capability.NONE, bytes(39))))
    tx = build(1, [wrong_lock, mutable, good, other_cat, short])
    loans = loan_outputs(tx, CFG)
    assert [x.outpoint.index for x in loans] == [2]
    assert loans[0].principal == 20_000 and loans[0].collateral == 10**8
    assert loan_outputs(tx, CFG11) == []  # a v11 deployment reads its own contract and size


def kinds(tx: Transaction, s: dict[int, Loan], cfg=CFG) -> list[str]:  # type: ignore[no-untyped-def]
    return [a.kind for a in classify(tx, cfg, s, 2_000_000)]


def test_v1_actions() -> None:
    before = spent(L, 10**8)
    assert kinds(build(1, [loan_out(10**8, L), owner_out()]), {}) == ["borrow"]
    assert kinds(build(2, [owner_out(), TxOutput(10**8, USER)]), {0: before}) == ["repay"]
    assert kinds(build(2, [TxOutput(10**8 // 2, p2nfth_locking(OWNER_HASH))]), {0: before}) == [
        "redeem"
    ]
    assert kinds(build(2, [TxOutput(10**8, USER)]), {0: before}) == ["liquidation"]
    more = loan_out(2 * 10**8, L)
    assert kinds(build(2, [more, owner_out()]), {0: before}) == ["add_collateral"]
    refi = loan_out(10**8, v1.LoanV1(OWNER_HASH, 30_000, 400, 1_500_000))
    actions = classify(build(2, [refi, owner_out()]), CFG, {0: before}, 2_000_000)
    assert [a.kind for a in actions] == ["refinance"]
    assert actions[0].interest == v1.interest(20_000, 400, 2_000_000, 1_000_000)
    assert actions[0].after is not None and actions[0].after.principal == 30_000


def test_two_loans_in_one_transaction() -> None:
    other_hash = bytes([9]) * 32
    l2 = v1.LoanV1(other_hash, 5_000, 100, 1)
    tx = build(2, [owner_out(), loan_out(10**7, l2)])
    acts = classify(tx, CFG, {1: spent(L, 10**8)}, 2_000_000)
    assert sorted(a.kind for a in acts) == ["borrow", "repay"]


def test_v11_actions() -> None:
    delegate = bytes([0xDE]) * 32
    base = v11.LoanV11(OWNER_HASH, v11.NO_DELEGATE, 20_000, 400, 1_000_000)

    def out(loan: v11.LoanV11, sats: int = 10**8) -> TxOutput:
        return TxOutput(
            sats, LOAN11_LOCK, TokenData(STABLE, 0, NFT(Capability.NONE, loan.encode()))
        )

    before = loan_outputs(build(1, [out(base)]), CFG11)[0]
    with_delegate = v11.LoanV11(OWNER_HASH, delegate, 20_000, 400, 1_000_000)
    assert kinds(build(1, [out(with_delegate), owner_out()]), {0: before}, CFG11) == ["delegate"]
    rolled = v11.accrued(base, 1_000_000 + 31 * 86_400)
    assert kinds(build(1, [out(rolled)]), {0: before}, CFG11) == ["accrue"]
    pool = TxOutput(
        5000,
        CFG11.pool_locking or b"",
        TokenData(STABLE, 100, NFT(Capability.MUTABLE, v11.PoolState(100, 100, 4000).encode())),
    )
    tx = build(2, [pool, TxOutput(10**7, p2nfth_locking(OWNER_HASH))])
    assert kinds(tx, {0: before}, CFG11) == ["liquidation"]
    assert [(s.kind, s.bch_pot) for s in state_outputs(tx, CFG11)] == [("pool", 4000)]
    assert state_outputs(tx, CFG) == []  # v1 has no bar or pool
    assert kinds(build(2, [TxOutput(10**7, p2nfth_locking(OWNER_HASH))]), {0: before}, CFG11) == [
        "redeem"
    ]
