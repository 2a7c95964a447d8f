"""How far an index (or the snapshot built from it) lags the best chain tip heard of: pure
functions over what the tip watch (`indexer.tipwatch`) heard, shared by every component so that
the indexer, the router, the REST workers and the broadcaster report lag the same way.

- `lag_blocks`: best height heard of (from any connected server) minus the index height.
- `lag_seconds`: how long the index has possibly been out of date: 0 while it holds the best tip
  heard and a server is connected; while it lacks blocks, the seconds since the first block it
  lacks was heard of; while no server is connected, at least the seconds since the last one
  went away (nothing is known after that moment). Not the age of the tip block: an idle chain
  (no block for an hour) is not a stale index.

`Bound` says when a lag is too much to answer from (the router's `--max-lag-blocks` and
`--max-lag-seconds`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_LAG_BLOCKS = 10
DEFAULT_MAX_LAG_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Heard:
    """What the tip watch knows: the tips heard (height → (header hash, header time, when first
    heard, Unix seconds)), servers configured and connected, and since when none is."""

    tips: Mapping[int, tuple[str, int, float]]
    servers: int
    connected: int
    offline_since: float | None  # Unix seconds; None while a server is connected

    @property
    def best_height(self) -> int | None:
        return max(self.tips) if self.tips else None


NOTHING_HEARD = Heard({}, 0, 0, None)


def merged(heards: Sequence[Heard]) -> Heard:
    """What several watches heard, as one (e.g. Electrum servers and BCHN nodes side by side):
    every tip, the earliest hearing of a height winning; servers and connections added; offline
    only while none is connected, since the last of them went away."""
    tips: dict[int, tuple[str, int, float]] = {}
    for heard in heards:
        for height, tip in heard.tips.items():
            if height not in tips or tip[2] < tips[height][2]:
                tips[height] = tip
    connected = sum(h.connected for h in heards)
    offline = [h.offline_since for h in heards if h.offline_since is not None]
    offline_since = max(offline) if offline and not connected else None
    return Heard(tips, sum(h.servers for h in heards), connected, offline_since)


@dataclass(frozen=True, slots=True)
class Lag:
    index_height: int | None
    best_height: int | None
    best_hash: str | None
    best_time: int | None  # header time of the best tip heard
    lag_blocks: int | None  # None while either height is unknown
    lag_seconds: float | None  # None when nothing was ever heard and no server went away
    servers: int
    connected: int

    def to_json(self) -> dict[str, Any]:
        return {
            "index_height": self.index_height,
            "best_height": self.best_height,
            "best_hash": self.best_hash,
            "best_time": self.best_time,
            "lag_blocks": self.lag_blocks,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "servers": self.servers,
            "connected": self.connected,
        }


def lag_of(index_height: int | None, heard: Heard, now: float) -> Lag:
    """The lag of an index at `index_height` (None: empty) behind what `heard` holds, at `now`."""
    best = heard.best_height
    best_hash = best_time = None
    if best is not None:
        best_hash, best_time, _ = heard.tips[best]
    lag_blocks = None
    behind_since: float | None = None
    if best is not None and index_height is not None:
        lag_blocks = max(0, best - index_height)
        if lag_blocks:
            behind_since = min(at for h, (_, _, at) in heard.tips.items() if h > index_height)
    elif best is not None:
        behind_since = min(at for _, _, at in heard.tips.values())
    since = [t for t in (behind_since, heard.offline_since) if t is not None]
    lag_seconds: float | None = max(0.0, now - min(since)) if since else None
    if lag_seconds is None and best is not None:
        lag_seconds = 0.0
    return Lag(
        index_height,
        best,
        best_hash,
        best_time,
        lag_blocks,
        lag_seconds,
        heard.servers,
        heard.connected,
    )


@dataclass(frozen=True, slots=True)
class Bound:
    """The most lag a component answers from; beyond it, it says it is stale."""

    max_lag_blocks: int = DEFAULT_MAX_LAG_BLOCKS
    max_lag_seconds: float = DEFAULT_MAX_LAG_SECONDS

    def __post_init__(self) -> None:
        if self.max_lag_blocks < 0 or not self.max_lag_seconds >= 0:
            raise ValueError("the lag bounds must be ≥ 0")

    def stale(self, lag: Lag) -> bool:
        """True when the lag is beyond the bound, or unknowable (no tip ever heard while the
        servers are away)."""
        if lag.lag_seconds is None:
            return True
        if lag.lag_blocks is not None and lag.lag_blocks > self.max_lag_blocks:
            return True
        return lag.lag_seconds > self.max_lag_seconds
