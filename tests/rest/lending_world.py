"""A devnet scenario with full lending lifecycles (v1 and v11), indexed twice: the whole chain,
and the chain cut just before the first repay (while six loans are active and the interest-rate
oracle stands at 360 bp). The ledger's lending part (`extensions["lending"]`) and the chain's
header times are the tests' oracle. The decoders are configured as `ladle up` configures them:
the oracle decoder with the scenario's feeds (`feed_configs`: the BCH/USD feed and the rate
oracle), the lending decoder with the mainnet v1 deployment beside the devnet's v1 and v11
(`ladle_up_configs`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devnet.scenario import PRESETS, Ledger, ScenarioGenerator
from devnet.scenario.lending import LendingExtension
from devnet.service import Devnet, DevnetConfig
from indexer.decoders import create_decoders
from indexer.decoders.lending import LendingDecoder
from indexer.decoders.oracle import OracleDecoder
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from protocols.ledger_deployments import feed_configs
from protocols.oracle import FeedTable
from rest.config import RestConfig
from rest.tokens import StaticRegistry
from tests.indexer.test_decoder_lending import ladle_up_configs

PARAMS = PRESETS["small"].replace(seed=11)
LOAN_KINDS = {"borrow", "add_collateral", "refinance", "delegate", "repay", "redeem"}
LOAN_KINDS |= {"liquidation", "accrue"}
ENDING = ("repay", "redeem", "liquidation")


@dataclass(frozen=True)
class Index:
    db: Path
    height: int  # the tip
    now: int  # the API's clock: a minute after the running max of the header times


@dataclass(frozen=True)
class LendingWorld:
    ledger: Ledger
    part: dict[str, Any]  # extensions["lending"]
    times: list[int]  # header time per height
    positions: dict[str, int]  # txid -> index in its block (final chain)
    full: Index
    mid: Index  # cut just before the first repay

    def config(self, index: Index, **overrides: Any) -> RestConfig:
        base: dict[str, Any] = {
            "db_path": index.db,
            "clock": lambda: index.now,
            "rate_limit": 0,
            "warm": False,
            "registry": StaticRegistry(()),
            "usd_feed": self.ledger.oracle.category,
        }
        base.update(overrides)
        return RestConfig(**base)

    def records(self, index: Index, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """The ledger's lending records confirmed at or below the index's tip, chain order."""
        for r in self.part["records"]:
            confirmed = r["height"] is not None and r["height"] <= index.height
            if confirmed and (kind is None or r["kind"] == kind):
                yield r

    def order(self, r: dict[str, Any]) -> tuple[int, int, int]:
        """A record's place in the chain: height, position in the block, ledger sequence."""
        return r["height"], self.positions[r["txid"]], r["seq"]

    def mtp(self, height: int) -> int:
        """Median of the header times of the block and the 10 below it (`sorted[n // 2]`)."""
        window = sorted(self.times[max(0, height - 10) : height + 1])
        return window[len(window) // 2]

    def price_at(self, index: Index, now: int) -> tuple[int, int] | None:
        """(price, timestamp) of the confirmed oracle update with the highest sequence among
        those timestamped at or before `now`."""
        ups = [
            u
            for u in self.ledger.oracle_updates
            if u.height is not None and u.height <= index.height and u.timestamp <= now
        ]
        if not ups:
            return None
        best = max(ups, key=lambda u: u.sequence)
        return best.price, best.timestamp

    def rate_at(self, index: Index, now: int) -> tuple[int, int] | None:
        """(bp, timestamp) of the rate oracle's latest confirmed update timestamped at or before
        `now` (its updates form one chain: the latest is the last one)."""
        ups = [r for r in self.records(index, "rate") if r["timestamp"] <= now]
        if not ups:
            return None
        best = max(ups, key=lambda r: (r["timestamp"], self.order(r)))
        return best["bp"], best["timestamp"]


async def _index(path: Path, blocks: list[bytes], ledger: Ledger) -> None:
    snap = PoolSnapshot()
    feeds = FeedTable(feed_configs(ledger))
    decoders = [
        *create_decoders(["cauldron", "registry"], snapshot=snap),
        OracleDecoder(feeds),
        LendingDecoder(ladle_up_configs(ledger)),
    ]
    store = await Store.open(path, snapshot=snap, decoders=decoders)
    try:
        for height, raw in enumerate(blocks):
            await store.apply_block(height, raw)
    finally:
        await store.close()


async def _build(directory: Path) -> LendingWorld:
    config = DevnetConfig(tcp_base=0, ws_base=None, verify=False)
    async with Devnet(config) as net:
        result = await ScenarioGenerator(net, PARAMS, extensions=[LendingExtension()]).run()
        chain = net.nodes[0].chain
        blocks = [b.raw for b in chain.blocks]
        times = [b.header.time for b in chain.blocks]
        positions = {tx.txid_hex: i for b in chain.blocks for i, tx in enumerate(b.txs)}
    ledger = result.ledger
    part = ledger.extensions["lending"]
    assert isinstance(part, dict)
    cut = min(r["height"] for r in part["records"] if r["kind"] == "repay") - 1
    indexes = []
    for name, tip in (("full", len(blocks) - 1), ("mid", cut)):
        db = directory / f"{name}.sqlite"
        await _index(db, blocks[: tip + 1], ledger)
        indexes.append(Index(db, tip, max(times[: tip + 1]) + 60))
    return LendingWorld(ledger, part, times, positions, indexes[0], indexes[1])


def build_world(directory: Path) -> LendingWorld:
    return asyncio.run(_build(directory))
