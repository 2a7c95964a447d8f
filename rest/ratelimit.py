"""A per-client token bucket: `per_minute` requests, refilled continuously, burst of the same
size. Idle clients' buckets are forgotten once full, so memory stays bounded by the number of
recently active clients."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

PRUNE_AT = 10_000


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be >= 1")
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0  # tokens per second
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self.refused = 0

    def check(self, client: str) -> int | None:
        """None if the request may go ahead, else the whole seconds to wait (Retry-After)."""
        now = self.clock()
        tokens, at = self._buckets.get(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[client] = (tokens - 1.0, now)
            if len(self._buckets) > PRUNE_AT:
                self._prune(now)
            return None
        self._buckets[client] = (tokens, now)
        self.refused += 1
        return max(1, math.ceil((1.0 - tokens) / self.rate))

    def _prune(self, now: float) -> None:
        full = [
            c
            for c, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * self.rate >= self.capacity
        ]
        for c in full:
            del self._buckets[c]
