"""Indexing lending deployments: loans, their actions, v11 bar/pool states and allowances.

Each configured deployment (`LendingConfig`: a protocol version with its categories and
contracts) is decoded with that version's layouts, so v1 and v11 can be indexed side by side.
`prepare` reads the live loans and allowances the block's candidates spend; decoding runs
parents first and keeps the block's own new loans in the context, so a loan created and acted
on in one block is seen. The owner hashes whose pay-to-NFT-hash outputs count as allowances are
every borrower and delegate hash seen in a loan (kept in memory, rebuilt by `load`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bch.script import p2sh32_locking_for_redeem, pushes
from bch.tx import OutPoint
from indexer.decoders.cauldron.decode import decode_order
from indexer.decoders.lending.schema import COMPONENT, MIGRATIONS
from indexer.store.decoder import BlockContext, BlockTx, Decoder
from indexer.store.schema import Migration
from indexer.store.writer import Writer
from protocols.lending import LendingConfig, Loan, LoanAction, StateOutput, classify
from protocols.lending.actions import allowance_outputs, loan_outputs, state_outputs
from protocols.lending.contracts import p2nfth_locking

_CHUNK = 300
_LOAN_COLUMNS = (
    "txid, vout, version, borrower_hash, delegate_hash, principal, rate_bp, loan_ts, collateral"
)


@dataclass(frozen=True, slots=True)
class LoanCreated:
    loan: Loan
    position: int


@dataclass(frozen=True, slots=True)
class LoanSpent:
    outpoint: OutPoint
    txid: bytes
    action: str


@dataclass(frozen=True, slots=True)
class ActionRow:
    txid: bytes
    seq: int
    position: int
    action: LoanAction


@dataclass(frozen=True, slots=True)
class StateRow:
    txid: bytes
    position: int
    state: StateOutput


@dataclass(frozen=True, slots=True)
class AllowanceCreated:
    outpoint: OutPoint
    owner_hash: bytes
    sats: int
    category: bytes | None  # wire
    token_amount: int
    position: int


@dataclass(frozen=True, slots=True)
class AllowanceSpent:
    outpoint: OutPoint
    txid: bytes


Row = LoanCreated | LoanSpent | ActionRow | StateRow | AllowanceCreated | AllowanceSpent


@dataclass(slots=True)
class LendingContext:
    time: int
    loans: dict[OutPoint, Loan]  # live loans the candidates may spend (+ the block's own)
    allowances: set[OutPoint]
    owners: dict[bytes, bytes]  # pay-to-NFT-hash locking -> owner hash
    new_owners: dict[bytes, bytes] = field(default_factory=dict)


def _revealed_locking(unlocking: bytes) -> bytes | None:
    """The P2SH32 locking a spend's unlocking bytecode proves (its last push is the redeem
    script), or None for anything else."""
    try:
        items = pushes(unlocking)
    except ValueError:
        return None
    return p2sh32_locking_for_redeem(items[-1]) if items else None


def deployment_of(
    loan: Loan,
    unlocking: bytes,
    configs: Sequence[LendingConfig],
    created: Sequence[Sequence[Loan]],
) -> int | None:
    """Index of the deployment a spent loan belongs to, None if none of its version is
    configured.

    The version alone is not enough: `ladle up` indexes the mainnet v1 deployment and the
    devnet's v1 side by side, and a devnet loan read by the mainnet one looked ended (its
    re-creation, under another category, went to the devnet pass as a new borrow). So: the
    deployments whose exact loan lockings hold the contract the spend reveals, else those
    taking any P2SH32, else any of the version; among them the first re-creating a loan of
    the same borrower in this transaction, else the first."""
    same = [k for k, c in enumerate(configs) if c.version == loan.version]
    if not same:
        return None
    locking = _revealed_locking(unlocking)
    exact = [k for k in same if (ls := configs[k].loan_lockings) is not None and locking in ls]
    wild = [k for k in same if configs[k].loan_lockings is None]
    pool = exact or wild or same
    for k in pool:
        if any(n.borrower_hash == loan.borrower_hash for n in created[k]):
            return k
    return pool[0]


def decode_lending_tx(
    tx: BlockTx, ctx: LendingContext, configs: Sequence[LendingConfig]
) -> list[Row]:
    t = tx.tx
    rows: list[Row] = []
    seq = 0
    # Each loan output goes to the first deployment recognising it (overlapping
    # configurations must not write one UTXO twice).
    created: list[list[Loan]] = []
    claimed: set[int] = set()
    for cfg in configs:
        mine = [n for n in loan_outputs(t, cfg) if n.outpoint.index not in claimed]
        claimed.update(n.outpoint.index for n in mine)
        created.append(mine)
    spent: list[dict[int, Loan]] = [{} for _ in configs]
    for i, inp in enumerate(t.inputs):
        loan = ctx.loans.get(inp.outpoint)
        if (
            loan is not None
            and (k := deployment_of(loan, inp.unlocking, configs, created)) is not None
        ):
            spent[k][i] = loan
    for cfg, mine, theirs in zip(configs, created, spent, strict=True):
        for action in classify(t, cfg, theirs, ctx.time, mine):
            rows.append(ActionRow(tx.txid, seq, tx.position, action))
            seq += 1
            if action.before is not None:
                rows.append(LoanSpent(action.before.outpoint, tx.txid, action.kind))
                ctx.loans.pop(action.before.outpoint, None)
        for loan in mine:
            rows.append(LoanCreated(loan, tx.position))
            ctx.loans[loan.outpoint] = loan
            for h in (loan.borrower_hash, loan.delegate_hash):
                if h is not None:
                    lock = p2nfth_locking(h)
                    if lock not in ctx.owners:
                        ctx.owners[lock] = h
                        ctx.new_owners[lock] = h
        rows += [StateRow(tx.txid, tx.position, s) for s in state_outputs(t, cfg)]
    for inp in t.inputs:
        if inp.outpoint in ctx.allowances:
            rows.append(AllowanceSpent(inp.outpoint, tx.txid))
            ctx.allowances.discard(inp.outpoint)
    for vout, owner in allowance_outputs(t, ctx.owners):
        out = t.outputs[vout]
        op = OutPoint(tx.txid, vout)
        tok = out.token
        rows.append(
            AllowanceCreated(
                op,
                owner,
                out.value,
                None if tok is None else tok.category,
                0 if tok is None else tok.amount,
                tx.position,
            )
        )
        ctx.allowances.add(op)
    return rows


def median_time_past(times: Iterable[int]) -> int:
    """Median of up to 11 header times (the block's and the 10 below it): `sorted[n // 2]`,
    as nodes compute it (the upper middle for an even count, near genesis)."""
    ordered = sorted(times)
    return ordered[len(ordered) // 2]


async def block_mtp(conn: Writer, block: BlockContext) -> int:
    rows = await conn.execute_fetchall(
        "SELECT time FROM blocks WHERE height < ? ORDER BY height DESC LIMIT 10", (block.height,)
    )
    return median_time_past([block.time, *(int(r[0]) for r in rows)])


def _loan_from_row(r: Any) -> Loan:
    return Loan(
        OutPoint(bytes(r[0])[::-1], int(r[1])),
        "v11" if r[2] == "v11" else "v1",
        bytes(r[3]),
        None if r[4] is None else bytes(r[4]),
        *(int(r[5]), int(r[6]), int(r[7]), int(r[8])),
    )


class LendingDecoder(Decoder[LendingContext, Row]):
    """See `indexer.store.decoder.Decoder`. `configs`: the deployments to index (default: the
    mainnet v1 constants)."""

    name = COMPONENT
    sparse = True  # a block without candidates changes nothing here
    migrations: Sequence[Migration] = MIGRATIONS

    def __init__(self, configs: Sequence[LendingConfig] | None = None) -> None:
        self.configs = tuple(configs) if configs is not None else (LendingConfig(),)
        patterns: list[bytes] = []
        for c in self.configs:
            for p in (c.stablecoin_wire, *c.patterns):
                if p not in patterns:
                    patterns.append(p)
        self.patterns: Sequence[bytes] = tuple(patterns)
        self.owners: dict[bytes, bytes] = {}

    async def load(self, conn: Writer) -> None:
        rows = await conn.execute_fetchall(
            "SELECT borrower_hash FROM lending_loans UNION "
            "SELECT delegate_hash FROM lending_loans WHERE delegate_hash IS NOT NULL"
        )
        self.owners = {p2nfth_locking(bytes(r[0])): bytes(r[0]) for r in rows}

    async def prepare(
        self, conn: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], LendingContext]:
        if not txs:  # most blocks: nothing to decode, so no copy of the owners
            return txs, LendingContext(block.time, {}, set(), {})
        outpoints = list({i.outpoint for t in txs for i in t.tx.inputs})
        loans: dict[OutPoint, Loan] = {}
        allowances: set[OutPoint] = set()
        for i in range(0, len(outpoints), _CHUNK):
            chunk = outpoints[i : i + _CHUNK]
            values = ",".join("(?,?)" for _ in chunk)
            params: list[object] = []
            for op in chunk:
                params += (op.txid[::-1], op.index)
            for r in await conn.execute_fetchall(
                f"SELECT {_LOAN_COLUMNS} FROM lending_loans WHERE (txid, vout) IN "
                f"(VALUES {values}) AND spent_height IS NULL",
                params,
            ):
                loan = _loan_from_row(r)
                loans[loan.outpoint] = loan
            for r in await conn.execute_fetchall(
                f"SELECT txid, vout FROM lending_allowances WHERE (txid, vout) IN "
                f"(VALUES {values}) AND spent_height IS NULL",
                params,
            ):
                allowances.add(OutPoint(bytes(r[0])[::-1], int(r[1])))
        ctx = LendingContext(block.time, loans, allowances, dict(self.owners))
        return decode_order(txs), ctx

    def decode(self, tx: BlockTx, context: LendingContext) -> Sequence[Row]:
        return decode_lending_tx(tx, context, self.configs)

    async def write(self, conn: Writer, block: BlockContext, rows: Sequence[Row]) -> None:
        if not rows:
            return  # no thread hops for a block without lending activity
        h, t = block.height, block.time
        mtp = await block_mtp(conn, block)
        loans, spends, actions, states, allowances, allowance_spends = [], [], [], [], [], []
        for r in rows:
            if isinstance(r, LoanCreated):
                x = r.loan
                loans.append(
                    (
                        *(x.outpoint.txid[::-1], x.outpoint.index, x.version, x.borrower_hash),
                        *(x.delegate_hash, x.principal, x.rate_bp, x.timestamp, x.collateral),
                        *(h, t, mtp, r.position),
                    )
                )
            elif isinstance(r, LoanSpent):
                spends.append(
                    (r.txid[::-1], h, t, r.action, r.outpoint.txid[::-1], r.outpoint.index)
                )
            elif isinstance(r, ActionRow):
                actions.append(_action_params(r, h, t, mtp))
            elif isinstance(r, StateRow):
                s = r.state
                states.append(
                    (
                        *(r.txid[::-1], s.vout, s.kind, h, t, mtp, r.position, s.staked),
                        *(s.shares, s.bch_pot, s.sats, s.token_amount),
                    )
                )
            elif isinstance(r, AllowanceCreated):
                allowances.append(
                    (
                        *(r.outpoint.txid[::-1], r.outpoint.index, r.owner_hash, r.sats),
                        *(None if r.category is None else r.category[::-1], r.token_amount),
                        *(h, t, r.position),
                    )
                )
            else:
                allowance_spends.append(
                    (r.txid[::-1], h, t, r.outpoint.txid[::-1], r.outpoint.index)
                )
        await conn.executemany(
            "INSERT INTO lending_loans VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL,NULL,NULL)",
            loans,
        )
        await conn.executemany(
            "UPDATE lending_loans SET spent_txid = ?, spent_height = ?, spent_time = ?, "
            "spent_action = ? WHERE txid = ? AND vout = ? AND spent_height IS NULL",
            spends,
        )
        await conn.executemany(
            "INSERT INTO lending_actions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            actions,
        )
        await conn.executemany(
            "INSERT INTO lending_states VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", states
        )
        await conn.executemany(
            "INSERT INTO lending_allowances VALUES (?,?,?,?,?,?,?,?,?,NULL,NULL,NULL)", allowances
        )
        await conn.executemany(
            "UPDATE lending_allowances SET spent_txid = ?, spent_height = ?, spent_time = ? "
            "WHERE txid = ? AND vout = ? AND spent_height IS NULL",
            allowance_spends,
        )

    async def undo_to(self, conn: Writer, height: int) -> None:
        for table in ("lending_actions", "lending_states"):
            await conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))
        for table in ("lending_loans", "lending_allowances"):
            clear = "spent_txid = NULL, spent_height = NULL, spent_time = NULL"
            if table == "lending_loans":
                clear += ", spent_action = NULL"
            await conn.execute(f"UPDATE {table} SET {clear} WHERE spent_height > ?", (height,))
            await conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))

    def committed(
        self, block: BlockContext, rows: Sequence[Row], evicted: Collection[bytes]
    ) -> None:
        for r in rows:
            if isinstance(r, LoanCreated):
                for owner in (r.loan.borrower_hash, r.loan.delegate_hash):
                    if owner is not None:
                        self.owners.setdefault(p2nfth_locking(owner), owner)


def _action_params(r: ActionRow, h: int, t: int, mtp: int) -> tuple[object, ...]:
    a = r.action
    b, n = a.before, a.after
    ref = n if n is not None else b
    delegate = None if ref is None else ref.delegate_hash
    return (
        *(r.txid[::-1], r.seq, h, t, mtp, r.position, a.version, a.kind, a.borrower_hash),
        *(delegate, a.input_index, None if n is None else n.outpoint.index),
        *(None if b is None else b.collateral, None if n is None else n.collateral),
        *(None if b is None else b.principal, None if n is None else n.principal),
        *(None if b is None else b.rate_bp, None if n is None else n.rate_bp),
        *(None if b is None else b.timestamp, None if n is None else n.timestamp),
        a.interest,
    )
