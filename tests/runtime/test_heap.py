"""`runtime.heap`: large blocks freed by one request are reused by the next, not mapped anew."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# Four 1 MiB blocks live at once, then freed: glibc's own thresholds (the largest block freed,
# twice that at the top of the heap) give them back to the system, and the next round faults
# every page in again. Run in a child so the thresholds of this process are left alone.
_CHURN = """
import json, resource, sys
from runtime.heap import keep_freed_pages
kept = keep_freed_pages() if sys.argv[1] == "keep" else None
def churn():
    blocks = [b"x" * (1 << 20) for _ in range(4)]  # every page written
    del blocks
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    churn()
print(json.dumps([kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before]))
"""
_PAGES = 20 * 4 * (1 << 20) // 4096  # the pages the 20 rounds write


def _churn(mode: str) -> tuple[bool | None, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _CHURN, mode], env=env, capture_output=True, check=True, text=True
    ).stdout
    kept, faults = json.loads(out)
    return kept, faults


def test_kept_pages_are_reused_instead_of_faulted_in_again() -> None:
    kept, faults = _churn("keep")
    if not kept:
        pytest.skip("this C library has no mallopt (not glibc): nothing to keep")
    _, faults_by_default = _churn("default")
    assert faults_by_default > _PAGES // 2  # the churn does exercise glibc's giving back
    assert faults < _PAGES // 20
