"""The real-node tier: a regtest BCHN with Fulcrum in front, shared by the whole session.

Without the binaries every test here is skipped with the reason, and the terminal summary says
so in one line; with them, it names the versions the tier ran against (see docs/real-nodes.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realnode.nodes import RealNodes, find_binaries, real_nodes

_state: dict[str, str] = {}


@pytest.fixture(scope="session")
def nodes() -> Iterator[RealNodes]:
    binaries, reason = find_binaries()
    if binaries is None:
        _state["skipped"] = reason
        pytest.skip(f"real-node tier: bitcoind/Fulcrum not found: {reason}")
    with real_nodes(binaries) as running:
        _state["ran"] = running.versions
        yield running


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "ran" in _state:
        terminalreporter.write_line(f"real-node tier: ran against {_state['ran']}")
    elif "skipped" in _state:
        terminalreporter.write_line(
            f"real-node tier: skipped (bitcoind/Fulcrum not found: {_state['skipped']})"
        )
