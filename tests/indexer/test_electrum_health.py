"""Health scores and reconnect backoff: the ordering rules the failover relies on."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from indexer.electrum import Backoff, ServerAddress, ServerHealth
from indexer.electrum.health import PENALTY_HALF_LIFE, UNKNOWN_LATENCY


def health() -> ServerHealth:
    return ServerHealth(ServerAddress.parse("tcp://h:1"))


@given(
    base=st.floats(0.001, 5),
    cap=st.floats(0.001, 100),
    failures=st.integers(1, 10_000),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_jittered_between_half_and_whole_ceiling(
    base: float, cap: float, failures: int, seed: int
) -> None:
    delay = Backoff(base, cap).delay(failures, random.Random(seed))
    ceiling = min(cap, base * 2 ** min(failures - 1, 60))
    assert ceiling / 2 <= delay <= ceiling


def test_backoff_doubles_until_the_cap() -> None:
    rng = random.Random(1)
    backoff = Backoff(base=1.0, cap=8.0)
    lows = [min(backoff.delay(n, rng) for _ in range(200)) for n in range(1, 7)]
    highs = [max(backoff.delay(n, rng) for _ in range(200)) for n in range(1, 7)]
    for n, (low, high) in enumerate(zip(lows, highs, strict=True), 1):
        ceiling = min(8.0, 2.0 ** (n - 1))
        assert ceiling / 2 <= low < ceiling * 0.6  # jitter really spreads the delays
        assert ceiling * 0.9 < high <= ceiling


def test_failures_back_off_and_a_connection_resets() -> None:
    h = health()
    rng = random.Random(7)
    backoff = Backoff(base=1.0, cap=100.0)
    assert h.available(0.0)
    delays = [h.record_failure(10.0, backoff, rng) for _ in range(4)]
    assert [d >= 2 ** (i - 1) for i, d in enumerate(delays)] == [True] * 4
    assert not h.available(10.0 + delays[-1] - 0.001)
    assert h.available(10.0 + delays[-1])
    h.record_connected()
    assert h.available(10.0) and h.consecutive_failures == 0
    assert h.record_failure(20.0, backoff, rng) <= 1.0  # counting starts again


def test_score_latency_and_penalties() -> None:
    fast, slow, flaky, unknown = health(), health(), health(), health()
    fast.record_latency(0.01)
    slow.record_latency(0.2)
    flaky.record_latency(0.01)
    flaky.record_timeout(now=100.0)
    assert unknown.score(100.0) == UNKNOWN_LATENCY
    assert fast.score(100.0) < slow.score(100.0) < unknown.score(100.0) < flaky.score(100.0)
    # a penalty halves every half-life: the flaky server gets another chance later
    assert abs(flaky.penalty(100.0 + PENALTY_HALF_LIFE) - 0.5) < 1e-9
    assert flaky.score(100.0 + 10 * PENALTY_HALF_LIFE) < slow.score(0.0)


def test_latency_is_a_moving_average() -> None:
    h = health()
    for _ in range(50):
        h.record_latency(0.1)
    h.record_latency(1.0)
    assert 0.1 < h.latency < 1.0  # type: ignore[operator]
    for _ in range(50):
        h.record_latency(0.1)
    assert abs(h.latency - 0.1) < 1e-6  # type: ignore[operator]
    assert h.requests == 101
