"""Shared test fixtures (where the official vectors live, whether a C compiler is), and the
real-node tier's summary line when pytest-xdist runs the suite (`make test`: a worker per core,
each file in one)."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.realnode import tier

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LADLE_SHARED", ROOT.parent / "shared"))
VECTORS = SHARED / "vectors"


def load_vectors(name: str) -> Any:
    """Load a vector file from ../shared/vectors (relative path, e.g. 'vmb/x.json')."""
    with (VECTORS / name).open() as fh:
        return json.load(fh)


def c_compiler() -> str | None:
    """The C compiler `make` would compile the kernels with (`scripts/compile_kernels.py`)."""
    return shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0])


def pytest_sessionfinish(session: pytest.Session) -> None:
    outcome = session.config.stash.get(tier.OUTCOME, None)
    output = getattr(session.config, "workeroutput", None)  # set in an xdist worker only
    if outcome is not None and output is not None:
        output[tier.WORKER_OUTPUT] = outcome


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller hears a worker stop: keep its real-node outcome for the summary."""
    outcome = node.workeroutput.get(tier.WORKER_OUTPUT)
    if outcome is not None:
        node.config.stash[tier.OUTCOME] = outcome


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    outcome = terminalreporter.config.stash.get(tier.OUTCOME, None)
    if outcome is not None:
        terminalreporter.write_line(outcome)
