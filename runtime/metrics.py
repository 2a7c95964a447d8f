"""Prometheus metrics of every component (`prometheus_client`), one way for all of them.

Each component keeps its metric objects in a registry of its own (several apps may live in one
test process). With `PROMETHEUS_MULTIPROC_DIR` set in the environment before the process
starts (`ladle up` and `ladle rest --workers N` set it for their workers), prometheus_client
keeps every value in files of that directory, and `exposition()` answers with the values of
all the processes writing there, merged by `MultiProcessCollector` (counters and histograms
summed; each gauge as its `multiprocess_mode` says). Without it, the component's own registry.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from typing import Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

__all__ = [
    "CONTENT_TYPE",
    "MULTIPROC_ENV",
    "GaugeMode",
    "LazyGauge",
    "exposition",
    "multiprocess_dir",
    "request_metrics",
    "worker_exited",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
GaugeMode = Literal[
    "all",
    "liveall",
    "min",
    "livemin",
    "max",
    "livemax",
    "sum",
    "livesum",
    "mostrecent",
    "livemostrecent",
]
CONTENT_TYPE = CONTENT_TYPE_LATEST

# `*_created` samples (a timestamp per series) double the exposition and mean nothing across
# worker processes.
disable_created_metrics()  # type: ignore[no-untyped-call]


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def exposition(registry: CollectorRegistry) -> bytes:
    """The text exposition: every process's values in multi-process mode, else `registry`'s."""
    directory = multiprocess_dir()
    if directory is None:
        return generate_latest(registry)
    merged = CollectorRegistry()
    merged.register(_WrittenFiles(directory))
    return generate_latest(merged)


class _WrittenFiles:
    """`MultiProcessCollector` over the processes' files that hold something. A worker creates
    its file for a kind of metric empty, then sizes it: read in between, it cannot be parsed,
    and a scrape at that moment failed. An empty file holds no sample yet."""

    def __init__(self, directory: str) -> None:
        self._directory = directory

    def collect(self) -> Iterable[Metric]:
        files = glob.glob(os.path.join(self._directory, "*.db"))
        written = [f for f in files if _size(f) > 0]
        return MultiProcessCollector.merge(written, accumulate=True)  # type: ignore[no-any-return, no-untyped-call]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:  # a dead worker's file, removed since the listing
        return 0


def worker_exited(pid: int) -> None:
    """What a supervisor calls when a worker process ended: its `live*` gauges leave the sums
    (counters and histograms keep its counts, as Prometheus expects of counters)."""
    directory = multiprocess_dir()
    if directory is not None:
        mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def request_metrics(
    prefix: str,
    what: str,
    labels: Sequence[str],
    buckets: Sequence[float],
    registry: CollectorRegistry,
) -> tuple[Counter, Histogram]:
    """`<prefix>_requests_total` by `labels` and `<prefix>_request_duration_seconds` by the
    first of them (a histogram): what every component counts of the requests it answers."""
    requests = Counter(
        f"{prefix}_requests", f"{what} answered, by {', '.join(labels)}.", labels, registry=registry
    )
    latency = Histogram(
        f"{prefix}_request_duration_seconds",
        f"Time to answer, by {labels[0]}.",
        labels[:1],
        buckets=buckets,
        registry=registry,
    )
    return requests, latency


class LazyGauge:
    """A gauge absent from the exposition until its value is known (a Gauge is exposed as 0
    from its creation): it is created at the first `set`; `set(None)` leaves it as it is."""

    __slots__ = ("_gauge", "documentation", "mode", "name", "registry")

    def __init__(
        self,
        name: str,
        documentation: str,
        registry: CollectorRegistry,
        mode: GaugeMode = "mostrecent",
    ) -> None:
        self.name, self.documentation, self.registry, self.mode = (
            name,
            documentation,
            registry,
            mode,
        )
        self._gauge: Gauge | None = None

    def set(self, value: float | None) -> None:
        if value is None:
            return
        if self._gauge is None:
            self._gauge = Gauge(
                self.name, self.documentation, registry=self.registry, multiprocess_mode=self.mode
            )
        self._gauge.set(value)
