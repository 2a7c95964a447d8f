"""The scenario generator: a deterministic Cauldron history, built from real transactions.

Every transaction is built and signed here (`bch`), priced with the exact pool formulas
(`protocols.cauldron.formulas`), submitted to a devnet node like any wallet's, and mined into
blocks whose timestamps follow the devnet's simulated clock. The same parameters on the same
devnet configuration give the same chain and ledger, byte for byte: all randomness comes from one
seeded generator, and nothing depends on wall-clock time or ports (registry documents go through
the devnet's content-addressed IPFS path, or through `params.http_base`).

A run: set-up (actors funded, tokens and the oracle created, wallets filled, one pool per token),
then one block per `block_interval` for `days` days with the planned activity of each slot
(pool creations, trades, deposits, withdrawals, oracle updates, a late registry publication,
decoys, reorgs), then a few trades left in the mempool; finally the ledger is read off the chain.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bch.cashaddr import Address, AddressKind
from bch.hashes import sha256
from bch.script import OP_RETURN, push_data, scripthash
from bch.token import MAX_TOKEN_AMOUNT, NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxOutput, hash_to_hex
from bch.wallet import Wallet
from devnet.blocks import COIN, COINBASE_MATURITY
from devnet.scenario.cast import TokenSpec, token_spec
from devnet.scenario.coins import TOKEN_DUST, Book, Draft, InsufficientFunds, Purse, Spend
from devnet.scenario.oracle import METADATA_SCALING, DelphiCommitment, GpMessage, gp_publication
from devnet.scenario.params import ScenarioParams
from devnet.scenario.pools import deposit, split_buy, split_sell
from devnet.scenario.registry import HashEncoding, Publication, cid_v1_raw, registry_document
from devnet.service import Devnet
from protocols.cauldron.contract import (
    owner_address,
    pool_address,
    pool_locking_bytecode,
    redeem_script,
    trade_unlocking,
)
from protocols.cauldron.formulas import MIN_POOL_SATS, PoolState, classify_change, lp_fee
from protocols.ledger import (
    Amounts,
    BcmrEntry,
    ChainInfo,
    CreatedVia,
    DecoyEntry,
    EventKind,
    Ledger,
    MempoolPart,
    OracleInfo,
    OracleUpdate,
    PoolEntry,
    PoolEvent,
    PriceMessage,
    ReorgEntry,
    TokenEntry,
    TradeEntry,
    TxEntry,
    TxKind,
    WalletEntry,
)

LEDGER_VERSION = 1
IDENTITY_SATS = 1_000  # the authchain's identity output
ORACLE_SATS = 1_000  # the oracle NFT's UTXO
ORACLE_USE_FEE = 1_000
TEST_WALLET_SATS = 10 * COIN
TRADER_SATS = 2 * COIN
DAILY_VOLATILITY = 0.05  # of each token's target price
BCH_DAILY_VOLATILITY = 0.03  # of the oracle's BCH/USD price
MAX_OUTPUTS = 200  # outputs per payout transaction
SWAP_SHARE = 0.05  # trades that swap one token for another in one transaction


class ScenarioExtension(Protocol):
    """A protocol that adds its own activity (the lending issue plugs in here).

    `setup` runs once after the tokens, the oracle and the wallets exist; `on_slot` before each
    block is mined (the generator's clock is at the block's time); `ledger_json` is stored under
    `ledger.extensions[name]`. Build transactions with `Draft`, submit with `generator.submit`.
    """

    name: str

    async def setup(self, generator: ScenarioGenerator) -> None: ...

    async def on_slot(self, generator: ScenarioGenerator, slot: int) -> None: ...

    def ledger_json(self, generator: ScenarioGenerator) -> object: ...


@dataclass(slots=True)
class LivePool:
    pool_id: str
    token: TokenState
    owner: Purse
    outpoint: OutPoint
    state: PoolState

    def output(self, state: PoolState | None = None) -> TxOutput:
        s = state or self.state
        return TxOutput(
            s.sats, pool_locking_bytecode(self.owner.pkh), TokenData(self.token.category, s.tokens)
        )

    @property
    def price(self) -> float:
        return self.state.sats / self.state.tokens


@dataclass(slots=True)
class TokenState:
    index: int
    spec: TokenSpec
    issuer: Purse
    identity: Wallet
    log_target: float  # log of the target price (sats per base unit): trades follow its walk
    last_walk: int
    category: bytes = b""
    genesis_txid: str = ""
    supply: int = 0
    identity_utxo: tuple[OutPoint, TxOutput] | None = None
    publication: Publication | None = None
    publication_txid: str = ""
    burned_txid: str = ""
    pools: list[LivePool] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)

    def add_pool(self, pool: LivePool) -> None:
        self.positions[pool.pool_id] = len(self.pools)
        self.pools.append(pool)

    def remove_pool(self, pool: LivePool) -> None:
        i = self.positions.pop(pool.pool_id)
        last = self.pools.pop()
        if last is not pool:
            self.pools[i] = last
            self.positions[last.pool_id] = i

    def units(self, sats: int) -> int:
        """Token base units worth `sats` at the current target price."""
        return max(1, int(sats / math.exp(self.log_target)))


@dataclass(frozen=True, slots=True)
class PoolPlan:
    token: int
    owner: int
    sats: int
    summon: bool


@dataclass(slots=True)
class _Event:
    kind: EventKind
    pool_id: str
    category: str
    owner_pkh: str
    input_index: int | None
    output_index: int | None
    before: PoolState | None
    after: PoolState | None
    created_via: CreatedVia | None = None


@dataclass(slots=True)
class _Leg:
    """One token's side of a trade: the pools used and their new states."""

    token: TokenState
    buy: bool
    used: list[tuple[LivePool, PoolState]]

    @property
    def d_sats(self) -> int:
        return sum(a.sats - p.state.sats for p, a in self.used)

    @property
    def d_tokens(self) -> int:
        return sum(a.tokens - p.state.tokens for p, a in self.used)


