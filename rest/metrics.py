"""The data API's Prometheus metrics (`prometheus_client`; multi-process mode when
`PROMETHEUS_MULTIPROC_DIR` is set, see `runtime.metrics`): request counts and latencies per
route *template* (bounded cardinality), method and status; cache, rate-limit and candle counts;
the index's height, lag and the best tip heard of.

Counts kept elsewhere as plain integers (the cache's hits, the candle store's rebuilds) are
carried into their counters after each request (`follow`), so that every worker's share is in
the files the exposition sums, whichever worker is scraped. Gauges of the index are set by the
scraped worker (`mostrecent`: all workers read the one index); per-worker sizes are summed over
the live workers.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from runtime.metrics import GaugeMode, LazyGauge, exposition, request_metrics

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
PREFIX = "ladle_rest"

CountSource = Callable[[], int]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry

        def gauge(name: str, help_: str, mode: GaugeMode = "mostrecent") -> LazyGauge:
            return LazyGauge(f"{PREFIX}_{name}", help_, reg, mode)

        def counter(name: str, help_: str) -> Counter:
            return Counter(f"{PREFIX}_{name}", help_, registry=reg)

        self.requests, self.latency = request_metrics(
            PREFIX, "HTTP requests", ("route", "method", "status"), BUCKETS, reg
        )
        self.index_height = gauge("index_height", "Height of the index tip.")
        self.index_tip_time = gauge("index_tip_time", "Header time of the index tip.")
        self.index_lag_seconds = gauge(
            "index_lag_seconds", "Seconds since the index tip's (running max) header time."
        )
        self.chain_height = gauge("chain_height", "Chain tip height, when known.")
        self.best_height = gauge("best_height", "Best chain tip height heard of by the indexer.")
        self.lag_blocks = gauge("lag_blocks", "Blocks the index lags the best tip heard of.")
        self.lag_seconds = gauge(
            "lag_seconds", "Seconds the index has possibly been out of date (see /health)."
        )
        self.servers_connected = gauge(
            "servers_connected", "Electrum servers the indexer hears tips from."
        )
        self.warmed_height = gauge(
            "warmed_height",
            "Index height whose token list and candle series the warmer has prepared.",
            "max",
        )
        self.cache_entries = gauge("cache_entries", "Cached answers.", "livesum")
        self.cache_bytes = gauge("cache_bytes", "Bytes the cached answers may hold.", "livesum")
        self.cache_hits = counter("cache_hits", "Answers served from cache.")
        self.cache_misses = counter("cache_misses", "Answers computed.")
        self.rate_limited = counter("rate_limited", "Requests refused by the rate limit.")
        self.candle_rebuilds = counter(
            "candle_rebuilds", "Hourly candle series built from scratch."
        )
        self._followed: list[tuple[Counter, CountSource, list[int]]] = []
        self._sizes: list[tuple[LazyGauge, CountSource, list[int]]] = []

    def follow(self, counter: Counter, source: CountSource) -> None:
        """Carry the growth of `source()` (a running count kept elsewhere) into `counter`."""
        self._followed.append((counter, source, [0]))

    def follow_size(self, gauge: LazyGauge, source: CountSource) -> None:
        """Keep `gauge` at `source()` (set only when it changed: each set is a file write)."""
        self._sizes.append((gauge, source, [-1]))

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        self.sync()

    def sync(self) -> None:
        for counter, source, seen in self._followed:
            now = source()
            if now > seen[0]:
                counter.inc(now - seen[0])
            seen[0] = now
        for gauge, source, last in self._sizes:
            now = source()
            if now != last[0]:
                gauge.set(now)
                last[0] = now

    def render(self) -> bytes:
        self.sync()
        return exposition(self.registry)
