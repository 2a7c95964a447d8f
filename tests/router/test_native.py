"""The router's core compiled whole (`router.native`): used where `make` built it from the
source as it is, never otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import router.wire
from bch.compiled import file_digest
from router import native
from tests.conftest import c_compiler

ROOT = Path(__file__).resolve().parents[2]


def _interpreted_asked() -> bool:
    return os.environ.get("LADLE_INTERPRETED", "") not in ("", "0")


def test_the_core_runs_compiled_where_a_compiler_is() -> None:
    if _interpreted_asked():
        assert not native.active()
        assert router.wire.__file__ == str(ROOT / "router" / "wire.py")
        return
    if c_compiler() is None:
        pytest.skip("no C compiler on this machine: the router's core runs interpreted")
    assert native.active(), "run `make` (scripts/compile_kernels.py --core) to compile it"
    assert Path(router.wire.__file__).is_relative_to(native.DIRECTORY)


def _probe(env: dict[str, str]) -> bool:
    """`native.active()` in a new interpreter that imports the router, with `env` added."""
    done = subprocess.run(
        [sys.executable, "-c", "import router.wire, router.native as n; print(n.active())"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip() == "True"


def _built_here() -> bool:
    """Whether `make` compiled the core from the source as it is."""
    if not native.MANIFEST.exists():
        return False
    return native.manifest_matches(json.loads(native.MANIFEST.read_text()))


def test_ladle_interpreted_runs_the_source() -> None:
    assert not _probe({"LADLE_INTERPRETED": "1"})
    if _built_here():
        assert _probe({"LADLE_INTERPRETED": ""})


def _project(tmp_path: Path) -> dict[str, object]:
    """A manifest of two files written under `tmp_path`, naming every module of the core."""
    sources = {}
    for name, text in (("a.py", "A = 1\n"), ("pkg/b.py", "B = 2\n")):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        sources[name] = file_digest(path)
    return {"files": {name: f"{name}.so" for name in native.CORE}, "sources": sources}


def test_a_build_from_other_sources_is_not_used(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    assert native.manifest_matches(manifest, tmp_path)
    (tmp_path / "pkg" / "b.py").write_text("B = 3\n")  # edited since it was compiled
    assert not native.manifest_matches(manifest, tmp_path)


def test_a_build_missing_a_file_or_a_module_is_not_used(tmp_path: Path) -> None:
    manifest = _project(tmp_path)
    (tmp_path / "a.py").unlink()
    assert not native.manifest_matches(manifest, tmp_path)
    manifest = _project(tmp_path)
    files = manifest["files"]
    assert isinstance(files, dict)
    del files[native.CORE[0]]
    assert not native.manifest_matches(manifest, tmp_path)
    assert not native.manifest_matches({"files": files}, tmp_path)
    assert not native.manifest_matches({}, tmp_path)


def test_the_manifest_covers_what_the_core_imports() -> None:
    if not _built_here():
        pytest.skip("the router's core is not compiled here from this source")
    sources = json.loads(native.MANIFEST.read_text())["sources"]
    for name in native.CORE:
        assert f"{name.replace('.', '/')}.py" in sources
    assert {"router/native.py", "bch/tx.py", "protocols/cauldron/formulas.py"} <= sources.keys()
