"""The real-node tier: a regtest BCHN with Fulcrum in front, shared by the whole session.

Without the binaries every test here is skipped with the reason, and the terminal summary says
so in one line; with them, it names the versions the tier ran against (see docs/real-nodes.md).
The line itself is printed by tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realnode import tier
from tests.realnode.nodes import RealNodes, find_binaries, real_nodes


@pytest.fixture(scope="session")
def nodes(request: pytest.FixtureRequest) -> Iterator[RealNodes]:
    binaries, reason = find_binaries()
    if binaries is None:
        tier.skipped(request.config, reason)
        pytest.skip(f"real-node tier: bitcoind/Fulcrum not found: {reason}")
    with real_nodes(binaries) as running:
        tier.ran(request.config, running.versions)
        yield running
