"""`runtime.metrics`: the multi-process exposition."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from runtime.metrics import MULTIPROC_ENV, exposition


def test_a_worker_file_not_yet_sized_does_not_fail_a_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker creates its file for a kind of metric empty, then sizes it: a scrape in
    between is answered from the other files."""
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    (tmp_path / "counter_4242.db").touch()
    assert exposition(CollectorRegistry()) == b""
