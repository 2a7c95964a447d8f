"""The router's per-leg integer loops (`router.kernels.source`), compiled by mypyc where
`make` could (`scripts/compile_kernels.py` writes `router/kernels/_compiled…so`), else run
interpreted: the same source, the same results (`tests/router/test_kernels.py`); compiled,
the predicate takes a fifth of its interpreted instructions and the polish a quarter
(docs/benchmarks.md).

A compiled module is used only when it was made from the source as it is now
(`bch.compiled`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bch import compiled
from router.kernels import source

__all__ = [
    "COMPILED",
    "KEY_SHIFT",
    "buy_cheapest_units",
    "count_above",
    "legs_after",
    "legs_text",
    "lp_fees",
    "made_from_source",
    "predicate_holds",
    "source_digest",
]

COMPILED_MODULE = "router.kernels._compiled"


def source_digest() -> str:
    """The digest of `source.py` as it is on disk, which a compiled module must carry."""
    return compiled.source_digest(source)


def made_from_source(module: object) -> bool:
    """Whether a compiled module was made from `source.py` as it is now."""
    return compiled.made_from_source(module, source)


if TYPE_CHECKING:
    _chosen = source
else:
    _chosen = compiled.compiled_or_source(source, COMPILED_MODULE)

COMPILED = _chosen is not source
KEY_SHIFT = source.KEY_SHIFT
predicate_holds = _chosen.predicate_holds
lp_fees = _chosen.lp_fees
# Interpreted, the polish's native-integer heap is slower than `heapq`'s C on Python integers.
buy_cheapest_units = _chosen.buy_cheapest_units if COMPILED else source.buy_cheapest_units_boxed
legs_after = _chosen.legs_after
# Interpreted, CPython's `%` writes the legs' text faster than this loop: `wire` uses it then.
legs_text = _chosen.legs_text if COMPILED else None
count_above = _chosen.count_above
