"""The router's Prometheus metrics (`prometheus_client`, see `runtime.metrics`): requests by
method and outcome (`ok` or the error code) with their latency, connections, subscriptions, the
snapshot's height, the best tip heard of and the lag, and whether the router refuses as stale.
Served as `GET /metrics` on the WebSocket port (`router.health`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from indexer.freshness import Lag
from runtime.metrics import LazyGauge, exposition, request_metrics

PREFIX = "ladle_router"
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class RouterMetrics:
    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()
        self.requests, self.latency = request_metrics(
            PREFIX, "JSON-RPC requests", ("method", "outcome"), BUCKETS, reg
        )
        self.connections = LazyGauge(f"{PREFIX}_connections", "Open WebSocket connections.", reg)
        self.subscriptions = LazyGauge(f"{PREFIX}_subscriptions", "Live subscriptions.", reg)
        self.snapshot_height = LazyGauge(
            f"{PREFIX}_snapshot_height", "Confirmed height of the pool snapshot.", reg
        )
        self.best_height = LazyGauge(f"{PREFIX}_best_height", "Best chain tip heard of.", reg)
        self.lag_blocks = LazyGauge(f"{PREFIX}_lag_blocks", "Blocks the snapshot lags.", reg)
        self.lag_seconds = LazyGauge(
            f"{PREFIX}_lag_seconds", "Seconds the snapshot has possibly been out of date.", reg
        )
        self.servers_connected = LazyGauge(
            f"{PREFIX}_servers_connected", "Electrum servers the tips are heard from.", reg
        )
        self.stale = LazyGauge(
            f"{PREFIX}_stale", "1 while quotes and builds are refused as stale_snapshot.", reg
        )
        self._children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}

    def observe(self, method: str, outcome: str, seconds: float) -> None:
        # The labelled children are looked up once per (method, outcome), not per request: the
        # daemon answers a ping in tens of microseconds.
        key = (method, outcome)
        pair = self._children.get(key)
        if pair is None:
            pair = self._children[key] = (
                self.requests.labels(method, outcome),
                self.latency.labels(method),
            )
        pair[0].inc()
        pair[1].observe(seconds)

    def render(
        self,
        *,
        connections: int,
        subscriptions: int,
        height: int | None,
        lag: Lag | None,
        stale: bool,
    ) -> bytes:
        self.connections.set(connections)
        self.subscriptions.set(subscriptions)
        self.snapshot_height.set(height)
        if lag is not None:
            self.best_height.set(lag.best_height)
            self.lag_blocks.set(lag.lag_blocks)
            self.lag_seconds.set(lag.lag_seconds)
            self.servers_connected.set(lag.connected)
            self.stale.set(int(stale))
        return exposition(self.registry)
