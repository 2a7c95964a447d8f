"""The router's pure core compiled whole by mypyc, used only when it was made from the source
as it is now.

`scripts/compile_kernels.py` (which `make` runs) compiles the modules of `CORE` as one group
into `router/_native/`, beside a manifest of the digests of every project file they import.
`install()`, which `router/__init__.py` calls before any of them is imported, then puts a finder
in front of the import system that loads those modules from there: only if every digest is the
file's as it is on disk, so an edit not yet compiled runs interpreted rather than as the code
it replaced. (The extension modules are kept out of the source directories for that reason:
Python prefers an extension module to the source beside it.) `LADLE_INTERPRETED=1` runs the
source throughout. Compiled, a `tx.build` of one to a hundred pools counts about 30 % fewer
instructions, one of 352 pools about 7 % fewer: its per-leg work is already CPython's and
numpy's C, and the kernels' (docs/benchmarks.md, router). The results are the same either
way: `make test` runs the suite compiled, then the router's tests interpreted."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

from bch.compiled import file_digest

__all__ = ["CORE", "DIRECTORY", "MANIFEST", "active", "install", "manifest_matches"]

# The modules compiled together: every call between them is a C call.
CORE = (
    "router.txsize",
    "router.hop",
    "router.solve.model",
    "router.solve.continuous",
    "router.solve.integer",
    "router.route",
    "router.quotes",
    "router.params",
    "router.build",
    "router.gate",
    "router.wire",
)
DIRECTORY = Path(__file__).resolve().parent / "_native"
MANIFEST = DIRECTORY / "manifest.json"
_ROOT = DIRECTORY.parent.parent  # the directory holding the project's packages
_OFF = "LADLE_INTERPRETED"


class _Finder(MetaPathFinder):
    """Finds the compiled modules (and the library holding their code) in `DIRECTORY`."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = dict(files)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(fullname, file)


def manifest_matches(manifest: Mapping[str, object], root: Path = _ROOT) -> bool:
    """Whether every source file the manifest names (path relative to `root`: digest) is as
    it was compiled, and every module of `CORE` is in it."""
    sources = manifest.get("sources")
    files = manifest.get("files")
    if not isinstance(sources, dict) or not isinstance(files, dict):
        return False
    if not set(CORE) <= files.keys():
        return False
    for relative, digest in sources.items():
        try:
            if file_digest(root / relative) != digest:
                return False
        except OSError:  # moved or deleted since
            return False
    return True


def install() -> bool:
    """Put the compiled core's finder first in `sys.meta_path` when it exists, matches the
    source and `LADLE_INTERPRETED` is not set; True when it did (or had already). Called before
    any module of `CORE` is imported: the group runs all compiled or all interpreted."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return True
    if os.environ.get(_OFF, "") not in ("", "0") or any(name in sys.modules for name in CORE):
        return False
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):  # not compiled here (no C compiler, or no `make`)
        return False
    if not isinstance(manifest, dict) or not manifest_matches(manifest):
        return False
    files = {name: DIRECTORY / file for name, file in manifest["files"].items()}
    sys.meta_path.insert(0, _Finder(files))
    return True


def active() -> bool:
    """Whether the core runs compiled in this process (its modules come from `DIRECTORY`)."""
    file = getattr(sys.modules.get(CORE[-1]), "__file__", None)
    return file is not None and DIRECTORY in Path(file).parents
