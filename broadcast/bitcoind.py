"""A BCHN node as a broadcast target, over its JSON-RPC (beside the Electrum servers).

`BitcoindTarget` broadcasts with `sendrawtransaction`, answers a dry run with
`testmempoolaccept` (the node's own verdict, nothing sent), and follows a transaction with
`getmempoolentry` (in the mempool) and `getrawtransaction txid 1` (confirmed: needs `-txindex`
once the transaction has left the mempool). `BitcoindView` answers the spent-output questions of
protection rules and dry runs from the node (`gettxout`, `getrawtransaction`) when no Electrum
server is configured; a node keeps no spent index, so it never names a spender.

Every answer is classified by the one table of `broadcast.verdicts` (RPC codes, then the node's
reject reason); the node's raw message is kept verbatim in the verdict.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from bch.encoding import DecodeError
from bch.tx import OutPoint, Transaction, TxOutput
from broadcast.config import NodeConfig
from broadcast.nodes import NodeUnavailable
from broadcast.spent import ChainTip, SourceUnavailable, SpentOutput, is_coinbase
from broadcast.verdicts import (
    ACCEPTED,
    UNKNOWN,
    Classification,
    Outcome,
    Verdict,
    classify_message,
    classify_rpc_error,
)
from indexer.bitcoind.errors import BitcoindClientError, RpcError, UnknownTransaction
from indexer.bitcoind.rpc import BitcoindRpc, RpcAddress

T = TypeVar("T")
RPC_CONNECTIONS = 2  # a broadcast and a re-check at once; the node's queue is shared
RPC_RETRIES = 1


@dataclass(frozen=True, slots=True)
class MempoolVerdict:
    """`testmempoolaccept`'s answer: the classification and the node's reject reason."""

    node: str
    classification: Classification
    message: str  # the node's `reject-reason` (or RPC error message), verbatim; "" if allowed

    @property
    def allowed(self) -> bool:
        return self.classification is ACCEPTED and not self.message


class BitcoindTarget:
    """One BCHN node's RPC, as the broadcaster uses it (the same surface as `NodeLink`)."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.name = config.name
        self.weight = config.weight
        self.timeout = config.timeout
        address = RpcAddress.parse(config.url, cookie=config.cookie or None)
        # One retry, on a fresh connection: BCHN closes a keep-alive connection idle for
        # -rpcservertimeout (30 s) and the client learns it only by the next request failing.
        # Sending a transaction again is harmless (a node that has it answers its txid); the
        # node's timeout bounds both attempts together (`call`).
        self.rpc = BitcoindRpc(
            address, connections=RPC_CONNECTIONS, timeout=config.timeout, retries=RPC_RETRIES
        )

    def __repr__(self) -> str:
        return f"<BitcoindTarget {self.name} weight={self.weight:g} timeout={self.timeout:g}s>"

    async def close(self) -> None:
        await self.rpc.close()

    async def connect(self) -> bool:
        try:
            await self.call("getblockcount")
        except NodeUnavailable:
            return False
        return True

    async def call(self, method: str, *params: Any) -> Any:
        """The result; RpcError as the node answered it; NodeUnavailable when it could not
        answer (unreachable, timed out, login refused, busy, nonsense)."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self.rpc.call(method, *params)
        except RpcError:
            raise
        except TimeoutError:
            raise NodeUnavailable(f"{self.name}: no answer within {self.timeout:g}s") from None
        except (BitcoindClientError, OSError) as exc:
            raise NodeUnavailable(f"{self.name}: {exc}") from None

    async def send(self, raw_hex: str, txid: str) -> Verdict:
        """`sendrawtransaction`, classified; never raises for anything the node does. A
        transaction already in the node's mempool is answered with its txid (accepted)."""
        started = time.monotonic()
        try:
            answer = await self.call("sendrawtransaction", raw_hex)
        except RpcError as exc:
            found = classify_rpc_error(exc.code, exc.message)
            return Verdict.of(self.name, found, exc.message, _since(started))
        except NodeUnavailable as exc:
            return Verdict.of(self.name, UNKNOWN, f"unreachable: {exc}", _since(started))
        if answer != txid:
            message = f"the node answered txid {answer}, not {txid}"
            return Verdict.of(self.name, UNKNOWN, message, _since(started))
        return Verdict.of(self.name, ACCEPTED, "", _since(started))

    async def test_accept(self, raw_hex: str) -> MempoolVerdict:
        """`testmempoolaccept`: the node's verdict without sending. NodeUnavailable when the
        node could not give one (its RPC errors other than a rejection included)."""
        try:
            answer = await self.call("testmempoolaccept", [raw_hex])
        except RpcError as exc:
            found = classify_rpc_error(exc.code, exc.message)
            if found.outcome is Outcome.UNKNOWN:
                raise NodeUnavailable(f"{self.name}: {exc}") from None
            return MempoolVerdict(self.name, found, exc.message)
        if not (isinstance(answer, list) and len(answer) == 1 and isinstance(answer[0], dict)):
            raise NodeUnavailable(f"{self.name}: testmempoolaccept answered {answer!r}")
        if answer[0].get("allowed") is True:
            return MempoolVerdict(self.name, ACCEPTED, "")
        reason = str(answer[0].get("reject-reason", ""))
        return MempoolVerdict(self.name, classify_message(reason), reason)

    async def transaction_height(self, txid: str) -> int | None:
        """> 0 confirmed at that height, 0 in the mempool, None unknown to the node."""
        try:
            await self.call("getmempoolentry", txid)
            return 0
        except RpcError as exc:
            if exc.code != -5:  # -5 "Transaction not in mempool"
                raise NodeUnavailable(f"{self.name}: {exc}") from None
        try:
            tx = await self.call("getrawtransaction", txid, 1)
        except UnknownTransaction:
            return None
        except RpcError as exc:
            raise NodeUnavailable(f"{self.name}: {exc}") from None
        block = tx.get("blockhash") if isinstance(tx, dict) else None
        if not isinstance(block, str):
            return 0  # entered the mempool between the two calls
        return await self.block_height(block)

    async def block_height(self, block_hash: str) -> int | None:
        """The height of a block of the node's best chain; None for one reorganised away
        (BCHN reports its confirmations as -1)."""
        header = await self.ask("getblockheader", block_hash, True)
        if not isinstance(header, dict) or not isinstance(header.get("height"), int):
            raise NodeUnavailable(f"{self.name}: getblockheader answered {header!r}")
        if int(header.get("confirmations", 0)) < 0:
            return None
        return int(header["height"])

    async def tip_height(self) -> int:
        height = await self.ask("getblockcount")
        if not isinstance(height, int):
            raise NodeUnavailable(f"{self.name}: getblockcount answered {height!r}")
        return height

    async def ask(self, method: str, *params: Any) -> Any:
        try:
            return await self.call(method, *params)
        except RpcError as exc:
            raise NodeUnavailable(f"{self.name}: {exc}") from None


