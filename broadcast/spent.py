"""What the outputs a transaction spends look like, and who else spends them.

Protection rules, dry runs and diagnoses all need the spent outputs (values, tokens, locking
bytecode), whether each is still unspent, and for a spent one the transaction that spent it.
`SpentOutputSource` is that question; the indexer's SQLite index will answer it in one query
once it exists. Until then `NodeSpentOutputs` answers it over Electrum from the first node that
responds: the parent transaction (`blockchain.transaction.get`), whether the output is unspent
(`blockchain.utxo.get_info`), and for a spent one, the spender found in the history of the
output's script (`blockchain.scripthash.get_history`).
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from bch.tx import OutPoint, Transaction, TxOutput
from broadcast.nodes import NodeLink, NodeUnavailable
from indexer.electrum import (
    ElectrumError,
    ElectrumProtocolError,
    GenesisCoinbase,
    UnknownTransaction,
    scripthash,
)
from indexer.electrum.results import checked_transaction

T = TypeVar("T")
NULL_TXID = bytes(32)
MEDIAN_TIME_SPAN = 11


class SourceUnavailable(Exception):  # noqa: N818 (a state: nobody could answer)
    """No source could answer; the outputs' state is unknown (not "missing")."""


@dataclass(frozen=True, slots=True)
class SpentOutput:
    outpoint: OutPoint
    output: TxOutput | None = None  # None: the parent transaction (or that index) is unknown
    parent_height: int | None = None  # > 0 confirmed at, 0 or -1 mempool, None unknown
    parent_coinbase: bool = False
    unspent: bool | None = None  # None: could not tell
    spender: str | None = None  # display txid of the transaction spending it, when found
    spender_height: int | None = None  # > 0 confirmed at, 0 or -1 mempool
    source: str = ""  # the node (or index) that answered

    @property
    def exists(self) -> bool:
        return self.output is not None

    @property
    def spent_in(self) -> str | None:
        """ "mempool" or "chain" for a spent output whose spender was found."""
        if self.spender is None or self.spender_height is None:
            return None
        return "chain" if self.spender_height > 0 else "mempool"


@dataclass(frozen=True, slots=True)
class ChainTip:
    height: int
    median_time_past: int


class SpentOutputSource(Protocol):
    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        """One entry per outpoint, in order. With `find_spenders`, spent outputs name their
        spender when it can be found. Raises SourceUnavailable when nothing could answer."""
        ...


class ChainView(SpentOutputSource, Protocol):
    """What a dry run needs besides the spent outputs."""

    async def transaction_height(self, txid: str) -> int | None: ...

    async def chain_tip(self) -> ChainTip: ...


class SourcedView:
    """A ChainView taking spent outputs from `source` (the index, once it exists) and the rest
    (transaction heights, the tip) from `chain` (the nodes)."""

    def __init__(self, source: SpentOutputSource, chain: ChainView) -> None:
        self.source = source
        self.chain = chain

    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        return await self.source.spent_outputs(outpoints, find_spenders=find_spenders)

    async def transaction_height(self, txid: str) -> int | None:
        return await self.chain.transaction_height(txid)

    async def chain_tip(self) -> ChainTip:
        return await self.chain.chain_tip()


def is_coinbase(tx: Transaction) -> bool:
    return (
        len(tx.inputs) == 1
        and tx.inputs[0].outpoint.txid == NULL_TXID
        and tx.inputs[0].outpoint.index == 0xFFFFFFFF
    )


def header_time(header: bytes) -> int:
    return int.from_bytes(header[68:72], "little")


