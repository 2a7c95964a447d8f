"""Several deployments of one version side by side (issue 18 item 6): a spent loan is read by
the deployment it belongs to — the one whose contract its spend reveals, else the one
re-creating it — never by the first of its version; overlapping deployments write an output
once. Hand-built transactions through `decode_lending_tx`."""

from __future__ import annotations

from bch.script import p2pkh_locking, p2sh32_locking_for_redeem, push_data
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from indexer.decoders.lending import LendingContext, decode_lending_tx
from indexer.decoders.lending.decoder import ActionRow, LoanCreated, LoanSpent, deployment_of
from indexer.store.decoder import BlockTx
from protocols.lending import LendingConfig, Loan, devnet_config, v1
from protocols.lending.contracts import loan_redeem

DEVNET_STABLE = bytes([0x5C]) * 32  # wire order
OTHER_STABLE = bytes([0x7E]) * 32
AGENT = bytes([0xA6]) * 32
MAINNET = LendingConfig()  # any P2SH32, the mainnet stablecoin
DEVNET = devnet_config("v1", DEVNET_STABLE[::-1].hex(), "01" * 32, "02" * 32, AGENT[::-1].hex())
DEVNET11 = devnet_config("v11", DEVNET_STABLE[::-1].hex(), "01" * 32, "02" * 32, AGENT[::-1].hex())
LADLE_UP = (MAINNET, DEVNET, DEVNET11)
USER = p2pkh_locking(bytes(20))
OWNER_NFT = NFT(Capability.NONE, b"borrower-1")
OWNER = v1.nft_hash(AGENT, Capability.NONE, b"borrower-1")
LOCK = p2sh32_locking_for_redeem(loan_redeem("v1"))
SPENT = OutPoint(bytes([9]) * 32, 0)
TERMS = v1.LoanV1(OWNER, 20_000, 400, 1_000_000)


def loan_out(sats: int, terms: v1.LoanV1, category: bytes = DEVNET_STABLE) -> TxOutput:
    return TxOutput(sats, LOCK, TokenData(category, 0, NFT(Capability.NONE, terms.encode())))


def live(sats: int = 10**8) -> Loan:
    t = TERMS
    return Loan(SPENT, "v1", t.borrower_hash, None, t.principal, t.rate_bp, t.timestamp, sats)


def spend(outputs: list[TxOutput], unlocking: bytes = push_data(loan_redeem("v1"))) -> BlockTx:
    tx = Transaction.build(
        [TxInput(SPENT, unlocking), TxInput(OutPoint(bytes([1]) * 32, 0), b"")], outputs
    )
    return BlockTx(0, tx.txid, tx)


def decode(tx: BlockTx, configs: tuple[LendingConfig, ...], loan: Loan) -> list[object]:
    ctx = LendingContext(2_000_000, {loan.outpoint: loan}, set(), {})
    return list(decode_lending_tx(tx, ctx, configs))


def actions(rows: list[object]) -> list[str]:
    return [r.action.kind for r in rows if isinstance(r, ActionRow)]


def test_a_devnet_loan_re_created_is_one_action_beside_the_mainnet_deployment() -> None:
    owner = TxOutput(1000, USER, TokenData(AGENT, 0, OWNER_NFT))
    more = spend([loan_out(2 * 10**8, TERMS)])  # no owner NFT: was liquidation + borrow
    refi = spend([loan_out(10**8, v1.LoanV1(OWNER, 30_000, 400, 1_500_000)), owner])
    for tx, kind in ((more, "add_collateral"), (refi, "refinance")):
        rows = decode(tx, LADLE_UP, live())
        assert actions(rows) == [kind]  # was [liquidation|repay, borrow]
        (spent,) = [r for r in rows if isinstance(r, LoanSpent)]
        assert spent.outpoint == SPENT and spent.action == kind
        (act,) = [r for r in rows if isinstance(r, ActionRow)]
        assert act.seq == 0 and act.action.version == "v1" and act.action.after is not None
    # An ending reads the same whichever order the deployments are configured in.
    repay = spend([owner, TxOutput(10**8, USER)])
    for configs in (LADLE_UP, (DEVNET, MAINNET, DEVNET11)):
        assert actions(decode(repay, configs, live())) == ["repay"]


def test_the_deployment_of_a_spent_loan() -> None:
    redeem = push_data(loan_redeem("v1"))
    nothing: list[list[Loan]] = [[], [], []]
    # The spend reveals the devnet's loan contract: the devnet deployment, not the first v1.
    assert deployment_of(live(), redeem, LADLE_UP, nothing) == 1
    # A contract no exact deployment lists: the any-P2SH32 one.
    assert deployment_of(live(), push_data(b"another contract"), LADLE_UP, nothing) == 0
    assert deployment_of(live(), b"\xff", LADLE_UP, nothing) == 0  # not push-only
    # Two any-P2SH32 deployments of different categories: the one re-creating the loan.
    other = LendingConfig(stablecoin=OTHER_STABLE[::-1].hex())
    again = Loan(OutPoint(bytes(32), 0), "v1", OWNER, None, 1, 1, 1, 1)
    assert deployment_of(live(), redeem, (MAINNET, other), [[], [again]]) == 1
    assert deployment_of(live(), redeem, (MAINNET, other), [[], []]) == 0
    assert deployment_of(live(), redeem, (DEVNET11,), [[]]) is None  # no v1 deployment


def test_overlapping_deployments_write_a_loan_output_once() -> None:
    tx = spend([loan_out(2 * 10**8, TERMS)])
    rows = decode(tx, (DEVNET, DEVNET, MAINNET), live())
    assert actions(rows) == ["add_collateral"]
    assert len([r for r in rows if isinstance(r, LoanCreated)]) == 1
