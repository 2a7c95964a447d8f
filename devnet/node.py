"""A devnet node: a chain, a mempool, injectable faults, mining, and change notifications.

Everything a scenario generator needs is a plain method here (`submit`, `mine`, `reorg`); the
Electrum server and the `devnet.*` control methods are thin layers over the same calls.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from bch.hashes import sha256
from bch.script import scripthash
from bch.tx import OutPoint, Transaction, TxOutput
from devnet.acceptance import AlreadyInMempool, Checked, TxRejected, check_transaction
from devnet.backend import ChainBackend, EmbeddedBackend
from devnet.blocks import (
    BlockRecord,
    assemble_block,
    block_subsidy,
    coinbase_transaction,
    genesis_block,
)
from devnet.chain import Chain, ChainError
from devnet.clock import SimClock
from devnet.mempool import Mempool, MempoolEntry
from verify.libauth import AsyncLibauthVerifier, VerifierUnavailable

if TYPE_CHECKING:
    from devnet.network import Network

MAX_BLOCK_TX_BYTES = 31_000_000
DEFAULT_REJECT_MESSAGE = "devnet-fault: this node rejects every transaction"


class ScriptVerificationUnavailable(Exception):  # noqa: N818 (an outcome, like the verifier's)
    """Verification was requested and the verifier cannot answer: the node fails closed."""


@dataclass(slots=True)
class Faults:
    down: bool = False  # refuse Electrum connections
    slow: float = 0.0  # seconds added before every answer
    reject: str | None = None  # reject every broadcast with this node message
    partitioned: bool = False  # no propagation to or from other nodes
    drop: int = 0  # drop the connection on the next N requests (-1: on every request)

    def to_json(self) -> dict[str, object]:
        return {
            "down": self.down,
            "slow": self.slow,
            "reject": self.reject,
            "partitioned": self.partitioned,
            "drop": self.drop,
        }


class NodeListener(Protocol):
    def on_tip(self, node: Node) -> None: ...

    def on_scripthashes(self, node: Node, touched: set[bytes]) -> None: ...

    def on_faults(self, node: Node) -> None: ...


@dataclass(frozen=True, slots=True)
class HistoryItem:
    txid: bytes
    height: int  # > 0 confirmed, 0 mempool with confirmed parents, -1 unconfirmed parents
    fee: int | None  # mempool entries only

    @property
    def tx_hash(self) -> str:
        return self.txid[::-1].hex()


@dataclass(frozen=True, slots=True)
class Unspent:
    outpoint: OutPoint
    output: TxOutput
    height: int  # 0 in the mempool


@dataclass
class Node:
    index: int
    clock: SimClock
    miner_locking: bytes
    verifier: AsyncLibauthVerifier | None = None
    verify: bool = False
    vm_year: int = 2026
    genesis: BlockRecord = field(default_factory=genesis_block)
    backend: ChainBackend = field(default_factory=EmbeddedBackend)
    chain: Chain = field(init=False)
    mempool: Mempool = field(init=False, default_factory=Mempool)
    faults: Faults = field(init=False, default_factory=Faults)
    listeners: list[NodeListener] = field(init=False, default_factory=list)
    network: Network | None = field(init=False, default=None)
    _nonce: itertools.count[int] = field(init=False, default_factory=itertools.count)
    _pending_touched: set[bytes] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.chain = Chain(self.genesis, halving_interval=self.backend.halving_interval)

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def height(self) -> int:
        return self.chain.height

    # --- transactions ---------------------------------------------------------------------

    async def submit(self, tx: Transaction | str | bytes, *, verify: bool | None = None) -> str:
        """Accept a transaction into the mempool (and relay it); return its txid.

        Raises TxRejected with the node's message, or ScriptVerificationUnavailable.
        Re-submitting a transaction already in the mempool returns its txid.
        """
        if self.faults.reject is not None:
            raise TxRejected(self.faults.reject)
        parsed = _parse(tx)
        try:
            checked = check_transaction(parsed, self.chain, self.mempool, vm_year=self.vm_year)
        except AlreadyInMempool as known:
            return str(known)
        if self.verify if verify is None else verify:
            await self._verify_scripts(checked)
            # The verifier awaited: the mempool may have moved on; re-check before adding.
            try:
                checked = check_transaction(parsed, self.chain, self.mempool, vm_year=self.vm_year)
            except AlreadyInMempool as known:
                return str(known)
        self.backend.submit_tx(checked.tx)
        self._add(checked)
        if self.network is not None:
            self.network.relay_tx(self, checked.tx)
        return parsed.txid_hex

    def accept_relayed(self, tx: Transaction) -> bool:
        """A peer relays a transaction it verified: scripts depend only on the transaction and
        its spent outputs (committed to by the outpoints), so they are not verified again."""
        try:
            checked = check_transaction(tx, self.chain, self.mempool, vm_year=self.vm_year)
        except (AlreadyInMempool, TxRejected):
            return False
        self._add(checked)
        return True

    async def _verify_scripts(self, checked: Checked) -> None:
        if self.verifier is None:
            raise ScriptVerificationUnavailable("script verification requested, no verifier")
        try:
            result = await self.verifier.verify(
                checked.tx, checked.source_outputs, vm=self.vm_year, standard=True
            )
            if result.valid:
                return
            relaxed = await self.verifier.verify(
                checked.tx, checked.source_outputs, vm=self.vm_year, standard=False
            )
        except VerifierUnavailable as exc:
            raise ScriptVerificationUnavailable(str(exc)) from exc
        if relaxed.valid:
            raise TxRejected(f"non-mandatory-script-verify-flag ({result.error})")
        raise TxRejected(f"mandatory-script-verify-flag-failed ({relaxed.error})")

    def _add(self, checked: Checked) -> None:
        entry = MempoolEntry(
            checked.tx,
            checked.txid,
            checked.fee,
            checked.tx.size(),
            self.clock.now(),
            checked.source_outputs,
        )
        self._emit_scripthashes(self.mempool.add(entry))

    # --- blocks -----------------------------------------------------------------------------

    def mine(
        self,
        count: int = 1,
        *,
        locking: bytes | None = None,
        txs: Sequence[Transaction] = (),
        include_mempool: bool = True,
        spacing: int | None = None,
    ) -> list[BlockRecord]:
        """Mine `count` blocks on the tip; the first also carries `txs` (which need not be in the
        mempool: a way to confirm a double spend). Each block is propagated to reachable peers."""
        self._adopt_foreign()
        mined = []
        for i in range(count):
            if spacing:
                self.clock.advance(spacing)
            block = self._build_block(
                locking, txs if i == 0 else (), include_mempool=include_mempool
            )
            self.backend.submit_block(block)
            self.connect_block(block)
            mined.append(block)
            if self.network is not None:
                self.network.announce_block(self)
        return mined

    def _adopt_foreign(self) -> None:
        """Take in what was sent to the real node directly (through Fulcrum, bitcoin-cli), so
        the blocks built here carry it as the node's own miner would."""
        foreign = self.backend.foreign_txs(self.mempool.entries.keys())
        if foreign:
            self._pending_touched = set()
            self._readd(foreign)
            touched, self._pending_touched = self._pending_touched, set()
            self._emit_scripthashes(touched)

    def _build_block(
        self, locking: bytes | None, extra: Sequence[Transaction], *, include_mempool: bool
    ) -> BlockRecord:
        height = self.chain.height + 1
        chosen: list[Transaction] = list(extra)
        fees = 0
        spent_by_extra = {i.outpoint for t in extra for i in t.inputs}
        extra_ids = {t.txid for t in extra}
        if include_mempool:
            size = sum(t.size() for t in chosen)
            excluded: set[bytes] = set()
            for entry in self.mempool.entries.values():
                if entry.txid in extra_ids:
                    continue
                parents = {i.outpoint.txid for i in entry.tx.inputs}
                conflict = any(i.outpoint in spent_by_extra for i in entry.tx.inputs)
                if conflict or parents & excluded or size + entry.size > MAX_BLOCK_TX_BYTES:
                    excluded.add(entry.txid)
                    continue
                chosen.append(entry.tx)
                fees += entry.fee
                size += entry.size
        fees += sum(self._fee_of(t) for t in extra)
        coinbase = coinbase_transaction(
            height,
            block_subsidy(height, self.chain.halving_interval) + fees,
            self.miner_locking if locking is None else locking,
            (self.index << 48) | next(self._nonce),
        )
        timestamp = max(self.clock.now(), self.chain.median_time_past() + 1)
        return assemble_block(self.chain.tip.hash, timestamp, coinbase, chosen)

    def _fee_of(self, tx: Transaction) -> int:
        if tx.txid in self.mempool:
            return self.mempool.entries[tx.txid].fee
        value_in = 0
        for inp in tx.inputs:
            coin = self.chain.utxos.get(inp.outpoint)
            out = coin.output if coin is not None else self.mempool.output(inp.outpoint)
            if out is None:
                return 0  # created in this very block or missing: connect() will judge
            value_in += out.value
        return max(0, value_in - sum(o.value for o in tx.outputs))

    def connect_block(self, block: BlockRecord) -> None:
        touched = self.chain.connect(block)
        for tx in block.txs[1:]:
            touched |= self.mempool.remove_confirmed(tx)
        self._emit_tip()
        self._emit_scripthashes(touched)

    def switch_to(self, branch: Sequence[BlockRecord]) -> None:
        """Make `branch` (blocks whose first one extends a block of our chain) the active chain:
        disconnect back to the fork, connect the branch, and return the disconnected blocks'
        transactions (and the mempool) to the mempool where they are still valid."""
        fork = self.chain.height_of(branch[0].prev_hash)
        if fork is None:
            raise ChainError("bad-prevblk")

        def connect() -> None:
            for block in branch:
                self._connect_raw(block)

        self._replace_tip(fork, connect)

    def reorg(self, depth: int, txs: Sequence[Transaction] = ()) -> list[BlockRecord]:
        """Replace the last `depth` blocks with `depth + 1` new ones; the first new block carries
        `txs` (e.g. a double spend of a transaction in the old branch). Old transactions return
        to the mempool unless the new branch spent their inputs."""
        if not 0 < depth <= self.chain.height:
            raise ChainError(f"cannot reorg {depth} blocks at height {self.chain.height}")
        fork = self.chain.height - depth
        new_blocks: list[BlockRecord] = []

        def build() -> None:
            for i in range(depth + 1):
                block = self._build_block(None, txs if i == 0 else (), include_mempool=False)
                self._connect_raw(block)
                self.backend.submit_block(block, tip=i == depth)
                new_blocks.append(block)

        self._replace_tip(fork, build)
        if self.network is not None:
            self.network.announce_block(self)
        return new_blocks

    def _connect_raw(self, block: BlockRecord) -> None:
        self._pending_touched |= self.chain.connect(block)

    def _replace_tip(self, fork: int, connect: Callable[[], None]) -> None:
        old: list[BlockRecord] = []
        self._pending_touched = set()
        while self.chain.height > fork:
            block, shs = self.chain.disconnect_tip()
            old.append(block)
            self._pending_touched |= shs
        saved = self.mempool.clear()
        for entry in saved:
            self._pending_touched |= entry.scripthashes()
        try:
            connect()
        except ChainError:
            while self.chain.height > fork:
                self.chain.disconnect_tip()
            for block in reversed(old):
                self.chain.connect(block)
            for entry in saved:
                self.mempool.add(entry)
            self._pending_touched = set()
            raise
        old_txs = [tx for block in reversed(old) for tx in block.txs[1:]]
        self._readd([*old_txs, *(e.tx for e in saved)])
        touched = self._pending_touched
        self._pending_touched = set()
        self._emit_tip()
        self._emit_scripthashes(touched)

    def _readd(self, txs: Iterable[Transaction]) -> None:
        """Re-accept transactions (scripts were verified when first accepted); a child may
        precede its parent (blocks are in canonical order), so retry until nothing moves."""
        pending = list(txs)
        while pending:
            retry: list[Transaction] = []
            for tx in pending:
                try:
                    checked = check_transaction(tx, self.chain, self.mempool, vm_year=self.vm_year)
                except AlreadyInMempool:
                    continue
                except TxRejected as exc:
                    if exc.message == "bad-txns-inputs-missingorspent":
                        retry.append(tx)
                    continue
                self._pending_touched |= self.mempool.add(
                    MempoolEntry(
                        tx,
                        checked.txid,
                        checked.fee,
                        tx.size(),
                        self.clock.now(),
                        checked.source_outputs,
                    )
                )
            if len(retry) == len(pending):
                break
            pending = retry

    # --- faults ---------------------------------------------------------------------------

    def set_faults(self, **changes: object) -> Faults:
        for key, value in changes.items():
            if not hasattr(self.faults, key):
                raise ValueError(f"unknown fault {key!r}")
            setattr(self.faults, key, value)
        for listener in list(self.listeners):
            listener.on_faults(self)
        if self.network is not None and "partitioned" in changes and not self.faults.partitioned:
            self.network.heal(self)
        return self.faults

    def clear_faults(self) -> Faults:
        return self.set_faults(**Faults().to_json())

    def take_drop(self) -> bool:
        """Whether to drop the connection on this request (consumes one of N)."""
        if self.faults.drop == 0:
            return False
        if self.faults.drop > 0:
            self.faults.drop -= 1
        return True

    # --- queries (what Electrum answers) --------------------------------------------------

    def find_tx(self, txid: bytes) -> tuple[Transaction, int] | None:
        """A transaction and its height: > 0 confirmed (genesis: 0 is never asked), 0 mempool."""
        entry = self.mempool.entries.get(txid)
        if entry is not None:
            return entry.tx, 0
        return self.chain.get_tx(txid)

    def history(self, sh: bytes) -> list[HistoryItem]:
        items = [HistoryItem(txid, h, None) for h, txid in self.chain.history(sh)]
        pool = [self.mempool.entries[t] for t in self.mempool.sh_index.get(sh, ())]
        unconfirmed = [HistoryItem(e.txid, self.mempool.electrum_height(e), e.fee) for e in pool]
        unconfirmed.sort(key=lambda item: (-item.height, item.tx_hash))
        return items + unconfirmed

    def status(self, sh: bytes) -> str | None:
        """Electrum status: sha256 of the concatenated `tx_hash:height:` strings, or None."""
        items = self.history(sh)
        if not items:
            return None
        text = "".join(f"{item.tx_hash}:{item.height}:" for item in items)
        return sha256(text.encode()).hex()

    def unspent(self, sh: bytes) -> list[Unspent]:
        spends = self.mempool.spends
        confirmed = [
            Unspent(op, coin.output, coin.height)
            for op, coin in self.chain.unspent(sh)
            if op not in spends
        ]
        confirmed.sort(key=lambda u: (u.height, u.outpoint.txid_hex, u.outpoint.index))
        unconfirmed = []
        for txid in self.mempool.sh_index.get(sh, ()):
            tx = self.mempool.entries[txid].tx
            for i, out in enumerate(tx.outputs):
                op = OutPoint(txid, i)
                if scripthash(out.locking) == sh and op not in spends:
                    unconfirmed.append(Unspent(op, out, 0))
        unconfirmed.sort(key=lambda u: (u.outpoint.txid_hex, u.outpoint.index))
        return confirmed + unconfirmed

    def utxo(self, op: OutPoint) -> Unspent | None:
        """An unspent output (unspent in the mempool too), or None if spent or unknown."""
        if op in self.mempool.spends:
            return None
        coin = self.chain.utxos.get(op)
        if coin is not None:
            return Unspent(op, coin.output, coin.height)
        out = self.mempool.output(op)
        return None if out is None else Unspent(op, out, 0)

    # --- events -----------------------------------------------------------------------------

    def _emit_tip(self) -> None:
        for listener in list(self.listeners):
            listener.on_tip(self)

    def _emit_scripthashes(self, touched: set[bytes]) -> None:
        if touched:
            for listener in list(self.listeners):
                listener.on_scripthashes(self, touched)


def _parse(tx: Transaction | str | bytes) -> Transaction:
    if isinstance(tx, Transaction):
        return tx
    try:
        return Transaction.from_bytes(tx) if isinstance(tx, bytes) else Transaction.from_hex(tx)
    except ValueError:  # DecodeError and token prefix errors are ValueErrors
        raise TxRejected("TX decode failed") from None
