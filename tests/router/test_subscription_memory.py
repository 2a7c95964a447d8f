"""Memory comes back when subscriptions close: a small bounded run of
scripts/soak_subscriptions.py against a real router process (its own child, loopback only).

Each cycle 2,000 distinct `tx.subscribe` orders (20 connections × 100) are routed, moved by a
trade, then half unsubscribed and the connections closed. Without the trim of the C heap
(`router.daemon.TRIM_AFTER`, `runtime.heap`) the router kept about 30 MB above its start size
after every cycle; the bounds leave room for the warm-up's lazily built route models.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parents[2] / "scripts" / "soak_subscriptions.py"


def test_resident_memory_returns_after_subscriptions_close() -> None:
    args = ["--cycles", "3", "--warmup", "1", "--connections", "20", "--per-connection", "100"]
    args += ["--pools", "500", "--seconds", "400"]
    args += ["--max-growth-mb", "1000", "--max-above-start-mb", "1000"]  # asserted here
    proc = subprocess.run(
        [sys.executable, str(SOAK), *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(report["cycles"]) == 3, report  # every cycle ran within the time bound
    assert report["growth_after_warmup_mb"] <= 5.0, report
    assert report["max_above_start_mb"] <= 20.0, report
