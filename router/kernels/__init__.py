"""The router's per-leg integer loops (`router.kernels.source`), compiled by mypyc where
`make` could (`scripts/compile_kernels.py` writes `router/kernels/_compiled…so`), else run
interpreted: the same source, the same results (`tests/router/test_kernels.py`); compiled,
the predicate takes a fifth of its interpreted instructions and the polish about 0.7
(docs/benchmarks.md).

A compiled module is used only when it was made from the source as it is now: the build
puts the source's digest in it (`SOURCE_DIGEST`), so an edit of `source.py` not yet
compiled runs interpreted rather than as the code it replaced."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from router.kernels import source

__all__ = [
    "COMPILED",
    "KEY_SHIFT",
    "buy_cheapest_units",
    "count_above",
    "legs_after",
    "lp_fees",
    "made_from_source",
    "predicate_holds",
    "source_digest",
]

COMPILED_MODULE = "router.kernels._compiled"


def source_digest() -> str:
    """The digest of `source.py` as it is on disk, which a compiled module must carry."""
    return hashlib.sha256(Path(source.__file__).read_bytes()).hexdigest()


def made_from_source(module: object) -> bool:
    """Whether a compiled module was made from `source.py` as it is now."""
    return getattr(module, "SOURCE_DIGEST", None) == source_digest()


def _compiled() -> ModuleType | None:
    try:
        module = importlib.import_module(COMPILED_MODULE)
    except ImportError:  # not compiled here (no C compiler, or `pip install` without make)
        return None
    return module if made_from_source(module) else None


if TYPE_CHECKING:
    _chosen = source
else:
    _chosen = _compiled() or source

COMPILED = _chosen is not source
KEY_SHIFT = source.KEY_SHIFT
predicate_holds = _chosen.predicate_holds
lp_fees = _chosen.lp_fees
buy_cheapest_units = _chosen.buy_cheapest_units
legs_after = _chosen.legs_after
count_above = _chosen.count_above
