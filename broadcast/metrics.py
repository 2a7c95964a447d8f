"""The broadcast API's Prometheus metrics (`prometheus_client`, see `runtime.metrics`) and the
ASGI layer that counts requests: by route template, method and status, with their latency; the
best tip heard of from the nodes, and per node whether it is connected and how many blocks it
lags that tip. Served as `GET /metrics`."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Gauge
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runtime.metrics import LazyGauge, exposition, request_metrics

PREFIX = "ladle_broadcast"
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class BroadcastMetrics:
    def __init__(self) -> None:
        self.registry = reg = CollectorRegistry()
        self.requests, self.latency = request_metrics(
            PREFIX, "HTTP requests", ("route", "method", "status"), BUCKETS, reg
        )
        self.best_height = LazyGauge(f"{PREFIX}_best_height", "Best chain tip heard of.", reg)
        self.nodes_connected = LazyGauge(
            f"{PREFIX}_nodes_connected", "Nodes whose tips are heard.", reg
        )

        def per_node(name: str, help_: str) -> Gauge:
            return Gauge(
                f"{PREFIX}_{name}", help_, ("node",), registry=reg, multiprocess_mode="mostrecent"
            )

        self.node_connected = per_node(
            "node_connected", "1 while the node's tip subscription is connected."
        )
        self.node_lag_blocks = per_node(
            "node_lag_blocks", "Blocks the node's tip lags the best tip heard of."
        )

    def render(self) -> bytes:
        return exposition(self.registry)


class RequestMetrics:
    """Counts every HTTP request by its route template (bounded cardinality: never the path)."""

    def __init__(self, app: ASGIApp, metrics: BroadcastMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(route, scope["method"], str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - began)
