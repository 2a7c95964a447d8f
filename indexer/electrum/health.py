"""Per-server health and reconnect backoff: which server the pool tries next, and when.

A server's score is in seconds, lower is better: its smoothed request latency plus a penalty of
`PENALTY_SECONDS` per recent timeout, connection failure or overload error. Penalties halve every
`PENALTY_HALF_LIFE` seconds, so a server that misbehaved a while ago gets another chance. After a
connection failure a server is not retried before its backoff expires: exponential in the number
of consecutive failures, with jitter so that many clients do not reconnect in lockstep, and
capped at `MAX_RECONNECT_DELAY` so that a server coming back after an outage of any length is
used again within that many seconds (the cost: one refused connect per server and cap while it
is down).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from indexer.electrum.address import ServerAddress

LATENCY_SMOOTHING = 0.3  # weight of the newest sample in the moving average
UNKNOWN_LATENCY = 0.25  # seconds assumed for a server never measured
PENALTY_SECONDS = 1.0
PENALTY_HALF_LIFE = 300.0
MAX_RECONNECT_DELAY = 1.5  # seconds: a returning server is tried again within this


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 0.5
    cap: float = MAX_RECONNECT_DELAY

    def delay(self, failures: int, rng: random.Random) -> float:
        """Delay before retry number `failures` (≥ 1): half of the exponential ceiling fixed,
        half random ("equal jitter"), so it grows yet never collapses to zero."""
        ceiling = min(self.cap, self.base * math.pow(2, min(max(0, failures - 1), 60)))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass(slots=True)
class ServerHealth:
    address: ServerAddress
    latency: float | None = None  # moving average of request round trips, seconds
    requests: int = 0
    errors: int = 0  # overload / internal errors answered by the server
    timeouts: int = 0
    failures: int = 0  # connections that failed to open or were lost
    consecutive_failures: int = 0
    retry_at: float = 0.0  # event-loop time before which we do not reconnect
    _penalty: float = 0.0
    _penalty_at: float = 0.0

    def penalty(self, now: float) -> float:
        return self._penalty * math.pow(0.5, (now - self._penalty_at) / PENALTY_HALF_LIFE)

    def _add_penalty(self, now: float, amount: float = 1.0) -> None:
        self._penalty = self.penalty(now) + amount
        self._penalty_at = now

    def score(self, now: float) -> float:
        latency = UNKNOWN_LATENCY if self.latency is None else self.latency
        return latency + PENALTY_SECONDS * self.penalty(now)

    def available(self, now: float) -> bool:
        return now >= self.retry_at

    def record_latency(self, seconds: float) -> None:
        self.requests += 1
        if self.latency is None:
            self.latency = seconds
        else:
            self.latency += LATENCY_SMOOTHING * (seconds - self.latency)

    def record_connected(self) -> None:
        self.consecutive_failures = 0
        self.retry_at = 0.0

    def record_timeout(self, now: float) -> None:
        self.timeouts += 1
        self._add_penalty(now)

    def record_error(self, now: float) -> None:
        self.errors += 1
        self._add_penalty(now, 0.5)

    def record_failure(self, now: float, backoff: Backoff, rng: random.Random) -> float:
        """A connection failed or was lost; returns the backoff delay now in force."""
        self.failures += 1
        self.consecutive_failures += 1
        self._add_penalty(now)
        delay = backoff.delay(self.consecutive_failures, rng)
        self.retry_at = now + delay
        return delay

    def snapshot(self, now: float) -> dict[str, object]:
        """For logs and status pages."""
        return {
            "server": self.address.url,
            "score": round(self.score(now), 4),
            "latency": None if self.latency is None else round(self.latency, 4),
            "requests": self.requests,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "failures": self.failures,
            "retry_in": round(max(0.0, self.retry_at - now), 3),
        }