class NodeSpentOutputs:
    """SpentOutputSource (and ChainView) over Electrum, asking the nodes in order until one
    answers. `max_history` bounds how many transactions of a script's history are fetched to
    find a spender (the most recent ones, mempool last, are tried)."""

    def __init__(self, links: Sequence[NodeLink], *, max_history: int = 200) -> None:
        if not links:
            raise ValueError("at least one node is needed")
        self.links = tuple(links)
        self.max_history = max_history

    async def _first(self, op: Callable[[NodeLink], Awaitable[T]]) -> T:
        failures = []
        for link in self.links:
            try:
                return await op(link)
            except (NodeUnavailable, ElectrumProtocolError) as exc:
                failures.append(str(exc))
        raise SourceUnavailable("no node answered: " + "; ".join(failures))

    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        return await self._first(lambda link: self._lookup(link, outpoints, find_spenders))

    async def transaction_height(self, txid: str) -> int | None:
        return await self._first(lambda link: link.transaction_height(txid))

    async def chain_tip(self) -> ChainTip:
        async def op(link: NodeLink) -> ChainTip:
            height, header = await link.tip()
            start = max(0, height - MEDIAN_TIME_SPAN + 1)
            headers = await link.call(link.client.get_headers(start, height - start + 1))
            times = [header_time(h) for h in headers] or [header_time(header)]
            return ChainTip(height, int(statistics.median_low(times)))

        return await self._first(op)

    # --- one node -----------------------------------------------------------------------------

    async def _lookup(
        self, link: NodeLink, outpoints: Sequence[OutPoint], find_spenders: bool
    ) -> list[SpentOutput]:
        parents = list(dict.fromkeys(op.txid_hex for op in outpoints))
        results = await link.batch(
            [("blockchain.transaction.get", [t]) for t in parents]
            + [("blockchain.transaction.get_height", [t]) for t in parents]
        )
        txs: dict[str, Transaction] = {}
        heights: dict[str, int | None] = {}
        for txid, raw, height in zip(parents, results, results[len(parents) :], strict=False):
            if isinstance(raw, ElectrumError):
                _not_found_or_raise(raw, link)
                continue
            txs[txid] = Transaction.from_bytes(checked_transaction(raw, txid))
            heights[txid] = height if isinstance(height, int) else None

        known = [
            op
            for op in outpoints
            if op.txid_hex in txs and op.index < len(txs[op.txid_hex].outputs)
        ]
        infos = await link.batch(
            [("blockchain.utxo.get_info", [op.txid_hex, op.index]) for op in known]
        )
        unspent: dict[OutPoint, bool | None] = {}
        for op, info in zip(known, infos, strict=True):
            if isinstance(info, ElectrumError):
                _not_found_or_raise(info, link)
                unspent[op] = None
            else:
                unspent[op] = info is not None

        spenders: dict[OutPoint, tuple[str, int]] = {}
        if find_spenders:
            spent = [op for op in known if unspent.get(op) is False]
            outputs = {op: txs[op.txid_hex].outputs[op.index] for op in spent}
            spenders = await self._find_spenders(link, outputs, txs)

        out = []
        for op in outpoints:
            parent = txs.get(op.txid_hex)
            if parent is None or op.index >= len(parent.outputs):
                out.append(SpentOutput(op, source=link.name))
                continue
            spender = spenders.get(op)
            out.append(
                SpentOutput(
                    op,
                    parent.outputs[op.index],
                    heights.get(op.txid_hex),
                    is_coinbase(parent),
                    unspent.get(op),
                    None if spender is None else spender[0],
                    None if spender is None else spender[1],
                    link.name,
                )
            )
        return out

    async def _find_spenders(
        self,
        link: NodeLink,
        outputs: dict[OutPoint, TxOutput],
        known_txs: dict[str, Transaction],
    ) -> dict[OutPoint, tuple[str, int]]:
        """The (txid, height) spending each outpoint, searched in its script's history."""
        if not outputs:
            return {}
        by_script: dict[str, list[OutPoint]] = {}
        for op, output in outputs.items():
            by_script.setdefault(scripthash(output.locking), []).append(op)
        scripts = list(by_script)
        histories = await link.batch(
            [("blockchain.scripthash.get_history", [sh]) for sh in scripts]
        )
        candidates: dict[str, int] = {}
        for sh, history in zip(scripts, histories, strict=True):
            if not isinstance(history, list):
                continue
            parents = {op.txid_hex for op in by_script[sh]}
            for item in history[-self.max_history :]:
                if not isinstance(item, dict):
                    continue
                tx_hash, height = item.get("tx_hash"), item.get("height")
                if isinstance(tx_hash, str) and isinstance(height, int) and tx_hash not in parents:
                    candidates[tx_hash.lower()] = height
        wanted = [t for t in candidates if t not in known_txs]
        fetched = await link.batch([("blockchain.transaction.get", [t]) for t in wanted])
        txs = dict(known_txs)
        for txid, raw in zip(wanted, fetched, strict=True):
            if not isinstance(raw, ElectrumError):
                txs[txid] = Transaction.from_bytes(checked_transaction(raw, txid))
        found: dict[OutPoint, tuple[str, int]] = {}
        for txid, height in candidates.items():
            tx = txs.get(txid)
            if tx is None:
                continue
            for txin in tx.inputs:
                if txin.outpoint in outputs:
                    found[txin.outpoint] = (txid, height)
        return found


def _not_found_or_raise(error: ElectrumError, link: NodeLink) -> None:
    """A "no such transaction" answer is information; anything else (a node still loading,
    overload, an internal error) says nothing about the transaction: ask elsewhere. The genesis
    coinbase counts as missing: nothing can spend it."""
    if not isinstance(error, UnknownTransaction | GenesisCoinbase):
        raise NodeUnavailable(f"{link.name}: {error}")
