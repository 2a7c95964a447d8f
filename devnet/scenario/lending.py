"""Lending activity for the scenario (a `ScenarioExtension`): full loan lifecycles of both
protocol versions, the v11 bar and liquidation pool, and allowances, as real transactions.

Set-up creates the stablecoin category (a minting NFT and the fungible supply, 2 decimals, held
by the protocol wallet) and the loan-agent category (a minting NFT; owner NFTs are immutable NFTs
of it), then the v11 bar and pool states. During the history, at fixed fractions of it:

- v1: borrow (A, D, F) → add_collateral (A) → refinance (A) → repay (A); redeem (F, leftover
  to the borrower's pay-to-NFT-hash allowance, later spent); liquidation (D, the keeper takes all);
- v11: borrow (B; C with a delegate; E) → add_collateral (B) → refinance (B) → delegate (B)
  → repay (B, interest to the bar); borrow (G, after the rate rise) → redeem (G, leftover to
  its allowance); accrue (C, by the keeper); liquidation through the pool (E: the pool's
  stablecoin absorbs the debt, the collateral goes to the BCH pot, the rest to an allowance);
  bar and pool stake and unstake — so each deployment shows every action kind it has;
- the interest-rate oracle (its own category, a mutable NFT re-created by each update, the
  10-byte `timestamp ‖ use_fee ‖ bp_value` commitment): 100 bp at set-up (no loan redeemable),
  360 bp before the first repay (the 350 bp v11 loan C and the 150 bp v1 loan F become
  redeemable; F is redeemed), 200 bp after the accrue (C no longer is).

The contracts are the devnet's stand-ins (`protocols.lending.contracts`): the layouts are real,
the covenants are not modelled, so price rules are not enforced by the chain — the scenario
keeps borrows at ≥ 150 % but processes liquidations and redemptions on schedule. Amounts follow
the protocol formulas (`protocols.lending.v1`). The ledger part lists every action, state and
allowance with the final chain's heights and times (see `ledger_json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bch.script import p2sh32_locking_for_redeem, push_data
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxOutput, hash_to_hex
from devnet.blocks import COIN
from devnet.scenario.coins import TOKEN_DUST, Draft, Purse, Spend
from protocols.ledger import TxKind
from protocols.ledger_deployments import LENDING_PART
from protocols.lending import v1, v11
from protocols.lending.contracts import (
    LendingConfig,
    Version,
    bar_redeem,
    devnet_config,
    loan_redeem,
    p2nfth_locking,
    p2nfth_redeem,
    pool_redeem,
)

if TYPE_CHECKING:
    from devnet.scenario.generator import ScenarioGenerator

SUPPLY = 10**12  # stablecoin cents
STATE_SATS = v11.POOL_BASE_SATS
ALLOWANCE_MIN = 1_000
KIND: TxKind = "lending"
# The stand-in contracts keep state in NFT commitments longer than 40 bytes: the May 2026
# upgrade's rules (up to 128); a node enforcing older rules refuses them.
MIN_VM_YEAR = 2026
RATE_USE_FEE = 500  # sats a contract pays per use of the rate oracle
RATE_START_BP = 100
RATE_STEPS = {"rate_up": 360, "rate_down": 200}  # step name -> the oracle's new bp value
INTEREST_KINDS = ("refinance", "accrue", "repay", "redeem", "liquidation")
# (fraction of the history, step name)
SCHEDULE: tuple[tuple[float, str], ...] = (
    (0.05, "borrow"),
    (0.10, "stake"),
    (0.20, "add_collateral"),
    (0.30, "refinance"),
    (0.35, "delegate"),
    (0.40, "rate_up"),
    (0.45, "repay"),
    (0.50, "borrow_late"),
    (0.55, "redeem"),
    (0.60, "liquidate"),
    (0.65, "pool_liquidate"),
    (0.70, "accrue"),
    (0.75, "rate_down"),
    (0.80, "claim"),
    (0.90, "unstake"),
)


@dataclass(slots=True)
class LiveLoan:
    name: str
    version: Version
    borrower: Purse
    owner_nft: tuple[OutPoint, TxOutput]
    borrower_hash: bytes
    delegate_hash: bytes
    principal: int
    rate_bp: int
    timestamp: int
    outpoint: OutPoint
    output: TxOutput

    def commitment(self) -> bytes:
        if self.version == "v1":
            return v1.LoanV1(
                self.borrower_hash, self.principal, self.rate_bp, self.timestamp
            ).encode()
        return v11.LoanV11(
            self.borrower_hash, self.delegate_hash, self.principal, self.rate_bp, self.timestamp
        ).encode()


@dataclass(slots=True)
class Record:
    """What the scenario did, to be placed on the final chain in `ledger_json`."""

    txid: bytes
    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class LendingExtension:
    name = LENDING_PART

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.loans: dict[str, LiveLoan] = {}
        self.stable = b""
        self.agent = b""
        self.configs: tuple[LendingConfig, ...] = ()
        self.minter: dict[bytes, tuple[OutPoint, TxOutput]] = {}
        self.states: dict[str, tuple[OutPoint, TxOutput, int, int, int]] = {}
        self.allowances: dict[str, tuple[OutPoint, TxOutput, bytes]] = {}
        self.rate_category = b""
        self.rate_utxo: tuple[OutPoint, TxOutput] | None = None
        self._plan: dict[int, str] = {}
        self._n = 0

    # --- helpers ----------------------------------------------------------------------------

    def _purse(self, gen: ScenarioGenerator, name: str) -> Purse:
        wallet = gen.wallet(f"ladle scenario {gen.params.seed}/lending-{name}")
        return gen.book.register(Purse(f"lending-{name}", wallet, "lending"))

    def _lock(self, version: Version) -> bytes:
        return p2sh32_locking_for_redeem(loan_redeem(version))

    async def _send(self, gen: ScenarioGenerator, draft: Draft, payer: Purse) -> Transaction:
        tx = await gen._complete(draft, payer)
        await gen.submit(tx, KIND)
        return tx

    def _mint_spend(self, draft: Draft, category: bytes) -> int:
        """Spend the minting NFT of `category` and send it back (returns its output index)."""
        op, out = self.minter[category]
        draft.spend(Spend(op, out, self.protocol.wallet))
        return draft.pay(out)

    def _minted(self, tx: Transaction, index: int, category: bytes) -> None:
        self.minter[category] = (OutPoint(tx.txid, index), tx.outputs[index])

    # --- set-up -----------------------------------------------------------------------------

    async def setup(self, gen: ScenarioGenerator) -> None:
        self.protocol = self._purse(gen, "protocol")
        self.keeper = self._purse(gen, "keeper")
        self.borrowers = [self._purse(gen, f"borrower{i}") for i in range(6)]
        coin_s = await gen.faucet(self.protocol, COIN)
        coin_a = await gen.faucet(self.protocol, COIN)
        self.stable, self.agent = coin_s.txid, coin_a.txid
        for coin, supply in ((coin_s, SUPPLY), (coin_a, 0)):
            draft = Draft()
            draft.spend_p2pkh(self.protocol, OutPoint(coin.txid, 0), coin.outputs[0])
            cat = coin.txid
            draft.pay(
                TxOutput(
                    TOKEN_DUST,
                    self.protocol.locking,
                    TokenData(cat, 0, NFT(Capability.MINTING, b"")),
                )
            )
            if supply:
                draft.pay(TxOutput(TOKEN_DUST, self.protocol.locking, TokenData(cat, supply)))
            tx = await self._send(gen, draft, self.protocol)
            self._minted(tx, 0, cat)
        stable_hex, agent_hex = hash_to_hex(self.stable), hash_to_hex(self.agent)
        oracle_hex = hash_to_hex(gen.oracle_category)
        self.rate_operator = self._purse(gen, "rate-operator")
        coin_r = await gen.faucet(self.rate_operator, COIN)
        self.rate_category = coin_r.txid
        rate_hex = hash_to_hex(self.rate_category)
        self.configs = tuple(
            devnet_config(v, stable_hex, oracle_hex, rate_hex, agent_hex) for v in ("v1", "v11")
        )
        # Borrowers and the keeper hold some stablecoin for interest and repayments.
        draft = Draft()
        for p in [*self.borrowers, self.keeper]:
            draft.pay_tokens(p, self.stable, 2_000_000)
        draft.spend_tokens(self.protocol, self.stable, 2_000_000 * (len(self.borrowers) + 1))
        await self._send(gen, draft, self.protocol)
        # The v11 bar and pool, each seeded with 1,000.00 by the protocol.
        draft = Draft()
        mint = self._mint_spend(draft, self.stable)
        for kind in ("bar", "pool"):
            draft.pay(self._state_output(kind, 100_000, 100_000, 0))
        draft.spend_tokens(self.protocol, self.stable, 200_000)
        tx = await self._send(gen, draft, self.protocol)
        self._minted(tx, mint, self.stable)
        for i, kind in enumerate(("bar", "pool"), start=1):
            self._record_state(tx, i, kind, 100_000, 100_000, 0)
        # The interest-rate oracle: its genesis spends output 0 of its coin.
        op = OutPoint(coin_r.txid, 0)
        genesis = Spend(op, coin_r.outputs[0], self.rate_operator.wallet)
        await self._publish_rate(gen, genesis, RATE_START_BP)
        total = gen.params.days * gen.params.blocks_per_day
        for fraction, step in SCHEDULE:
            slot = int(total * fraction)
            while slot in self._plan:
                slot += 1
            self._plan[slot] = step

    def _state_output(self, kind: str, staked: int, shares: int, pot: int) -> TxOutput:
        if kind == "bar":
            lock = p2sh32_locking_for_redeem(bar_redeem())
            commitment = v11.BarState(staked, shares).encode()
        else:
            lock = p2sh32_locking_for_redeem(pool_redeem())
            commitment = v11.PoolState(staked, shares, pot).encode()
        nft = NFT(Capability.MUTABLE, commitment)
        return TxOutput(STATE_SATS + pot, lock, TokenData(self.stable, staked, nft))

    def _record_state(
        self, tx: Transaction, vout: int, kind: str, staked: int, shares: int, pot: int
    ) -> None:
        self.states[kind] = (OutPoint(tx.txid, vout), tx.outputs[vout], staked, shares, pot)
        self.records.append(
            Record(
                tx.txid,
                "state",
                {"state": kind, "vout": vout, "staked": staked, "shares": shares, "bch_pot": pot},
            )
        )

    def _spend_state(self, draft: Draft, kind: str) -> tuple[int, int, int]:
        op, out, staked, shares, pot = self.states[kind]
        redeem = bar_redeem() if kind == "bar" else pool_redeem()
        draft.spend(Spend(op, out, None, push_data(redeem)))
        return staked, shares, pot

    async def _publish_rate(self, gen: ScenarioGenerator, first: Spend, bp: int) -> None:
        """Re-create the rate oracle's NFT (output 0) with `bp` at the block's time."""
        commitment = v1.RateCommitment(gen.clock.now(), RATE_USE_FEE, bp)
        nft = NFT(Capability.MUTABLE, commitment.encode())
        draft = Draft()
        draft.spend(first)
        operator = self.rate_operator
        draft.pay(TxOutput(TOKEN_DUST, operator.locking, TokenData(self.rate_category, 0, nft)))
        tx = await self._send(gen, draft, operator)
        self.rate_utxo = (OutPoint(tx.txid, 0), tx.outputs[0])
        data = {"vout": 0, "bp": bp, "timestamp": commitment.timestamp, "use_fee": RATE_USE_FEE}
        self.records.append(Record(tx.txid, "rate", data))

    async def _step_rate(self, gen: ScenarioGenerator, step: str) -> None:
        assert self.rate_utxo is not None
        op, out = self.rate_utxo
        await self._publish_rate(gen, Spend(op, out, self.rate_operator.wallet), RATE_STEPS[step])

    async def _step_rate_up(self, gen: ScenarioGenerator) -> None:
        await self._step_rate(gen, "rate_up")

    async def _step_rate_down(self, gen: ScenarioGenerator) -> None:
        await self._step_rate(gen, "rate_down")

    # --- the timeline -----------------------------------------------------------------------

    async def on_slot(self, gen: ScenarioGenerator, slot: int) -> None:
        step = self._plan.get(slot)
        if step is not None:
            await getattr(self, f"_step_{step}")(gen)

    async def _borrow(
        self,
        gen: ScenarioGenerator,
        name: str,
        version: Version,
        borrower: Purse,
        principal: int,
        rate_bp: int,
        delegate: bytes = v11.NO_DELEGATE,
    ) -> None:
        price = gen.oracle_price
        collateral = -(-3 * principal * v1.SATS_PER_BCH // (2 * price)) * 11 // 10  # ≥ 150 %
        assert v1.can_borrow(collateral, principal, price)
        commitment = f"ladle-owner/{name}".encode()
        owner_hash = v1.nft_hash(self.agent, Capability.NONE, commitment)
        await gen.ensure_bch(borrower, collateral + COIN // 10)
        draft = Draft()
        m_stable = self._mint_spend(draft, self.stable)
        m_agent = self._mint_spend(draft, self.agent)
        loan = LiveLoan(
            name,
            version,
            borrower,
            (OutPoint(bytes(32), 0), TxOutput(0, b"")),
            owner_hash,
            delegate,
            principal,
            rate_bp,
            gen.clock.now(),
            OutPoint(bytes(32), 0),
            TxOutput(0, b""),
        )
        loan_vout = draft.pay(
            TxOutput(
                collateral,
                self._lock(version),
                TokenData(self.stable, 0, NFT(Capability.NONE, loan.commitment())),
            )
        )
        owner_vout = draft.pay(
            TxOutput(
                TOKEN_DUST,
                borrower.locking,
                TokenData(self.agent, 0, NFT(Capability.NONE, commitment)),
            )
        )
        draft.pay_tokens(borrower, self.stable, principal)
        draft.spend_tokens(self.protocol, self.stable, principal)
        tx = await self._send(gen, draft, borrower)
        self._minted(tx, m_stable, self.stable)
        self._minted(tx, m_agent, self.agent)
        loan.owner_nft = (OutPoint(tx.txid, owner_vout), tx.outputs[owner_vout])
        loan.outpoint, loan.output = OutPoint(tx.txid, loan_vout), tx.outputs[loan_vout]
        self.loans[name] = loan
        self.records.append(Record(tx.txid, "borrow", self._loan_json(loan)))

    def _loan_json(self, loan: LiveLoan, **extra: Any) -> dict[str, Any]:
        return {
            "loan": loan.name,
            "version": loan.version,
            "borrower_hash": loan.borrower_hash.hex(),
            "delegate_hash": None
            if loan.delegate_hash == v11.NO_DELEGATE
            else loan.delegate_hash.hex(),
            "principal": loan.principal,
            "rate_bp": loan.rate_bp,
            "loan_ts": loan.timestamp,
            "collateral": loan.output.value,
            "vout": loan.outpoint.index,
            **extra,
        }

    async def _step_borrow(self, gen: ScenarioGenerator) -> None:
        b = self.borrowers
        await self._borrow(gen, "A", "v1", b[0], 50_000, 300)
        await self._borrow(gen, "D", "v1", b[3], 20_000, 500)
        await self._borrow(gen, "F", "v1", b[5], 30_000, 150)
        await self._borrow(gen, "B", "v11", b[1], 40_000, 400)
        delegate = v1.nft_hash(self.agent, Capability.NONE, b"ladle-delegate/keeper")
        await self._borrow(gen, "C", "v11", b[2], 25_000, 350, delegate)
        await self._borrow(gen, "E", "v11", b[4], 60_000, 450)

    def _spend_loan(self, draft: Draft, loan: LiveLoan) -> None:
        draft.spend(Spend(loan.outpoint, loan.output, None, push_data(loan_redeem(loan.version))))

    def _spend_owner(self, draft: Draft, loan: LiveLoan) -> int:
        op, out = loan.owner_nft
        draft.spend(Spend(op, out, loan.borrower.wallet))
        return draft.pay(out)

    async def _continue(
        self,
        gen: ScenarioGenerator,
        loan: LiveLoan,
        kind: str,
        *,
        sats: int | None = None,
        principal: int | None = None,
        delegate: bytes | None = None,
        timestamp: int | None = None,
        owner: bool = True,
        payer: Purse | None = None,
    ) -> None:
        """Spend the loan and re-create it with new terms (minting a new NFT if they change)."""
        before = self._loan_json(loan)
        draft = Draft()
        self._spend_loan(draft, loan)
        changed = principal is not None or delegate is not None or timestamp is not None
        mint = self._mint_spend(draft, self.stable) if changed else None
        owner_vout = self._spend_owner(draft, loan) if owner else None
        extra = 0 if principal is None else principal - loan.principal
        loan.principal = principal if principal is not None else loan.principal
        loan.delegate_hash = delegate if delegate is not None else loan.delegate_hash
        loan.timestamp = timestamp if timestamp is not None else loan.timestamp
        value = sats if sats is not None else loan.output.value
        if sats is not None:
            await gen.ensure_bch(loan.borrower, sats - loan.output.value + COIN // 10)
        vout = draft.pay(
            TxOutput(
                value,
                self._lock(loan.version),
                TokenData(self.stable, 0, NFT(Capability.NONE, loan.commitment())),
            )
        )
        if extra > 0 and kind == "refinance":
            draft.pay_tokens(loan.borrower, self.stable, extra)
            draft.spend_tokens(self.protocol, self.stable, extra)
        tx = await self._send(gen, draft, payer or loan.borrower)
        if mint is not None:
            self._minted(tx, mint, self.stable)
        if owner_vout is not None:
            loan.owner_nft = (OutPoint(tx.txid, owner_vout), tx.outputs[owner_vout])
        loan.outpoint, loan.output = OutPoint(tx.txid, vout), tx.outputs[vout]
        self.records.append(Record(tx.txid, kind, {"before": before, **self._loan_json(loan)}))

    async def _step_add_collateral(self, gen: ScenarioGenerator) -> None:
        a = self.loans["A"]
        await self._continue(gen, a, "add_collateral", sats=a.output.value * 3 // 2, owner=False)
        b = self.loans["B"]  # v11, by its owner
        await self._continue(gen, b, "add_collateral", sats=b.output.value * 5 // 4)

    async def _step_refinance(self, gen: ScenarioGenerator) -> None:
        a = self.loans["A"]
        await self._continue(
            gen, a, "refinance", principal=a.principal + 10_000, timestamp=gen.clock.now()
        )
        b = self.loans["B"]
        await self._continue(
            gen, b, "refinance", principal=b.principal + 5_000, timestamp=gen.clock.now()
        )

    async def _step_delegate(self, gen: ScenarioGenerator) -> None:
        delegate = v1.nft_hash(self.agent, Capability.NONE, b"ladle-delegate/B")
        await self._continue(gen, self.loans["B"], "delegate", delegate=delegate)

    async def _step_accrue(self, gen: ScenarioGenerator) -> None:
        c = self.loans["C"]
        rolled = v11.accrued(
            v11.LoanV11(c.borrower_hash, c.delegate_hash, c.principal, c.rate_bp, c.timestamp),
            gen.clock.now(),
        )
        await self._continue(
            gen,
            c,
            "accrue",
            principal=rolled.principal,
            timestamp=rolled.timestamp,
            owner=False,
            payer=self.keeper,
        )

    def _interest(self, gen: ScenarioGenerator, loan: LiveLoan) -> int:
        """Owed at the block being built (the generator's clock is at its time)."""
        return v1.interest(loan.principal, loan.rate_bp, gen.clock.now(), loan.timestamp)

    async def _close(
        self,
        gen: ScenarioGenerator,
        loan: LiveLoan,
        kind: str,
        draft: Draft,
        payer: Purse,
        **extra: Any,
    ) -> Transaction:
        before = self._loan_json(loan)
        tx = await self._send(gen, draft, payer)
        del self.loans[loan.name]
        self.records.append(Record(tx.txid, kind, {**before, **extra}))
        return tx

    async def _step_repay(self, gen: ScenarioGenerator) -> None:
        for name in ("A", "B"):
            loan = self.loans[name]
            interest = self._interest(gen, loan)
            draft = Draft()
            self._spend_loan(draft, loan)
            owner_vout = self._spend_owner(draft, loan)
            draft.pay(TxOutput(loan.output.value, loan.borrower.locking))
            draft.pay_tokens(self.protocol, self.stable, loan.principal)
            bar = None
            if loan.version == "v11":  # the interest goes to the bar's stakers
                staked, shares, pot = self._spend_state(draft, "bar")
                bar = draft.pay(self._state_output("bar", staked + interest, shares, pot))
                await gen.ensure_bch(loan.borrower, COIN // 10)
            else:
                draft.pay_tokens(self.protocol, self.stable, interest)
            draft.spend_tokens(loan.borrower, self.stable, loan.principal + interest)
            tx = await self._close(gen, loan, "repay", draft, loan.borrower, paid_interest=interest)
            loan.owner_nft = (OutPoint(tx.txid, owner_vout), tx.outputs[owner_vout])
            if bar is not None:
                self._record_state(tx, bar, "bar", staked + interest, shares, pot)

    async def _step_borrow_late(self, gen: ScenarioGenerator) -> None:
        """A v11 loan at a rate the oracle already allows redeeming (added after the first
        lifecycles so that the earlier history stays as it was)."""
        await self._borrow(gen, "G", "v11", self.borrowers[1], 30_000, 300)

    async def _step_redeem(self, gen: ScenarioGenerator) -> None:
        await self._redeem(gen, "F")
        await self._redeem(gen, "G")

    async def _redeem(self, gen: ScenarioGenerator, name: str) -> None:
        loan = self.loans[name]
        price = gen.oracle_price
        owed = loan.principal + self._interest(gen, loan)
        to_keeper = min(loan.output.value, owed * v1.SATS_PER_BCH // price)
        rest = loan.output.value - to_keeper
        draft = Draft()
        self._spend_loan(draft, loan)
        draft.pay(TxOutput(to_keeper, self.keeper.locking))
        vout = draft.pay(TxOutput(rest, p2nfth_locking(loan.borrower_hash)))
        draft.pay_tokens(self.protocol, self.stable, owed)
        draft.spend_tokens(self.keeper, self.stable, owed)
        tx = await self._close(gen, loan, "redeem", draft, self.keeper, price=price)
        self._allowance(tx, vout, loan)

    def _allowance(self, tx: Transaction, vout: int, loan: LiveLoan) -> None:
        self.allowances[loan.name] = (OutPoint(tx.txid, vout), tx.outputs[vout], loan.borrower_hash)
        self.records.append(
            Record(
                tx.txid,
                "allowance",
                {
                    "vout": vout,
                    "owner_hash": loan.borrower_hash.hex(),
                    "sats": tx.outputs[vout].value,
                },
            )
        )

    async def _step_liquidate(self, gen: ScenarioGenerator) -> None:
        loan = self.loans["D"]
        owed = loan.principal + self._interest(gen, loan)
        draft = Draft()
        self._spend_loan(draft, loan)
        draft.pay(TxOutput(loan.output.value, self.keeper.locking))
        draft.pay_tokens(self.protocol, self.stable, owed)
        draft.spend_tokens(self.keeper, self.stable, owed)
        await self._close(gen, loan, "liquidation", draft, self.keeper)

    async def _step_pool_liquidate(self, gen: ScenarioGenerator) -> None:
        loan = self.loans["E"]
        price = gen.oracle_price
        owed = loan.principal + self._interest(gen, loan)
        seized = min(loan.output.value, owed * v1.SATS_PER_BCH // price * 11 // 10)
        rest = loan.output.value - seized
        draft = Draft()
        self._spend_loan(draft, loan)
        staked, shares, pot = self._spend_state(draft, "pool")
        new_staked, new_pot = max(0, staked - owed), pot + seized
        pool = draft.pay(self._state_output("pool", new_staked, shares, new_pot))
        vout = None
        if rest >= ALLOWANCE_MIN:
            vout = draft.pay(TxOutput(rest, p2nfth_locking(loan.borrower_hash)))
        await gen.ensure_bch(self.keeper, COIN // 10)
        tx = await self._close(gen, loan, "liquidation", draft, self.keeper, price=price)
        self._record_state(tx, pool, "pool", new_staked, shares, new_pot)
        if vout is not None:
            self._allowance(tx, vout, loan)

    async def _step_claim(self, gen: ScenarioGenerator) -> None:
        op, out, owner = self.allowances.pop("F")
        borrower = self.borrowers[5]
        draft = Draft()
        draft.spend(Spend(op, out, None, push_data(p2nfth_redeem(owner))))
        draft.pay(TxOutput(out.value, borrower.locking))
        tx = await self._send(gen, draft, borrower)
        self.records.append(
            Record(tx.txid, "claim", {"spent": f"{hash_to_hex(op.txid)}:{op.index}"})
        )

    async def _stake(self, gen: ScenarioGenerator, kind: str, amount: int) -> None:
        """amount > 0: the keeper stakes; < 0: it burns shares worth about -amount."""
        draft = Draft()
        staked, shares, pot = self._spend_state(draft, kind)
        if amount > 0:
            minted = v11.shares_for_deposit(staked, shares, amount)
            new = (staked + amount, shares + minted)
            draft.spend_tokens(self.keeper, self.stable, amount)
        else:
            burned = -amount * shares // staked
            paid = v11.amount_for_shares(staked, shares, burned)
            new = (staked - paid, shares - burned)
            draft.pay_tokens(self.keeper, self.stable, paid)
        vout = draft.pay(self._state_output(kind, new[0], new[1], pot))
        await gen.ensure_bch(self.keeper, COIN // 10)
        tx = await self._send(gen, draft, self.keeper)
        self._record_state(tx, vout, kind, new[0], new[1], pot)

    async def _step_stake(self, gen: ScenarioGenerator) -> None:
        await self._stake(gen, "bar", 300_000)
        await self._stake(gen, "pool", 500_000)

    async def _step_unstake(self, gen: ScenarioGenerator) -> None:
        await self._stake(gen, "bar", -100_000)
        await self._stake(gen, "pool", -50_000)

    # --- the ledger -------------------------------------------------------------------------

    def ledger_json(self, gen: ScenarioGenerator) -> object:
        """Every record placed on the final chain (height, block time, block hash), in chain
        order, with the deployment's configuration."""
        chain = gen.node.chain
        placed = []
        for seq, r in enumerate(self.records):
            loc = chain.tx_index.get(r.txid)
            height = None if loc is None else loc[0]
            block = None if height is None else chain.blocks[height]
            when = None if block is None else block.header.time
            entry = {"seq": seq, "txid": hash_to_hex(r.txid), "kind": r.kind, "height": height}
            entry |= {"time": when, **r.data}
            loan = r.data.get("before", r.data)
            if r.kind in INTEREST_KINDS and when is not None:  # owed at the final block time
                entry["interest"] = v1.interest(
                    loan["principal"], loan["rate_bp"], when, loan["loan_ts"]
                )
            placed.append(entry)
        placed.sort(key=lambda e: (e["height"] is None, e["height"] or 0, e["seq"]))
        return {
            "stablecoin": hash_to_hex(self.stable),
            "agent": hash_to_hex(self.agent),
            "price_oracle": hash_to_hex(gen.oracle_category),
            "rate_oracle": hash_to_hex(self.rate_category),
            "configs": [
                {
                    "version": c.version,
                    "loan_locking": sorted(x.hex() for x in c.loan_lockings or ()),
                    "bar_locking": None if c.bar_locking is None else c.bar_locking.hex(),
                    "pool_locking": None if c.pool_locking is None else c.pool_locking.hex(),
                }
                for c in self.configs
            ],
            "records": placed,
            "active": sorted(self.loans),
        }
