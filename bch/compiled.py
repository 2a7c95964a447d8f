"""Which build of a kernel module runs: the one mypyc compiled from its source (`make`,
`scripts/compile_kernels.py`), or the source itself.

A kernel package holds `source.py`, plain typed loops importing nothing from the project;
the compile step writes the package's `_compiled` extension with the source's digest in it
(`SOURCE_DIGEST`). The compiled module is used only when that digest is the source's as it
is on disk, so an edit of `source.py` not yet compiled runs interpreted rather than as the
code it replaced. (`bch.kernels`, `router.kernels`.)"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType


def file_digest(path: Path) -> str:
    """The digest of a file as it is on disk (a source a compiled build was made from)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_digest(source: ModuleType) -> str:
    """The digest of a kernel's source file as it is on disk."""
    assert source.__file__ is not None  # a module loaded from a file
    return file_digest(Path(source.__file__))


def made_from_source(module: object, source: ModuleType) -> bool:
    """Whether a compiled module was made from `source` as it is now."""
    return getattr(module, "SOURCE_DIGEST", None) == source_digest(source)


def compiled_or_source(source: ModuleType, compiled_name: str) -> ModuleType:
    """The module `compiled_name` when it exists and was made from `source`, else `source`."""
    try:
        module = importlib.import_module(compiled_name)
    except ImportError:  # not compiled here (no C compiler, or `pip install` without make)
        return source
    return module if made_from_source(module, source) else source
