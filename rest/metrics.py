"""Prometheus text exposition (format 0.0.4) of request counts and latencies per route, without
a client library: counters and one histogram, labelled by the route *template* (bounded
cardinality), method and status."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
PREFIX = "ladle_rest"


class _Histogram:
    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency: dict[str, _Histogram] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        hist = self.latency.get(route)
        if hist is None:
            hist = self.latency[route] = _Histogram()
        hist.observe(seconds)

    def render(self, extra: Iterable[tuple[str, str, str, float | None]] = ()) -> str:
        """The exposition text; `extra` adds (name, type, help, value) samples: gauges and
        counters kept elsewhere (None: omitted)."""
        out = [
            f"# HELP {PREFIX}_requests_total HTTP requests answered, by route template.",
            f"# TYPE {PREFIX}_requests_total counter",
        ]
        for (route, method, status), n in sorted(self.requests.items()):
            out.append(
                f'{PREFIX}_requests_total{{route="{_esc(route)}",method="{method}",'
                f'status="{status}"}} {n}'
            )
        name = f"{PREFIX}_request_duration_seconds"
        out += [
            f"# HELP {name} Time to answer, by route template.",
            f"# TYPE {name} histogram",
        ]
        for route, h in sorted(self.latency.items()):
            label = f'route="{_esc(route)}"'
            running = 0
            for bound, n in zip((*BUCKETS, float("inf")), h.counts, strict=True):
                running += n
                le = "+Inf" if bound == float("inf") else repr(bound)
                out.append(f'{name}_bucket{{{label},le="{le}"}} {running}')
            out.append(f"{name}_sum{{{label}}} {h.total!r}")
            out.append(f"{name}_count{{{label}}} {h.count}")
        for gname, kind, help_, value in extra:
            if value is None:
                continue
            out += [
                f"# HELP {PREFIX}_{gname} {help_}",
                f"# TYPE {PREFIX}_{gname} {kind}",
                f"{PREFIX}_{gname} {_num(value)}",
            ]
        return "\n".join(out) + "\n"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
