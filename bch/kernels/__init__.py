"""`bch`'s per-output loop (`bch.kernels.source`), compiled by mypyc where `make` could,
else run interpreted: the same source, the same bytes (`tests/bch/test_kernels.py`).
Which build runs: `bch.compiled`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bch.compiled import compiled_or_source
from bch.kernels import source

__all__ = ["COMPILED", "fungible_outputs"]

COMPILED_MODULE = "bch.kernels._compiled"

if TYPE_CHECKING:
    _chosen = source
else:
    _chosen = compiled_or_source(source, COMPILED_MODULE)

COMPILED = _chosen is not source
fungible_outputs = _chosen.fungible_outputs
