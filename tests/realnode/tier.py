"""What the real-node tier did this run, kept where the summary line can read it.

Under pytest-xdist the tier runs in worker processes and the line is printed by the
controlling process, so the outcome travels as worker output.
"""

from __future__ import annotations

import pytest

OUTCOME = pytest.StashKey[str]()
WORKER_OUTPUT = "realnode_tier"


def ran(config: pytest.Config, versions: str) -> None:
    config.stash[OUTCOME] = f"real-node tier: ran against {versions}"


def skipped(config: pytest.Config, reason: str) -> None:
    config.stash[OUTCOME] = f"real-node tier: skipped (bitcoind/Fulcrum not found: {reason})"
