"""Mempool acceptance as Bitcoin Cash Node does it, with BCHN's reject reasons.

The checks run in BCHN's order (context-free consensus, standardness, finality, duplicates,
conflicts, inputs, values, tokens, fee), so the reason a client sees is the one a real node
would give first. Script validity is checked afterwards by the node through libauth, because
it is the only step that needs the (asynchronous) verifier.
"""

from __future__ import annotations

from dataclasses import dataclass

from bch import policy
from bch.tx import MAX_SATS, SEQUENCE_FINAL, Transaction, TxOutput
from devnet.blocks import COINBASE_MATURITY, NULL_OUTPOINT
from devnet.chain import Chain
from devnet.mempool import Mempool

MAX_TX_SIZE = 32_000_000  # consensus cap: a transaction may not exceed the block size
LOCKTIME_THRESHOLD = 500_000_000


class TxRejected(Exception):  # noqa: N818 (a verdict, named as nodes say it)
    """The node refused the transaction; `message` is the node's reject message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AlreadyInMempool(Exception):  # noqa: N818 (a verdict, not an error)
    """The transaction is already accepted: a broadcast of it answers its txid."""


@dataclass(frozen=True, slots=True)
class Checked:
    """A transaction that passed every check but the scripts."""

    tx: Transaction
    txid: bytes
    source_outputs: tuple[TxOutput, ...]
    fee: int


def check_context_free(tx: Transaction) -> None:
    """BCHN's CheckRegularTransaction."""
    if not tx.inputs:
        raise TxRejected("bad-txns-vin-empty")
    if not tx.outputs:
        raise TxRejected("bad-txns-vout-empty")
    size = tx.size()
    if size > MAX_TX_SIZE:
        raise TxRejected("bad-txns-oversize")
    if size < policy.MIN_TX_SIZE:
        raise TxRejected("bad-txns-undersize")
    total = 0
    for out in tx.outputs:
        if out.value > MAX_SATS:
            raise TxRejected("bad-txns-vout-toolarge")
        total += out.value
        if total > MAX_SATS:
            raise TxRejected("bad-txns-txouttotal-toolarge")
    outpoints = [i.outpoint for i in tx.inputs]
    if len(set(outpoints)) != len(outpoints):
        raise TxRejected("bad-txns-inputs-duplicate")
    if NULL_OUTPOINT in outpoints:
        raise TxRejected("bad-tx-coinbase" if len(outpoints) == 1 else "bad-txns-prevout-null")


def node_message(violation: policy.PolicyViolation) -> str:
    """BCHN's `FormatStateMessage`: the reject reason, then ", " and the debug detail."""
    if violation.message.startswith(violation.reason):
        return violation.message
    return f"{violation.reason}, {violation.message}"


def _first(violations: list[policy.PolicyViolation]) -> None:
    if violations:
        raise TxRejected(node_message(violations[0]))


def check_standard(tx: Transaction, vm_year: int) -> None:
    _first(policy.standardness_errors(tx, vm_year=vm_year))


def check_final(tx: Transaction, next_height: int, median_time_past: int) -> None:
    """Locktime finality for the next block (BIP113: time locks compare to median time past)."""
    if tx.locktime == 0 or all(i.sequence == SEQUENCE_FINAL for i in tx.inputs):
        return
    cutoff = next_height if tx.locktime < LOCKTIME_THRESHOLD else median_time_past
    if tx.locktime >= cutoff:
        raise TxRejected("bad-txns-nonfinal, non-final transaction")


def check_inputs(
    tx: Transaction, chain: Chain, mempool: Mempool, *, next_height: int
) -> tuple[TxOutput, ...]:
    """Resolve every input against the chain's UTXO set and the mempool; return the spent
    outputs in input order. A spend of an outpoint the mempool already spends is a conflict
    (first seen wins: no replacement)."""
    for inp in tx.inputs:
        if inp.outpoint in mempool.spends:
            raise TxRejected("txn-mempool-conflict")
    spent: list[TxOutput] = []
    for inp in tx.inputs:
        coin = chain.utxos.get(inp.outpoint)
        if coin is not None:
            if coin.coinbase and next_height - coin.height < COINBASE_MATURITY:
                raise TxRejected(
                    "bad-txns-premature-spend-of-coinbase, tried to spend coinbase at depth "
                    f"{next_height - coin.height}"
                )
            spent.append(coin.output)
            continue
        out = mempool.output(inp.outpoint)
        if out is None:
            raise TxRejected("bad-txns-inputs-missingorspent")
        spent.append(out)
    return tuple(spent)


def check_values(tx: Transaction, spent: tuple[TxOutput, ...]) -> int:
    value_in = sum(o.value for o in spent)
    if value_in > MAX_SATS:
        raise TxRejected("bad-txns-inputvalues-outofrange")
    value_out = sum(o.value for o in tx.outputs)
    if value_in < value_out:
        raise TxRejected(
            f"bad-txns-in-belowout, value in ({_bch(value_in)}) < value out ({_bch(value_out)})"
        )
    return value_in - value_out


def _bch(sats: int) -> str:
    return f"{sats // 100_000_000}.{sats % 100_000_000:08d}"


def check_transaction(
    tx: Transaction,
    chain: Chain,
    mempool: Mempool,
    *,
    vm_year: int = 2026,
    require_standard: bool = True,
) -> Checked:
    """Every acceptance rule except script validity, in BCHN's order."""
    check_context_free(tx)
    if require_standard:
        check_standard(tx, vm_year)
    next_height = chain.height + 1
    check_final(tx, next_height, chain.median_time_past())
    txid = tx.txid
    if txid in mempool:
        raise AlreadyInMempool(tx.txid_hex)
    if txid in chain.tx_index:
        raise TxRejected("transaction already in block chain")
    spent = check_inputs(tx, chain, mempool, next_height=next_height)
    fee = check_values(tx, spent)
    _first(policy.token_balance_errors(tx, spent))
    if require_standard:
        _first(policy.input_standardness_errors(tx, spent, vm_year=vm_year))
        low_fee = policy.check_fee(tx, spent)
        if low_fee is not None:
            raise TxRejected(node_message(low_fee))
    return Checked(tx, txid, spent, fee)