class BitcoindView:
    """SpentOutputSource and ChainView over BCHN nodes, asked in order until one answers."""

    def __init__(self, targets: Sequence[BitcoindTarget]) -> None:
        if not targets:
            raise ValueError("at least one node is needed")
        self.targets = tuple(targets)

    async def _first(self, op: Callable[[BitcoindTarget], Awaitable[T]]) -> T:
        failures = []
        for target in self.targets:
            try:
                return await op(target)
            except NodeUnavailable as exc:
                failures.append(str(exc))
        raise SourceUnavailable("no node answered: " + "; ".join(failures))

    async def spent_outputs(
        self, outpoints: Sequence[OutPoint], *, find_spenders: bool = False
    ) -> list[SpentOutput]:
        return await self._first(lambda target: _lookup(target, outpoints))

    async def transaction_height(self, txid: str) -> int | None:
        return await self._first(lambda target: target.transaction_height(txid))

    async def chain_tip(self) -> ChainTip:
        async def op(target: BitcoindTarget) -> ChainTip:
            info = await target.ask("getblockchaininfo")
            if not isinstance(info, dict):
                raise NodeUnavailable(f"{target.name}: getblockchaininfo answered {info!r}")
            return ChainTip(int(info["blocks"]), int(info["mediantime"]))

        return await self._first(op)


async def _lookup(target: BitcoindTarget, outpoints: Sequence[OutPoint]) -> list[SpentOutput]:
    """Each outpoint's output (the parent by `getrawtransaction`) and whether it is unspent
    (`gettxout` with the mempool counted: null is spent or never existed)."""
    parents: dict[str, tuple[Transaction, int | None] | None] = {}
    for txid in dict.fromkeys(op.txid_hex for op in outpoints):
        try:
            found = await target.call("getrawtransaction", txid, 1)
        except UnknownTransaction:
            parents[txid] = None
            continue
        except RpcError as exc:  # the genesis coinbase (-5 too, another text), still loading, …
            if exc.code == -5 and "genesis" in exc.message:
                parents[txid] = None
                continue
            raise NodeUnavailable(f"{target.name}: {exc}") from None
        try:
            tx = Transaction.from_hex(str(found["hex"]))
        except (TypeError, KeyError, ValueError, DecodeError):
            tx = None
        if tx is None or tx.txid_hex != txid:
            raise NodeUnavailable(f"{target.name}: sent a transaction that is not {txid}")
        block = found.get("blockhash")
        height = await target.block_height(block) if isinstance(block, str) else 0
        parents[txid] = (tx, height)
    out = []
    for op in outpoints:
        parent = parents.get(op.txid_hex)
        if parent is None or op.index >= len(parent[0].outputs):
            out.append(SpentOutput(op, source=target.name))
            continue
        tx, height = parent
        utxo = await target.ask("gettxout", op.txid_hex, op.index, True)
        output: TxOutput = tx.outputs[op.index]
        out.append(
            SpentOutput(op, output, height, is_coinbase(tx), utxo is not None, source=target.name)
        )
    return out


def _since(started: float) -> float:
    return time.monotonic() - started
