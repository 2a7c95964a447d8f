"""Scenario parameters and the named presets.

Everything a scenario does follows from these values and the devnet's clock: the same
parameters on the same devnet configuration give the same chain, byte for byte.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

DEFAULT_HTTP_BASE = "http://127.0.0.1:50005"


@dataclass(frozen=True, slots=True)
class ScenarioParams:
    seed: int = 1
    days: int = 30
    block_interval: int = 600  # simulated seconds between blocks
    tokens: int = 8  # fungible tokens (>= 6: the fixed cast of BCMR cases comes first)
    pools: int = 200  # pools of the busiest token (the "thousands of pools" token)
    pools_per_token: int = 6  # pools of every other token
    pools_per_owner: int = 8  # average pools one owner holds of the busiest token
    trades_per_day: int = 150
    deposits_per_day: float = 4.0
    withdrawals_per_day: float = 2.0
    creation_days: float = 0.2  # fraction of the history during which the first pools appear
    max_trade_pools: int = 50
    traders: int = 24
    test_wallets: int = 3
    oracle_interval: int = 3600  # simulated seconds between oracle updates
    reorgs: int = 1  # reorganisations of depth 1..max_reorg_depth during the history
    max_reorg_depth: int = 3
    decoys: int = 2  # BCH-only payments to pool addresses (not pools)
    payments_per_day: int = 0  # plain P2PKH payments between traders (non-Cauldron filler)
    mempool_txs: int = 3  # trades left unconfirmed at the end
    verify: bool = False  # check every generated transaction's scripts with libauth
    http_base: str = DEFAULT_HTTP_BASE  # where the devnet's HTTP server serves registries
    # Halfway through the history, burn the identity of the token that published its registry
    # in a later authchain link (Dragon Gold): a link whose output 0 is OP_RETURN. Off in the
    # presets (it adds a transaction); the REST registry tests turn it on.
    burn_identity: bool = False

    def __post_init__(self) -> None:
        if self.days < 1:
            raise ValueError("a scenario needs at least one day")
        if not 60 <= self.block_interval <= 86_400:
            raise ValueError("block_interval must be between 60 and 86400 seconds")
        if self.tokens < 6:
            raise ValueError("a scenario needs at least 6 tokens (its BCMR cases)")
        if self.pools < 1 or self.pools_per_token < 1 or self.pools_per_owner < 1:
            raise ValueError("pool counts must be positive")
        if not 1 <= self.max_trade_pools <= 300:
            raise ValueError("max_trade_pools must be between 1 and 300")
        if self.traders < 2 or self.test_wallets < 0:
            raise ValueError("a scenario needs at least two traders")
        if not 0 < self.creation_days <= 1:
            raise ValueError("creation_days is a fraction of the history, in (0, 1]")
        if self.oracle_interval < self.block_interval:
            raise ValueError("oracle_interval must be at least one block interval")
        if min(self.reorgs, self.decoys, self.mempool_txs, self.payments_per_day) < 0:
            raise ValueError("reorgs, decoys, mempool_txs and payments_per_day cannot be negative")
        if self.max_reorg_depth < 1:
            raise ValueError("max_reorg_depth must be at least 1")
        if not self.http_base.startswith("http://"):
            raise ValueError("http_base must be an http:// URL")

    @property
    def blocks_per_day(self) -> int:
        return max(1, 86_400 // self.block_interval)

    def replace(self, **changes: Any) -> ScenarioParams:
        """A copy with the given fields changed (None values are ignored: unset CLI flags)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


PRESETS: dict[str, ScenarioParams] = {
    # Tests: a few days, a few hundred transactions, well under 5 s.
    "small": ScenarioParams(
        days=3,
        block_interval=1800,
        tokens=6,
        pools=24,
        pools_per_token=3,
        pools_per_owner=4,
        trades_per_day=30,
        deposits_per_day=2.0,
        withdrawals_per_day=1.5,
        creation_days=0.34,
        max_trade_pools=12,
        traders=6,
        oracle_interval=4 * 3600,
        reorgs=1,
        max_reorg_depth=2,
        decoys=1,
        mempool_txs=2,
        payments_per_day=4,
    ),
    # `ladle up` / `make run`: a month of history in seconds.
    "default": ScenarioParams(payments_per_day=20),
    # The benchmark: 90 days and a token with 2,000 pools.
    "large": ScenarioParams(
        days=90,
        tokens=12,
        pools=2000,
        pools_per_token=10,
        pools_per_owner=8,
        trades_per_day=300,
        deposits_per_day=6.0,
        withdrawals_per_day=3.0,
        creation_days=0.15,
        traders=60,
        reorgs=3,
        decoys=4,
        mempool_txs=5,
    ),
}
