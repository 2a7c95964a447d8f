"""The broadcast service without HTTP: what `POST /broadcast` and `GET /broadcast/status` do.

Order of a POST: decode; for a dry run, protection then validation (ours, then a BCHN node's
`testmempoolaccept` when one is configured: the node's verdict decides), nothing sent; otherwise a
known transaction is answered from its record (idempotent), a new one passes the protection
rules and is fanned out. Answers map the record's status: accepted (or pending with at least one
node holding the transaction) → its txid; rejected by a majority → REJECTED; no node accepted
and no majority rejected → BROADCAST_FAILED (outcome unknown, re-checked in the background).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from bch.encoding import DecodeError
from bch.tx import Transaction
from broadcast.bitcoind import BitcoindTarget, BitcoindView, MempoolVerdict
from broadcast.config import BroadcastConfig
from broadcast.diagnosis import diagnose
from broadcast.dryrun import dry_run, malformed, with_node_verdict
from broadcast.errors import (
    BAD_REQUEST,
    BROADCAST_FAILED,
    PROTECTION_REJECTED,
    REJECTED,
    TRANSACTION_NOT_FOUND,
    broadcast_error,
)
from broadcast.fanout import Broadcaster
from broadcast.nodes import CLIENT_NAME, BroadcastTarget, NodeLink, NodeUnavailable
from broadcast.protection import Protection, check_protection, inputs_unknown
from broadcast.records import BroadcastRecord, RecordStore
from broadcast.request import BroadcastRequest
from broadcast.spent import (
    ChainView,
    NodeSpentOutputs,
    SourcedView,
    SourceUnavailable,
    SpentOutputSource,
)
from broadcast.status import Status
from broadcast.verdicts import Reason, node_message
from indexer.bitcoind import BitcoindClient, RpcAddress
from indexer.electrum import ServerAddress
from indexer.freshness import lag_of, merged
from indexer.tipwatch import TipWatch
from indexer.tipwatch_node import NodeTipWatch
from runtime.tasks import cancel_and_wait
from verify.libauth import AsyncLibauthVerifier

log = logging.getLogger(__name__)

_HEADLINES = {
    Reason.CONFLICT: "Input already spent by another transaction in the mempool",
    Reason.MISSING_INPUTS: "Input missing or already spent",
    Reason.FEE: "Fee too low",
    Reason.FEE_TOO_HIGH: "Fee too high for the nodes",
    Reason.NONSTANDARD: "Non-standard transaction",
    Reason.INVALID: "Invalid transaction",
    Reason.MALFORMED: "Malformed transaction",
    Reason.OTHER: "Transaction rejected",
    Reason.UNKNOWN: "Transaction rejected",
}


class BroadcastService:
    """Use `await service.start()` (or `async with`). `spent_source` answers spent-output
    questions (default: the Electrum servers, else the BCHN nodes; the indexer's index later);
    `verifier` checks scripts in dry runs (default: libauth when `config.verify_scripts`,
    skipped where Node is missing)."""

    def __init__(
        self,
        config: BroadcastConfig,
        *,
        spent_source: SpentOutputSource | None = None,
        verifier: AsyncLibauthVerifier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.targets: list[BroadcastTarget] = [
            BitcoindTarget(n)
            if n.is_bitcoind
            else NodeLink(n, reconnect_backoff=config.reconnect_backoff)
            for n in config.nodes
        ]
        self.links = [t for t in self.targets if isinstance(t, NodeLink)]  # Electrum servers
        self.bitcoind = [t for t in self.targets if isinstance(t, BitcoindTarget)]
        nodes: ChainView = (
            NodeSpentOutputs(self.links) if self.links else BitcoindView(self.bitcoind)
        )
        # The best tip the Electrum servers announce, and which are reachable (for /health).
        self.tips = TipWatch(
            [n.url for n in config.nodes if not n.is_bitcoind], client_name=CLIENT_NAME
        )
        # A BCHN node has no header subscription: its tip is asked every second.
        self.node_tips = [
            NodeTipWatch(
                BitcoindClient(RpcAddress.parse(t.config.url, cookie=t.config.cookie or None))
            )
            for t in self.bitcoind
        ]
        self.started = clock()
        self.source: SpentOutputSource = spent_source or nodes
        self.view: ChainView = nodes if spent_source is None else SourcedView(spent_source, nodes)
        self._own_verifier = verifier is None and config.verify_scripts
        self.verifier = AsyncLibauthVerifier() if self._own_verifier else verifier
        self._store: RecordStore | None = None
        self._broadcaster: Broadcaster | None = None
        self._rechecker: asyncio.Task[None] | None = None
        self._warmup: asyncio.Task[None] | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._store = await RecordStore.open(self.config.db_path, clock=self.clock)
        self._broadcaster = Broadcaster(
            self.targets,
            self._store,
            record_ttl=self.config.record_ttl,
            missing_inputs_retry=self.config.missing_inputs_retry,
            clock=self.clock,
        )
        await self.tips.start()
        for watch in self.node_tips:
            await watch.start()
        loop = asyncio.get_running_loop()
        self._rechecker = loop.create_task(self._recheck_loop())
        # Connect to every node now, so that the first broadcast does not pay for handshakes.
        self._warmup = loop.create_task(self._connect_all())

    async def _connect_all(self) -> None:
        await asyncio.gather(*(target.connect() for target in self.targets))

    async def close(self) -> None:
        await cancel_and_wait(t for t in (self._rechecker, self._warmup) if t is not None)
        if self._broadcaster is not None:
            await self._broadcaster.close()
        if self._store is not None:
            await self._store.close()
        for target in self.targets:
            await target.close()
        await self.tips.close()
        for watch in self.node_tips:
            await watch.close()
        if self._own_verifier and self.verifier is not None:
            await self.verifier.close()

    async def __aenter__(self) -> BroadcastService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def health(self) -> dict[str, Any]:
        """`GET /health` (docs/broadcast.md): `ok` while every node's tip is heard, `degraded`
        while some are not, `unavailable` while none is; the best tip heard of and each node's
        connection and lag behind it."""
        heard = merged([self.tips.heard(), *(w.heard() for w in self.node_tips)])
        lag = lag_of(None, heard, self.clock())
        best = lag.best_height
        heights = [
            *(self.tips.server_heights.get(ServerAddress.parse(t.config.url)) for t in self.links),
            *(w.server_heights.get(w.node) for w in self.node_tips),
        ]
        names = [t.name for t in self.links] + [t.name for t in self.bitcoind]
        nodes = [
            {
                "name": name,
                "connected": height is not None,
                "height": height,
                "lag_blocks": None if height is None or best is None else max(0, best - height),
            }
            for name, height in zip(names, heights, strict=True)
        ]
        connected = sum(1 for n in nodes if n["connected"])
        status = "ok" if connected == len(nodes) else "degraded" if connected else "unavailable"
        return {
            "status": status,
            "best_height": best,
            "best_hash": lag.best_hash,
            "best_time": lag.best_time,
            "nodes": nodes,
            "connected": connected,
            "uptime_seconds": int(self.clock() - self.started),
        }

    @property
    def broadcaster(self) -> Broadcaster:
        if self._broadcaster is None:
            raise RuntimeError("the broadcast service is not started")
        return self._broadcaster

    @property
    def store(self) -> RecordStore:
        if self._store is None:
            raise RuntimeError("the broadcast service is not started")
        return self._store

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.recheck_interval)
            try:
                await self.recheck()
            except Exception:
                log.exception("re-checking broadcast records failed")

    async def recheck(self) -> int:
        """Re-check open records now (the background loop does it every interval)."""
        return await self.broadcaster.recheck()

    # --- requests -----------------------------------------------------------------------------

    async def status(self, txid: str) -> dict[str, Any]:
        record = await self.broadcaster.record(txid)
        if record is None:
            raise broadcast_error(
                TRANSACTION_NOT_FOUND,
                f"no broadcast record for {txid} (never broadcast here, or expired)",
            )
        return record.to_json()

    async def broadcast(self, request: BroadcastRequest) -> dict[str, Any]:
        try:
            tx = Transaction.from_hex(request.tx_hex)
        except (DecodeError, ValueError) as exc:
            if request.dry_run:
                validation = malformed(f"not a transaction: {exc} (TX decode failed)")
                return {"txid": None, "dry_run": True, "validation": validation.to_json()}
            raise broadcast_error(BAD_REQUEST, f"not a valid transaction: {exc}") from None
        rules = request.protection if request.protection is not None else self.config.protection
        if request.dry_run:
            await self._protect(tx, rules)
            return await self._dry_run(tx, request.diagnosis)
        record = await self.broadcaster.submit(
            tx.hex(), tx.txid_hex, before_sending=lambda: self._protect(tx, rules)
        )
        return await self._answer(tx, record, request.diagnosis)

    async def _protect(self, tx: Transaction, rules: Protection) -> None:
        """PROTECTION_REJECTED if `tx` breaks a rule (or the rules cannot be evaluated)."""
        if not rules.active:
            return
        try:
            infos = await self.source.spent_outputs([i.outpoint for i in tx.inputs])
        except SourceUnavailable as exc:
            raise broadcast_error(
                BROADCAST_FAILED,
                f"protection needs the outputs this transaction spends, and no node could be "
                f"asked: {exc}",
                extra={"txid": tx.txid_hex},
            ) from None
        missing = [i for i, info in enumerate(infos) if info.output is None]
        if missing:
            violation = inputs_unknown(tx, missing, rules)
            raise broadcast_error(
                PROTECTION_REJECTED,
                violation.message,
                violation.details,
                {"txid": tx.txid_hex},
            )
        spent = [info.output for info in infos if info.output is not None]
        violations = check_protection(tx, spent, rules)
        if violations:
            first = violations[0]
            details = {**first.details, "violations": [v.reason for v in violations]}
            raise broadcast_error(
                PROTECTION_REJECTED, first.message, details, {"txid": tx.txid_hex}
            )

    async def _dry_run(self, tx: Transaction, with_diagnosis: bool) -> dict[str, Any]:
        try:
            validation = await dry_run(
                tx, self.view, verifier=self.verifier, vm_year=self.config.vm_year
            )
        except SourceUnavailable as exc:
            raise broadcast_error(
                BROADCAST_FAILED,
                f"the dry run needs the nodes, and none could be asked: {exc}",
                extra={"txid": tx.txid_hex, "dry_run": True},
            ) from None
        if self.bitcoind:
            validation = with_node_verdict(validation, await self._test_accept(tx))
        body: dict[str, Any] = {
            "txid": tx.txid_hex,
            "dry_run": True,
            "validation": validation.to_json(),
        }
        if with_diagnosis and not validation.valid:
            found = await diagnose(
                tx,
                None,
                self.source,
                inputs=validation.inputs or None,
                validation_message=validation.message,
            )
            body["diagnosis"] = found.to_json()
        return body

    async def _test_accept(self, tx: Transaction) -> MempoolVerdict:
        """The first BCHN node's `testmempoolaccept`; BROADCAST_FAILED when none answers (a
        dry run that claims a node's verdict must have one)."""
        failures = []
        for target in self.bitcoind:
            try:
                return await target.test_accept(tx.hex())
            except NodeUnavailable as exc:
                failures.append(str(exc))
        raise broadcast_error(
            BROADCAST_FAILED,
            "the dry run asks a node (testmempoolaccept), and none could be asked: "
            + "; ".join(failures),
            extra={"txid": tx.txid_hex, "dry_run": True},
        )

    async def _answer(
        self, tx: Transaction, record: BroadcastRecord, with_diagnosis: bool
    ) -> dict[str, Any]:
        status = record.status
        summary = {
            "txid": record.txid,
            "status": status.value,
            "nodes_reached": record.nodes_reached,
            "nodes_total": len(record.slots),
            "estimated_network_reach": round(record.tally.estimated_network_reach, 4),
        }
        if status is Status.ACCEPTED or (status is not Status.REJECTED and record.nodes_reached):
            return summary
        t = record.tally
        if status is Status.REJECTED:
            reason = t.majority_reason or Reason.OTHER
            raw = next(
                (
                    r["message"]
                    for r in record.rejections()
                    if r["reason"] == reason.value and r["message"]
                ),
                "",
            )
            code = REJECTED
            message = f"{_HEADLINES[reason]}: rejected by {t.rejected} of {t.nodes_total} nodes"
            if raw:
                message += f" ({_one_line(str(raw))})"
        else:
            code = BROADCAST_FAILED
            message = (
                f"no node accepted the transaction ({t.rejected} rejected, "
                f"{t.unknown + t.outstanding} gave no verdict, of {t.nodes_total}); the outcome "
                f"is unknown and is re-checked: GET /broadcast/status/{record.txid}"
            )
        details = {
            **summary,
            "reason": None if t.majority_reason is None else t.majority_reason.value,
            "rejections": record.rejections(),
            "nodes": record.node_states(),  # the nodes without a verdict too: why it failed
        }
        extra: dict[str, Any] = {"txid": record.txid}
        if with_diagnosis:
            # A diagnosis reports every node's verdict: wait for the stragglers (each bounded by
            # its timeout); the error itself stays the one the majority decided.
            record = await self.broadcaster.complete(record.txid) or record
            found = await diagnose(tx, record, self.source, self.links)
            extra["diagnosis"] = found.to_json()
        raise broadcast_error(code, message, details, extra)


def _one_line(message: str) -> str:
    """A node's message without Fulcrum's wrapper, on one line."""
    return " ".join(node_message(message).split())
