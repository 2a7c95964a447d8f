"""Initial-sync progress: height, blocks/s, transactions/s and ETA.

On a terminal one status line is redrawn in place (at most every `every` seconds); otherwise a
structured log record (`event=sync`) is written every `every` seconds, so a log collector sees
the same figures. Rates are measured over a sliding window, so the ETA follows the current
speed rather than the average since start (early blocks are tiny, late ones are not).
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import TextIO

from runtime.logs import fields

log = logging.getLogger("indexer.follow")

WINDOW_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Rates:
    blocks_per_s: float | None  # None until two samples exist
    txs_per_s: float | None
    eta_s: float | None  # None when unknown (no rate yet, or the target is behind us)


def format_duration(seconds: float | None) -> str:
    """Compact duration for the status line: 45s, 3m05s, 2h07m, 3d04h; '?' when unknown."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def _rate(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f}"


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def status_line(height: int, target: int, rates: Rates) -> str:
    pct = 100.0 * height / target if target > 0 else 100.0
    return (
        f"sync: height {height:,}/{target:,} ({min(pct, 100.0):.1f}%)  "
        f"{_rate(rates.blocks_per_s)} blocks/s  {_rate(rates.txs_per_s)} tx/s  "
        f"ETA {format_duration(rates.eta_s)}"
    )


class RateWindow:
    """Cumulative (time, blocks, transactions) samples; rates over the last `window` seconds."""

    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self.window = window
        self._samples: deque[tuple[float, int, int]] = deque()
        self.blocks = 0
        self.txs = 0

    def add(self, now: float, blocks: int, txs: int) -> None:
        self.blocks += blocks
        self.txs += txs
        self._samples.append((now, self.blocks, self.txs))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rates(self, remaining_blocks: int) -> Rates:
        if len(self._samples) < 2:
            return Rates(None, None, None)
        t0, b0, x0 = self._samples[0]
        t1, b1, x1 = self._samples[-1]
        if t1 <= t0:
            return Rates(None, None, None)
        bps = (b1 - b0) / (t1 - t0)
        tps = (x1 - x0) / (t1 - t0)
        eta = remaining_blocks / bps if bps > 0 and remaining_blocks >= 0 else None
        return Rates(bps, tps, eta)


class Progress:
    """Reports a catch-up of more than `min_blocks` blocks (shorter ones are just logged)."""

    def __init__(
        self,
        *,
        stream: TextIO | None = None,
        tty: bool | None = None,
        every: float | None = None,
        min_blocks: int = 10,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every if every is not None else (0.5 if self.tty else 10.0)
        self.min_blocks = min_blocks
        self.clock = clock
        self.window = RateWindow()
        self.active = False
        self.height = -1
        self.target = -1
        self._last_report = 0.0
        self._drawn = False

    def begin(self, height: int, target: int) -> None:
        """A catch-up from `height` (the last applied block) towards `target` starts."""
        self.height, self.target = height, target
        if not self.active and target - height > self.min_blocks:
            self.active = True
            self.window = RateWindow()
            self.window.add(self.clock(), 0, 0)
            self._last_report = self.clock()
            log.info("sync started", extra=fields(event="sync_start", height=height, tip=target))

    def retarget(self, target: int) -> None:
        self.target = max(self.target, target)

    def block(self, height: int, txs: int) -> None:
        self.height = height
        if not self.active:
            return
        now = self.clock()
        self.window.add(now, 1, txs)
        if now - self._last_report >= self.every:
            self._last_report = now
            self._report()

    def rates(self) -> Rates:
        return self.window.rates(self.target - self.height)

    def _report(self) -> None:
        rates = self.rates()
        if self.tty:
            self.stream.write("\r\x1b[K" + status_line(self.height, self.target, rates))
            self.stream.flush()
            self._drawn = True
        else:
            log.info(
                "sync progress",
                extra=fields(
                    event="sync",
                    height=self.height,
                    tip=self.target,
                    blocks_per_s=None
                    if rates.blocks_per_s is None
                    else round(rates.blocks_per_s, 1),
                    txs_per_s=None if rates.txs_per_s is None else round(rates.txs_per_s, 1),
                    eta_s=None if rates.eta_s is None else round(rates.eta_s),
                ),
            )

    def end(self) -> None:
        """The catch-up reached the tip."""
        if not self.active:
            return
        self.active = False
        if self._drawn:
            self._report()
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
        log.info(
            "sync finished",
            extra=fields(
                event="sync_done",
                height=self.height,
                blocks=self.window.blocks,
                txs=self.window.txs,
            ),
        )
