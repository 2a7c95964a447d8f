"""The simulated clock shared by every node of a devnet.

Block timestamps come from here, never from the wall clock, so a scenario can lay down a
90-day history in seconds and a test can pin time exactly.
"""

from __future__ import annotations

import time

DEFAULT_START = 1_735_689_600  # 2025-01-01T00:00:00Z


class SimClock:
    """Seconds since the epoch: a start time, plus manual advances, plus (optionally) the
    wall-clock time elapsed since creation scaled by `rate` (0 = frozen, 1 = real time)."""

    def __init__(self, start: int = DEFAULT_START, *, rate: float = 0.0) -> None:
        if rate < 0:
            raise ValueError("clock rate cannot be negative")
        self._start = start
        self._offset = 0
        self._rate = rate
        self._origin = time.monotonic()

    def now(self) -> int:
        elapsed = (time.monotonic() - self._origin) * self._rate if self._rate else 0.0
        return self._start + self._offset + int(elapsed)

    def advance(self, seconds: int) -> int:
        """Move time forward (never backward: block times must not regress); return now()."""
        if seconds < 0:
            raise ValueError("the clock cannot go backwards")
        self._offset += seconds
        return self.now()

    def set(self, timestamp: int) -> int:
        """Jump to `timestamp` if it is ahead of now; return now()."""
        now = self.now()
        if timestamp > now:
            self._offset += timestamp - now
        return self.now()