@dataclass(slots=True)
class _Record:
    seq: int
    txid: bytes
    kind: TxKind
    events: list[_Event] = field(default_factory=list)
    trades: list[tuple[str, bool]] = field(default_factory=list)  # (category, is a buy)
    trader: str = ""
    funding: list[str] = field(default_factory=list)  # pkhs of the non-pool inputs
    oracle: DelphiCommitment | None = None
    message: tuple[GpMessage, bytes, bytes] | None = None  # (message, signature, pubkey)


@dataclass(frozen=True, slots=True)
class Holding:
    name: str
    sats: int
    tokens: dict[str, int]  # by symbol (a shared symbol: "SYMBOL/category prefix")


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    ledger: Ledger
    documents: dict[str, bytes]  # HTTP path -> bytes served
    holdings: list[Holding]  # the test wallets' coins at the end
    seconds: float
    transactions: int
    blocks: int


class ScenarioError(RuntimeError):
    """The scenario could not be generated (e.g. the devnet rejected one of its transactions)."""


class ScenarioGenerator:
    def __init__(
        self,
        devnet: Devnet,
        params: ScenarioParams,
        *,
        extensions: Sequence[ScenarioExtension] = (),
        address_prefix: str = "bitcoincash",
    ) -> None:
        self.devnet = devnet
        self.address_prefix = address_prefix  # the CashAddr prefix of the ledger's addresses
        self.params = params
        self.extensions = list(extensions)
        self.node = devnet.nodes[0]
        self.clock = devnet.clock
        self.rng = random.Random(params.seed)
        self.book = Book()
        self.records: list[_Record] = []
        self.documents: dict[str, bytes] = {}
        self.reorgs: list[ReorgEntry] = []
        self.decoys: list[DecoyEntry] = []
        self._prefix = f"ladle scenario {params.seed}"
        self.bank = self._purse("bank", "bank")
        self.operator = self._purse("oracle-operator", "oracle")
        self.oracle_key = self.wallet(f"{self._prefix}/oracle-signer")
        self.traders = [self._purse(f"trader{i}", "trader") for i in range(params.traders)]
        self.wallets = [
            self.book.register(Purse(f"wallet{i}", self.wallet(f"ladle devnet wallet {i}"), "test"))
            for i in range(params.test_wallets)
        ]
        self.tokens: list[TokenState] = []
        self.owners: list[Purse] = []
        self.plans: list[PoolPlan] = []
        # The oracle feed.
        self.oracle_category = b""
        self.oracle_utxo: tuple[OutPoint, TxOutput] | None = None
        self.oracle_price = 45_000  # US cents per BCH
        self.oracle_sequence = 0
        self.message_sequence = 0
        self.data_sequence = 0
        self.start_height = 0
        self.start_time = 0
        self._recreated = False

    # --- actors -------------------------------------------------------------------------------

    def wallet(self, seed: str) -> Wallet:
        return Wallet.from_seed(seed, self.address_prefix)

    def _purse(self, name: str, role: str) -> Purse:
        return self.book.register(Purse(name, self.wallet(f"{self._prefix}/{name}"), role))

    # --- submission ---------------------------------------------------------------------------

    async def submit(self, tx: Transaction, kind: TxKind) -> _Record:
        """Send `tx` to a node (round robin), book its coins, and start its ledger record."""
        seq = len(self.records)
        nodes = self.devnet.nodes
        try:
            await nodes[seq % len(nodes)].submit(tx, verify=self.params.verify)
        except Exception as exc:
            raise ScenarioError(f"the devnet refused a {kind} transaction: {exc}") from exc
        self.book.apply(tx)
        record = _Record(seq, tx.txid, kind)
        self.records.append(record)
        return record

    async def faucet(self, purse: Purse, amount: int) -> Transaction:
        """Pay `purse` from the miner's coins: its unconfirmed change first, then its mature
        coinbases oldest first — never in set order, which changes from one process to the
        next — so the chain is the same in every run. The payment is output 0 (what a token
        genesis spends)."""
        miner = Purse("miner", self.devnet.network.miner, "miner")
        mempool, chain = self.node.mempool, self.node.chain
        coins: list[tuple[OutPoint, TxOutput]] = []
        for entry in mempool.entries.values():  # acceptance order: our earlier change first
            for i, out in enumerate(entry.tx.outputs):
                op = OutPoint(entry.txid, i)
                if out.locking == miner.locking and out.token is None and op not in mempool.spends:
                    coins.append((op, out))
        next_height = chain.height + 1
        mature = []
        for op in chain.sh_utxos.get(scripthash(miner.locking), ()):
            coin = chain.utxos[op]
            if coin.coinbase and next_height - coin.height < COINBASE_MATURITY:
                continue
            if op not in mempool.spends and coin.output.token is None:
                mature.append((coin.height, op.txid, op.index, coin.output))
        mature.sort(key=lambda c: c[:3])
        coins += [(OutPoint(txid, index), out) for _, txid, index, out in mature]
        total = 0
        for op, out in coins:
            if total >= amount + COIN // 100:
                break
            miner.add(op, out)
            total += out.value
        draft = Draft()
        draft.pay(TxOutput(amount, purse.locking))
        try:
            tx = draft.complete(miner)
        except InsufficientFunds as exc:
            raise ScenarioError(f"the miner cannot pay {amount} sats: {exc}") from exc
        await self.submit(tx, "faucet")
        return tx

    async def payout(self, payer: Purse, payments: Sequence[tuple[Purse, int]]) -> None:
        """Pay BCH to several purses, at most MAX_OUTPUTS per transaction."""
        for start in range(0, len(payments), MAX_OUTPUTS):
            draft = Draft()
            for purse, amount in payments[start : start + MAX_OUTPUTS]:
                draft.pay(TxOutput(amount, purse.locking))
            await self.submit(await self._complete(draft, payer), "payout")

    async def ensure_bch(self, purse: Purse, amount: int) -> None:
        """Make sure `purse` holds `amount` sats (the bank tops it up, the faucet the bank)."""
        if purse.bch_balance() >= amount:
            return
        top_up = max(amount * 2, COIN // 10)
        if purse is self.bank:
            await self.faucet(self.bank, max(top_up, 100 * COIN))
            return
        await self.ensure_bch(self.bank, top_up + COIN // 100)
        await self.payout(self.bank, [(purse, top_up)])

    async def ensure_tokens(self, purse: Purse, token: TokenState, amount: int) -> None:
        if purse.token_balance(token.category) >= amount:
            return
        await self.distribute(token, [(purse, amount * 2)])

    async def distribute(self, token: TokenState, shares: Sequence[tuple[Purse, int]]) -> None:
        """The issuer sends tokens (MAX_OUTPUTS outputs per transaction)."""
        issuer = token.issuer
        for start in range(0, len(shares), MAX_OUTPUTS):
            chunk = shares[start : start + MAX_OUTPUTS]
            await self.ensure_bch(issuer, (len(chunk) + 2) * (TOKEN_DUST + 200))
            draft = Draft()
            for purse, amount in chunk:
                draft.pay_tokens(purse, token.category, amount)
            draft.spend_tokens(issuer, token.category, sum(a for _, a in chunk))
            await self.submit(await self._complete(draft, issuer), "token_distribution")

    async def _complete(self, draft: Draft, payer: Purse) -> Transaction:
        """Fund and sign `draft` from `payer`, topping the payer up once if it is short."""
        spends, outputs = list(draft.spends), list(draft.outputs)
        try:
            return draft.complete(payer)
        except InsufficientFunds:
            draft.spends[:], draft.outputs[:] = spends, outputs
        await self.ensure_bch(payer, sum(o.value for o in outputs) + COIN // 10)
        return draft.complete(payer)

    # --- the run ------------------------------------------------------------------------------

    async def run(self) -> ScenarioResult:
        began = time.perf_counter()
        network = self.devnet.network
        delay, network.delay = network.delay, 0.0  # delivery inside each call: deterministic
        try:
            self.start_height = self.node.height + 1
            self.start_time = self.clock.now()
            self._plan()
            await self._setup()
            for extension in self.extensions:
                await extension.setup(self)
            await self._timeline()
            for _ in range(self.params.mempool_txs):
                await self.trade()
            ledger = self._ledger()
        finally:
            network.delay = delay
        return ScenarioResult(
            ledger=ledger,
            documents=dict(self.documents),
            holdings=[self._holding(p) for p in self.wallets],
            seconds=time.perf_counter() - began,
            transactions=len(self.records),
            blocks=self.node.height - self.start_height + 1,
        )

    def _plan(self) -> None:
        p, rng = self.params, self.rng
        n_owners = max(2, math.ceil(p.pools / p.pools_per_owner)) + 1
        self.owners = [self._purse(f"owner{i}", "owner") for i in range(n_owners)]
        stealth = n_owners - 1  # never announces a pool with SUMMON
        for i in range(p.tokens):
            spec = token_spec(i)
            price = 10 ** rng.uniform(-2.0, 2.0)
            self.tokens.append(
                TokenState(
                    i,
                    spec,
                    self._purse(f"issuer{i}", "issuer"),
                    self.wallet(f"{self._prefix}/identity{i}"),
                    math.log(price),
                    self.start_time,
                )
            )
            count = p.pools if i == 0 else p.pools_per_token
            low, high = (5.0, 7.3) if i == 0 else (6.0, 8.3)
            for k in range(count):
                owner = rng.randrange(n_owners - 1)
                if i == 2 and k == min(1, count - 1):
                    owner = stealth
                sats = int(10 ** rng.uniform(low, high))
                summon = owner != stealth and rng.random() >= 0.1
                self.plans.append(PoolPlan(i, owner, sats, summon))

    def _holding(self, purse: Purse) -> Holding:
        symbols: dict[str, int] = {}
        for token in self.tokens:
            amount = purse.token_balance(token.category)
            if amount:
                label = token.spec.symbol
                if sum(t.spec.symbol == label for t in self.tokens) > 1:
                    label = f"{label}/{hash_to_hex(token.category)[:8]}"
                symbols[label] = amount
        return Holding(purse.name, purse.bch_balance(), symbols)

    async def _mine(self) -> None:
        self.node.mine(1)
        await self.devnet.network.settle()
        await asyncio.sleep(0)  # let the loop breathe: signals, Electrum clients

    def _tick(self) -> None:
        self.clock.advance(self.params.block_interval)

    async def _setup(self) -> None:
        p = self.params
        first_pool = {plan.token: plan for plan in reversed(self.plans)}
        owner_sats: dict[int, int] = {}
        for plan in self.plans:
            owner_sats[plan.owner] = owner_sats.get(plan.owner, 0) + plan.sats
        owner_budget = {o: s + s // 2 + COIN // 20 for o, s in owner_sats.items()}
        budget = (
            sum(owner_budget.values())
            + p.traders * TRADER_SATS
            + p.test_wallets * TEST_WALLET_SATS
            + (p.tokens + 2) * COIN
            + 20 * COIN
        )
        self._ensure_mature(budget + 2 * COIN)
        # Block 1: money for everyone, each issuer's coin at output 0 of its own transaction.
        await self.faucet(self.bank, budget - (p.tokens + 1) * COIN)
        issuer_coins = [await self.faucet(t.issuer, COIN) for t in self.tokens]
        operator_coin = await self.faucet(self.operator, COIN)
        await self.payout(
            self.bank,
            [(self.owners[o], owner_budget[o]) for o in sorted(owner_budget)]
            + [(t, TRADER_SATS) for t in self.traders]
            + [(w, TEST_WALLET_SATS) for w in self.wallets],
        )
        self._tick()
        await self._mine()
        # Block 2: token geneses (with registries) and the oracle.
        for token, coin in zip(self.tokens, issuer_coins, strict=True):
            await self._genesis(token, coin, first_pool[token.index].sats)
        await self._oracle_genesis(operator_coin)
        self._tick()
        await self._mine()
        # Block 3: tokens to owners, traders and test wallets; the first pool of every token.
        for token in self.tokens:
            shares: dict[str, tuple[Purse, int]] = {}
            for plan in self.plans:
                if plan.token == token.index:
                    owner = self.owners[plan.owner]
                    _, before = shares.get(owner.name, (owner, 0))
                    shares[owner.name] = (owner, before + token.units(plan.sats) * 3 // 2)
            for purse in [*self.traders, *self.wallets]:
                shares[purse.name] = (
                    purse,
                    token.units(COIN // 5 if purse.role == "trader" else COIN // 2),
                )
            await self.distribute(token, list(shares.values()))
        for token in self.tokens:
            plan = first_pool[token.index]
            self.plans.remove(plan)
            await self.create_pool(plan)
        self._tick()
        await self._mine()

    def _ensure_mature(self, amount: int) -> None:
        """Mine (before the history starts) until the miner's mature coins can pay `amount`."""
        miner = self.devnet.network.miner.locking_bytecode
        while True:
            chain = self.node.chain
            spendable = 0
            for op in chain.sh_utxos.get(scripthash(miner), ()):
                coin = chain.utxos[op]
                mature = not coin.coinbase or chain.height + 1 - coin.height >= COINBASE_MATURITY
                if mature and op not in self.node.mempool.spends:
                    spendable += coin.output.value
            if spendable >= amount:
                return
            self.node.mine(1, spacing=self.params.block_interval)
            self.start_height = self.node.height + 1
            self.start_time = self.clock.now()

    # --- tokens, registries, oracle -----------------------------------------------------------

    def _publication(self, token: TokenState, category_hex: str, published: int) -> Publication:
        spec = token.spec
        mode = spec.bcmr
        web = f"{self.params.http_base}/token/{spec.symbol.lower()}-{category_hex[:8]}"
        doc = registry_document(
            category_hex=category_hex,
            name=spec.name,
            symbol=spec.symbol,
            decimals=spec.decimals,
            description=spec.description,
            published=published,
            web=web,
        )
        digest = sha256(doc)
        if mode in ("genesis-ipfs", "genesis-ipfs-ascii"):
            cid = cid_v1_raw(doc)
            encoding: HashEncoding = "ascii-hex" if mode == "genesis-ipfs-ascii" else "digest"
            pub = Publication(f"ipfs://{cid}", f"/ipfs/{cid}", digest, encoding, doc)
        else:
            path = f"/bcmr/{spec.symbol.lower()}-{category_hex[:8]}.json"
            served = doc
            if mode == "mismatch-http":
                served = doc.replace(b"after publishing.", b"after publishing (edited).")
            pub = Publication(f"{self.params.http_base}{path}", path, digest, "digest", served)
        self.documents[pub.path] = pub.served
        return pub

    async def _genesis(self, token: TokenState, coin_tx: Transaction, first_sats: int) -> None:
        """Spend the issuer's coin at output 0 of `coin_tx`: the category is that txid."""
        issuer = token.issuer
        category = coin_tx.txid
        category_hex = hash_to_hex(category)
        plans = [pl for pl in self.plans if pl.token == token.index]
        need = sum(token.units(pl.sats) for pl in plans) * 3 + token.units(first_sats)
        need += token.units(COIN) * (len(self.traders) + len(self.wallets)) * 2
        token.supply = min(MAX_TOKEN_AMOUNT, need * 10)
        draft = Draft()
        op = OutPoint(category, 0)
        draft.spend_p2pkh(issuer, op, coin_tx.outputs[0])
        draft.pay(TxOutput(IDENTITY_SATS, token.identity.locking_bytecode))
        draft.pay(TxOutput(TOKEN_DUST, issuer.locking, TokenData(category, token.supply)))
        if token.spec.bcmr in ("genesis-ipfs", "genesis-ipfs-ascii", "mismatch-http"):
            token.publication = self._publication(token, category_hex, self.clock.now())
            draft.pay(TxOutput(0, token.publication.locking()))
        tx = await self._complete(draft, issuer)
        await self.submit(tx, "token_genesis")
        token.category = category
        token.genesis_txid = tx.txid_hex
        token.identity_utxo = (OutPoint(tx.txid, 0), tx.outputs[0])
        if token.publication is not None:
            token.publication_txid = tx.txid_hex

    async def publish_late(self, token: TokenState) -> None:
        """A later authchain link: spend the identity output, re-create it, publish."""
        assert token.identity_utxo is not None
        op, out = token.identity_utxo
        draft = Draft()
        draft.spend(Spend(op, out, token.identity))
        draft.pay(TxOutput(IDENTITY_SATS, token.identity.locking_bytecode))
        token.publication = self._publication(token, hash_to_hex(token.category), self.clock.now())
        draft.pay(TxOutput(0, token.publication.locking()))
        tx = await self._complete(draft, token.issuer)
        await self.submit(tx, "bcmr_publication")
        token.identity_utxo = (OutPoint(tx.txid, 0), tx.outputs[0])
        token.publication_txid = tx.txid_hex

    async def burn_identity(self, token: TokenState) -> None:
        """The last authchain link: spend the identity output into a transaction whose output 0
        is `OP_RETURN` (no BCMR publication), so no later link can publish."""
        assert token.identity_utxo is not None
        op, out = token.identity_utxo
        draft = Draft()
        draft.spend(Spend(op, out, token.identity))
        draft.pay(TxOutput(0, bytes((OP_RETURN,)) + push_data(b"burn")))
        tx = await self._complete(draft, token.issuer)
        await self.submit(tx, "identity_burn")
        token.identity_utxo = None
        token.burned_txid = tx.txid_hex

    def _gp(self, data_sequence: int, price: int) -> GpMessage:
        self.message_sequence += 1
        return GpMessage(self.clock.now(), self.message_sequence, data_sequence, price)

    async def _oracle_genesis(self, coin_tx: Transaction) -> None:
        self.oracle_category = coin_tx.txid
        await self._oracle_tx(
            Spend(OutPoint(coin_tx.txid, 0), coin_tx.outputs[0], self.operator.wallet),
            self._gp(METADATA_SCALING, 100),
            "oracle_genesis",
        )

    async def oracle_update(self) -> None:
        step = BCH_DAILY_VOLATILITY * math.sqrt(self.params.oracle_interval / 86_400)
        price = self.oracle_price * math.exp(self.rng.gauss(0.0, step))
        self.oracle_price = min(max(int(price), 100), 0xFFFFFFFF)
        assert self.oracle_utxo is not None
        op, out = self.oracle_utxo
        self.data_sequence += 1
        message = self._gp(self.data_sequence, self.oracle_price)
        await self._oracle_tx(Spend(op, out, self.operator.wallet), message, "oracle_update")

    async def _oracle_tx(self, first: Spend, message: GpMessage, kind: TxKind) -> None:
        self.oracle_sequence += 1
        commitment = DelphiCommitment(
            self.clock.now(), ORACLE_USE_FEE, self.oracle_sequence, self.oracle_price
        )
        nft = NFT(Capability.MUTABLE, commitment.encode())
        draft = Draft()
        draft.spend(first)
        draft.pay(
            TxOutput(ORACLE_SATS, self.operator.locking, TokenData(self.oracle_category, 0, nft))
        )
        draft.pay(TxOutput(0, gp_publication(message, self.oracle_key.key)))
        tx = await self._complete(draft, self.operator)
        record = await self.submit(tx, kind)
        record.oracle = commitment
        record.message = (message, message.sign(self.oracle_key.key), self.oracle_key.public_key)
        self.oracle_utxo = (OutPoint(tx.txid, 0), tx.outputs[0])

    # --- pools --------------------------------------------------------------------------------

    async def create_pool(self, plan: PoolPlan) -> None:
        token, owner = self.tokens[plan.token], self.owners[plan.owner]
        price = math.exp(token.log_target) * (1 + self.rng.uniform(-0.02, 0.02))
        if token.pools:
            price = _aggregate_price(token.pools) * (1 + self.rng.uniform(-0.02, 0.02))
        state = PoolState(plan.sats, max(1, int(plan.sats / price)))
        await self.ensure_bch(owner, plan.sats + COIN // 100)
        await self.ensure_tokens(owner, token, state.tokens)
        draft = Draft()
        draft.pay(
            TxOutput(
                state.sats,
                pool_locking_bytecode(owner.pkh),
                TokenData(token.category, state.tokens),
            )
        )
        if plan.summon:
            draft.pay(TxOutput(0, summon_locking(owner.pkh)))
        draft.spend_tokens(owner, token.category, state.tokens)
        tx = await self._complete(draft, owner)
        record = await self.submit(tx, "pool_create")
        via: CreatedVia = "summon" if plan.summon else "no_marker"
        self._new_pool(record, tx, 0, token, owner, state, via)

    def _new_pool(
        self,
        record: _Record,
        tx: Transaction,
        vout: int,
        token: TokenState,
        owner: Purse,
        state: PoolState,
        via: CreatedVia,
    ) -> None:
        pool = LivePool(f"{tx.txid_hex}:{vout}", token, owner, OutPoint(tx.txid, vout), state)
        token.add_pool(pool)
        record.events.append(
            _Event(
                "create",
                pool.pool_id,
                hash_to_hex(token.category),
                owner.pkh.hex(),
                None,
                vout,
                None,
                state,
                via,
            )
        )

    def _walk(self, token: TokenState) -> None:
        now = self.clock.now()
        dt = max(0, now - token.last_walk)
        token.log_target += self.rng.gauss(0.0, DAILY_VOLATILITY * math.sqrt(dt / 86_400))
        token.last_walk = now

    def _pool_count(self, available: int) -> int:
        r, cap = self.rng.random(), min(self.params.max_trade_pools, available)
        if r < 0.55:
            n = 1
        elif r < 0.8:
            n = self.rng.randint(2, 5)
        elif r < 0.95:
            n = self.rng.randint(6, 20)
        else:
            n = self.rng.randint(21, 50)
        return max(1, min(n, cap))

    def _pick_token(self) -> TokenState | None:
        live = [t for t in self.tokens if t.pools]
        if not live:
            return None
        weights = [1 + math.sqrt(len(t.pools)) for t in live]
        return self.rng.choices(live, weights)[0]

    def _leg(self, token: TokenState, buy: bool | None, budget: int | None) -> _Leg | None:
        """Pools and exact amounts for one token: a buy or a sell (None: biased toward the
        token's target price) through 1–50 pools; `budget`: the sats a buy spends."""
        rng = self.rng
        self._walk(token)
        n = self._pool_count(len(token.pools))
        candidates = rng.sample(token.pools, min(len(token.pools), 3 * n + 2))
        gap = token.log_target - math.log(_aggregate_price(candidates))
        if buy is None:
            buy = rng.random() < min(0.9, max(0.1, 1 / (1 + math.exp(-6 * gap))))
        pick = heapq.nsmallest if buy else heapq.nlargest
        chosen = pick(n, candidates, key=lambda p: p.price)
        share = 10 ** rng.uniform(-3.5, -1.0)
        if rng.random() < 0.5 and (gap > 0) == buy:
            share = max(share, min(0.2, (math.exp(abs(gap) / 2) - 1) / 2))
        exact_out = rng.random() < 0.5
        before = [p.state for p in chosen]
        if buy:
            sats = budget if budget is not None else int(share * sum(s.sats for s in before))
            afters = split_buy(before, max(1, sats), exact_out=exact_out)
        else:
            tokens = max(1, int(share * sum(s.tokens for s in before)))
            afters = split_sell(before, tokens, exact_out=exact_out)
        used = [(p, a) for p, a in zip(chosen, afters, strict=True) if a is not None]
        return _Leg(token, buy, used) if used else None

    async def trade(self) -> None:
        """A buy or a sell of one token; one in twenty is a token-to-token swap (a sell of one
        token and, in the same transaction, a buy of another with the proceeds)."""
        rng = self.rng
        token = self._pick_token()
        if token is None:
            return
        swap = rng.random() < SWAP_SHARE
        trader = self.traders[rng.randrange(len(self.traders))]
        first = self._leg(token, False if swap else None, None)
        if first is None:
            return
        legs = [first]
        others = [t for t in self.tokens if t.pools and t is not token]
        if swap and others:
            other = others[rng.randrange(len(others))]
            second = self._leg(other, True, -first.d_sats * 9 // 10)
            if second is not None:
                legs.append(second)
        need = sum(leg.d_sats for leg in legs)
        await self.ensure_bch(trader, max(0, need) + COIN // 100)
        for leg in legs:
            if not leg.buy:
                await self.ensure_tokens(trader, leg.token, leg.d_tokens)
        draft = Draft()
        used = [u for leg in legs for u in leg.used]
        for pool, after in used:
            draft.spend(Spend(pool.outpoint, pool.output(), None, trade_unlocking(pool.owner.pkh)))
            draft.pay(pool.output(after))
        for leg in legs:
            if leg.buy:
                draft.pay_tokens(trader, leg.token.category, -leg.d_tokens)
            else:
                draft.spend_tokens(trader, leg.token.category, leg.d_tokens)
        tx = await self._complete(draft, trader)
        record = await self.submit(tx, "trade")
        self._moved(record, tx, used)
        funders = sorted({s.signer.pkh for s in draft.spends if s.signer is not None})
        record.trader = trader.name
        record.funding = [pkh.hex() for pkh in funders]
        record.trades = [(hash_to_hex(leg.token.category), leg.buy) for leg in legs]

    def _moved(
        self, record: _Record, tx: Transaction, used: Sequence[tuple[LivePool, PoolState]]
    ) -> None:
        """Trade-path spends at inputs 0..n-1, continuations at the same output indexes."""
        for i, (pool, after) in enumerate(used):
            before = pool.state
            record.events.append(
                _Event(
                    _trade_kind(before, after),
                    pool.pool_id,
                    hash_to_hex(pool.token.category),
                    pool.owner.pkh.hex(),
                    i,
                    i,
                    before,
                    after,
                )
            )
            pool.outpoint = OutPoint(tx.txid, i)
            pool.state = after

    async def deposit(self) -> None:
        rng = self.rng
        token = self._pick_token()
        if token is None:
            return
        pool = token.pools[rng.randrange(len(token.pools))]
        after = deposit(pool.state, int(pool.state.sats * rng.uniform(0.05, 0.5)))
        if after is None:
            return
        depositor = (
            pool.owner if rng.random() < 0.7 else self.traders[rng.randrange(len(self.traders))]
        )
        added = after.tokens - pool.state.tokens
        await self.ensure_bch(depositor, after.sats - pool.state.sats + COIN // 100)
        await self.ensure_tokens(depositor, token, added)
        draft = Draft()
        draft.spend(Spend(pool.outpoint, pool.output(), None, trade_unlocking(pool.owner.pkh)))
        draft.pay(pool.output(after))
        draft.spend_tokens(depositor, token.category, added)
        tx = await self._complete(draft, depositor)
        record = await self.submit(tx, "deposit")
        self._moved(record, tx, [(pool, after)])

    async def withdraw(self) -> None:
        """The owner takes a pool back (signed withdraw path); sometimes re-creates a smaller
        pool in the same transaction (a new lineage)."""
        rng = self.rng
        live = [t for t in self.tokens if len(t.pools) > 1]
        if not live:
            return
        token = live[rng.randrange(len(live))]
        pool = token.pools[rng.randrange(len(token.pools))]
        owner, state = pool.owner, pool.state
        draft = Draft()
        redeem = redeem_script(owner.pkh)
        draft.spend(Spend(pool.outpoint, pool.output(), owner.wallet, redeem=redeem))
        recreate: PoolState | None = None
        if rng.random() < 0.4 or not self._recreated:  # the first one always does
            u = rng.uniform(0.3, 0.9)
            recreate = PoolState(
                max(MIN_POOL_SATS * 2, int(state.sats * u)), max(1, int(state.tokens * u))
            )
            if recreate.sats >= state.sats or recreate.tokens > state.tokens:
                recreate = None
        if recreate is not None:
            self._recreated = True
            draft.pay(pool.output(recreate))
        kept = state.tokens - (recreate.tokens if recreate is not None else 0)
        if kept:
            draft.pay_tokens(owner, token.category, kept)
        tx = await self._complete(draft, owner)
        record = await self.submit(tx, "withdraw")
        record.events.append(
            _Event(
                "withdraw",
                pool.pool_id,
                hash_to_hex(token.category),
                owner.pkh.hex(),
                0,
                None,
                state,
                None,
            )
        )
        token.remove_pool(pool)
        if recreate is not None:
            self._new_pool(record, tx, 0, token, owner, recreate, "withdraw_recreate")

    async def payment(self) -> None:
        """A trader pays another: ordinary traffic, which an indexer must skip cheaply."""
        payer, payee = self.rng.sample(self.traders, 2)
        amount = self.rng.randrange(10_000, COIN // 10)
        await self.ensure_bch(payer, amount + COIN // 100)
        draft = Draft()
        draft.pay(TxOutput(amount, payee.locking))
        await self.submit(await self._complete(draft, payer), "payment")

    async def decoy(self) -> None:
        """BCH without a token at an owner's pool address: not a pool (anyone could take it)."""
        owner = self.owners[self.rng.randrange(len(self.owners))]
        draft = Draft()
        draft.pay(TxOutput(5_000, pool_locking_bytecode(owner.pkh)))
        tx = await self._complete(draft, self.bank)
        await self.submit(tx, "decoy")
        self.decoys.append(DecoyEntry(f"{tx.txid_hex}:0", owner.pkh.hex(), 5_000))

    # --- the timeline -------------------------------------------------------------------------

    def _count(self, per_day: float) -> int:
        return int(per_day * self.rng.uniform(0.5, 1.5) + self.rng.random())

    async def _timeline(self) -> None:
        p, rng = self.params, self.rng
        per_day = p.blocks_per_day
        total = p.days * per_day
        plan: dict[int, list[Callable[[], Awaitable[None]]]] = {}

        def at(slot: int, action: Callable[[], Awaitable[None]]) -> None:
            plan.setdefault(slot, []).append(action)

        creation_slots = max(1, int(total * p.creation_days))
        for pool_plan in self.plans:
            at(rng.randrange(creation_slots), functools.partial(self.create_pool, pool_plan))
        for day in range(p.days):
            base = day * per_day
            for _ in range(round(p.trades_per_day * rng.uniform(0.7, 1.3))):
                at(base + rng.randrange(per_day), self.trade)
            for _ in range(self._count(p.deposits_per_day)):
                at(base + rng.randrange(per_day), self.deposit)
            for _ in range(self._count(p.withdrawals_per_day)):
                at(base + rng.randrange(per_day), self.withdraw)
            for _ in range(p.payments_per_day):
                at(base + rng.randrange(per_day), self.payment)
        every = max(1, p.oracle_interval // p.block_interval)
        for slot in range(every - 1, total, every):
            at(slot, self.oracle_update)
        for token in self.tokens:
            if token.spec.bcmr == "authchain-http":
                at(total // 3, functools.partial(self.publish_late, token))
        if p.burn_identity:
            late = next(t for t in self.tokens if t.spec.bcmr == "authchain-http")
            at(total // 2, functools.partial(self.burn_identity, late))
        for _ in range(p.decoys):
            at(rng.randrange(total), self.decoy)
        window = range(max(1, total // 10), max(2, total - 2))
        reorg_slots = set(rng.sample(window, min(p.reorgs, len(window))))
        for slot in range(total):
            self._tick()
            for action in plan.get(slot, ()):
                await action()
            for extension in self.extensions:
                await extension.on_slot(self, slot)
            await self._mine()
            if slot in reorg_slots:
                await self._reorg()
        self._tick()

    async def _reorg(self) -> None:
        """Replace the last blocks by a longer empty branch: their transactions go back to the
        mempool and are mined again in the next block (at a new height and time)."""
        depth = min(
            self.rng.randint(1, self.params.max_reorg_depth), self.node.height - self.start_height
        )
        if depth < 1:
            return
        orphaned = tuple(b.hash_hex for b in self.node.chain.blocks[-depth:])
        fork = self.node.height - depth
        self.node.reorg(depth)
        await self.devnet.network.settle()
        self.reorgs.append(ReorgEntry(self.clock.now(), depth, fork, orphaned))

    # --- the ledger ---------------------------------------------------------------------------

    def _ledger(self) -> Ledger:
        chain, mempool = self.node.chain, self.node.mempool
        placed: list[tuple[_Record, int | None, int | None]] = []
        for rec in self.records:
            loc = chain.tx_index.get(rec.txid)
            if loc is not None:
                placed.append((rec, loc[0], chain.blocks[loc[0]].header.time))
            elif rec.txid in mempool:
                placed.append((rec, None, None))
            else:
                raise ScenarioError(f"transaction {hash_to_hex(rec.txid)} left the chain")
        confirmed = sorted((x for x in placed if x[1] is not None), key=lambda x: (x[1], x[0].seq))
        pending = [x for x in placed if x[1] is None]
        builder = _LedgerBuilder(self.address_prefix)
        for rec, height, when in confirmed:
            builder.add(rec, height, when, builder.confirmed)
        builder.settle_block()
        for rec, height, when in pending:
            builder.add(rec, height, when, builder.mempool)
        tip = chain.tip
        return Ledger(
            version=LEDGER_VERSION,
            params=self.params.to_json(),
            chain=ChainInfo(
                genesis_hash=chain.blocks[0].hash_hex,
                start_height=self.start_height,
                start_time=self.start_time,
                tip_height=chain.height,
                tip_hash=tip.hash_hex,
                end_time=tip.header.time,
                blocks=chain.height - self.start_height + 1,
            ),
            oracle=OracleInfo(
                category=hash_to_hex(self.oracle_category),
                layout="delphi",
                operator_address=self.operator.wallet.token_address,
                pubkey=self.oracle_key.public_key.hex(),
            ),
            tokens=[self._token_entry(t) for t in self.tokens],
            pools=builder.pool_entries(),
            events=builder.confirmed.events,
            trades=builder.confirmed.trades,
            oracle_updates=builder.confirmed.oracle_updates,
            messages=builder.confirmed.messages,
            wallets=[_wallet_entry(p.name, p.role, p.wallet) for p in self.wallets],
            actors=self._actors(),
            transactions=builder.confirmed.transactions,
            reorgs=list(self.reorgs),
            decoys=list(self.decoys),
            mempool=builder.mempool,
            extensions={e.name: e.ledger_json(self) for e in self.extensions},
        )

    def _token_entry(self, token: TokenState) -> TokenEntry:
        pub = token.publication
        bcmr = None
        if pub is not None:
            bcmr = BcmrEntry(
                txid=token.publication_txid,
                uri=pub.uri,
                url=f"{self.params.http_base}{pub.path}",
                hash=pub.onchain_hash.hex(),
                hash_encoding=pub.encoding,
                content_sha256=pub.served_sha256.hex(),
                mismatch=pub.mismatch,
            )
        return TokenEntry(
            category=hash_to_hex(token.category),
            genesis_txid=token.genesis_txid,
            symbol=token.spec.symbol,
            name=token.spec.name,
            decimals=token.spec.decimals,
            supply=token.supply,
            issuer_address=token.issuer.wallet.token_address,
            bcmr=bcmr,
            identity_burned_txid=token.burned_txid or None,
        )

    def _actors(self) -> list[WalletEntry]:
        purses = [self.bank, self.operator, *self.traders, *self.owners]
        out = [_wallet_entry(p.name, p.role, p.wallet) for p in purses]
        for t in self.tokens:
            out.append(_wallet_entry(t.issuer.name, "issuer", t.issuer.wallet))
            out.append(_wallet_entry(f"identity{t.index}", "identity", t.identity))
        out.append(_wallet_entry("oracle-signer", "oracle-signer", self.oracle_key))
        return out


def _wallet_entry(name: str, role: str, wallet: Wallet) -> WalletEntry:
    return WalletEntry(
        name=name,
        role=role,
        wif=wallet.key.to_wif(),
        address=wallet.address,
        token_address=wallet.token_address,
        pkh=wallet.pkh.hex(),
    )


def summon_locking(owner_pkh: bytes) -> bytes:
    """`OP_RETURN "SUMMON" <pkh>`: the marker announcing a new pool of `owner_pkh`."""
    return bytes((OP_RETURN,)) + push_data(b"SUMMON") + push_data(owner_pkh)


def _trade_kind(before: PoolState, after: PoolState) -> EventKind:
    kind = classify_change(before, after)
    if kind == "buy" or kind == "sell" or kind == "deposit":
        return kind
    raise AssertionError(f"a trade-path change must move the pool: {before} -> {after}")


def _aggregate_price(pools: Sequence[LivePool]) -> float:
    return sum(p.state.sats for p in pools) / sum(p.state.tokens for p in pools)


def _amounts(state: PoolState | None) -> Amounts | None:
    return None if state is None else Amounts(state.sats, state.tokens)


@dataclass(slots=True)
class _PoolFacts:
    category: str
    owner_pkh: str
    created_txid: str
    created_height: int | None
    created_time: int | None
    created_via: CreatedVia
    visible: bool
    initial: PoolState
    confirmed: tuple[str | None, PoolState | None, str | None] = (None, None, None)
    live: tuple[str | None, PoolState | None] = (None, None)


class _LedgerBuilder:
    """Turns the records, in final-chain order, into ledger entries."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.confirmed = MempoolPart()
        self.mempool = MempoolPart()
        self.pools: dict[str, _PoolFacts] = {}
        self.known: set[str] = set()  # owners an indexer knows from earlier blocks
        self._block_known: set[str] = set()
        self._height: int | None = None

    def settle_block(self) -> None:
        self.known |= self._block_known
        self._block_known = set()

    def add(self, rec: _Record, height: int | None, when: int | None, part: MempoolPart) -> None:
        if height != self._height:
            self.settle_block()
            self._height = height
        txid = hash_to_hex(rec.txid)
        in_chain = part is self.confirmed
        part.transactions.append(TxEntry(rec.seq, txid, rec.kind, height, when))
        touched = len(rec.events)
        for ev in rec.events:
            part.events.append(
                PoolEvent(
                    seq=rec.seq,
                    txid=txid,
                    height=height,
                    time=when,
                    kind=ev.kind,
                    pool_id=ev.pool_id,
                    category=ev.category,
                    owner_pkh=ev.owner_pkh,
                    input_index=ev.input_index,
                    output_index=ev.output_index,
                    before=_amounts(ev.before),
                    after=_amounts(ev.after),
                    lp_fee=None
                    if ev.before is None or ev.after is None
                    else lp_fee(ev.before.sats, ev.after.sats),
                    pools_touched=touched,
                )
            )
            self._pool_fact(ev, txid, height, when, in_chain)
        for category, buy in rec.trades:
            part.trades.append(self._trade(rec, category, buy, txid, height, when))
        if rec.oracle is not None:
            c = rec.oracle
            part.oracle_updates.append(
                OracleUpdate(
                    rec.seq,
                    txid,
                    height,
                    when,
                    c.timestamp,
                    c.price,
                    c.sequence,
                    c.use_fee,
                    c.encode().hex(),
                )
            )
        if rec.message is not None:
            m, sig, pubkey = rec.message
            part.messages.append(
                PriceMessage(
                    rec.seq,
                    txid,
                    height,
                    when,
                    m.encode().hex(),
                    sig.hex(),
                    pubkey.hex(),
                    m.timestamp,
                    m.message_sequence,
                    m.data_sequence,
                    m.price,
                )
            )

    def _pool_fact(
        self, ev: _Event, txid: str, height: int | None, when: int | None, in_chain: bool
    ) -> None:
        if ev.kind == "create":
            assert ev.after is not None and ev.created_via is not None
            visible = ev.created_via != "no_marker" or ev.owner_pkh in self.known
            self.pools[ev.pool_id] = _PoolFacts(
                ev.category, ev.owner_pkh, txid, height, when, ev.created_via, visible, ev.after
            )
            if visible:
                self._block_known.add(ev.owner_pkh)
        else:
            self._block_known.add(ev.owner_pkh)
        facts = self.pools[ev.pool_id]
        utxo = None if ev.after is None else f"{txid}:{ev.output_index}"
        withdrawn = txid if ev.kind == "withdraw" else None
        if in_chain:
            facts.confirmed = (utxo, ev.after, withdrawn)
        facts.live = (utxo, ev.after)

    def _trade(
        self,
        rec: _Record,
        category: str,
        buy: bool,
        txid: str,
        height: int | None,
        when: int | None,
    ) -> TradeEntry:
        moves = [
            (e.before, e.after)
            for e in rec.events
            if e.before and e.after and e.category == category
        ]
        return TradeEntry(
            seq=rec.seq,
            txid=txid,
            height=height,
            time=when,
            category=category,
            direction="buy" if buy else "sell",
            sats=sum(a.sats - b.sats for b, a in moves),
            tokens=sum(a.tokens - b.tokens for b, a in moves),
            volume_sats=sum(abs(a.sats - b.sats) for b, a in moves),
            volume_tokens=sum(abs(a.tokens - b.tokens) for b, a in moves),
            lp_fee=sum(lp_fee(b.sats, a.sats) for b, a in moves),
            pools=len(moves),
            pools_touched=len(rec.events),
            trader=rec.trader,
            funding_addresses=tuple(
                Address(AddressKind.P2PKH, bytes.fromhex(p), prefix=self.prefix).encode()
                for p in rec.funding
            ),
            funding_pkhs=tuple(rec.funding),
        )

    def pool_entries(self) -> list[PoolEntry]:
        out = []
        for pool_id, f in self.pools.items():
            utxo, state, withdrawn = f.confirmed
            live_utxo, live_state = f.live
            out.append(
                PoolEntry(
                    pool_id=pool_id,
                    category=f.category,
                    owner_pkh=f.owner_pkh,
                    owner_address=owner_address(bytes.fromhex(f.owner_pkh), self.prefix),
                    pool_address=pool_address(bytes.fromhex(f.owner_pkh), self.prefix),
                    created_txid=f.created_txid,
                    created_height=f.created_height,
                    created_time=f.created_time,
                    created_via=f.created_via,
                    visible_at_creation=f.visible,
                    initial=Amounts(f.initial.sats, f.initial.tokens),
                    status="withdrawn" if withdrawn is not None else "active",
                    withdrawn_txid=withdrawn,
                    utxo=utxo,
                    state=_amounts(state),
                    live_utxo=live_utxo,
                    live_state=_amounts(live_state),
                )
            )
        return out
