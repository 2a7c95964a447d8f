"""Compile with mypyc, where there is a C compiler (`make` runs it):

- the kernel packages' `source.py` into their `_compiled…so` (each package uses the result
  when it was made from its source as it is: `bch.compiled`);
- with `--core`, instead, the router's pure core (`router.native.CORE`), whole, into
  `router/_native/` with the digests of every project file it imports (`router.native` uses
  it when they all match).

    .venv/bin/python scripts/compile_kernels.py [--core]

Each is compiled in a temporary directory: a kernel source as a copy named
`<package>._compiled`, with the source's digest appended (`SOURCE_DIGEST`); the core in a copy
of the project's packages. Only the extension modules are copied back. Without a C compiler,
or if mypyc fails, it says so and exits 0: the code then runs interpreted.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bch.compiled import file_digest, source_digest  # noqa: E402  (the repository's, by path)
from router.native import CORE, DIRECTORY, MANIFEST  # noqa: E402

# The kernel packages, each with a `source.py`: `bch`'s output bytes, the router's loops.
PACKAGES = ("bch.kernels", "router.kernels")


def _suffix() -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert isinstance(suffix, str)
    return suffix


def _mypyc(cwd: Path, files: list[str]) -> str | None:
    """Run mypyc on `files` in `cwd`; None when it built them, else why not."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", *files],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"mypyc did not run: {err}"
    if done.returncode != 0:
        return f"mypyc failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return None


def compile_kernels(package: str) -> str | None:
    """Build and install one package's extension module; None when done, else why not."""
    source = importlib.import_module(f"{package}.source")
    relative = Path(*package.split("."))
    installed = ROOT / relative
    target = installed / f"_compiled{_suffix()}"
    with tempfile.TemporaryDirectory(prefix="ladle-kernels-") as tmp:
        where = Path(tmp) / relative
        where.mkdir(parents=True)
        for depth in range(1, len(relative.parts) + 1):  # the packages, empty
            Path(tmp, *relative.parts[:depth], "__init__.py").write_text("")
        text = Path(str(source.__file__)).read_text()
        (where / "_compiled.py").write_text(f'{text}\nSOURCE_DIGEST = "{source_digest(source)}"\n')
        why = _mypyc(Path(tmp), [str(relative / "_compiled.py")])
        if why is not None:
            return why
        # The module and, beside it, the library holding its code (`_compiled__mypyc…`).
        built = sorted(where.glob(f"*{_suffix()}"))
        if where / target.name not in built:
            return "mypyc built no module"
        for made in sorted(built, key=lambda path: path.name == target.name):  # module last
            partial = installed / f"{made.name}.part"
            shutil.copyfile(made, partial)
            partial.replace(installed / made.name)  # (a running process keeps what it loaded)
    return None


# What the core's compile reads: the project's packages (mypy follows their imports).
_PACKAGES = ("bch", "protocols", "runtime", "verify", "indexer", "router")
_IMPORTED = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps([getattr(m, "__file__", None) for m in list(sys.modules.values())]))
"""


def _core_sources() -> list[str]:
    """The project's source files the core imports, run interpreted (paths from `ROOT`)."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *CORE],
        cwd=ROOT,
        env={**os.environ, "LADLE_INTERPRETED": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    files = {Path(file).resolve() for file in json.loads(done.stdout) if file}
    ours = (file.relative_to(ROOT) for file in files if ROOT in file.parents)
    return sorted(str(file) for file in ours if file.parts[0] in _PACKAGES and file.suffix == ".py")


def compile_core() -> str | None:
    """Build the core's extension modules into `router/_native/` with their manifest; None
    when done, else why not."""
    sources = _core_sources()
    digests = {path: file_digest(ROOT / path) for path in sources}
    with tempfile.TemporaryDirectory(prefix="ladle-core-") as tmp:
        for package in _PACKAGES:
            shutil.copytree(
                ROOT / package,
                Path(tmp, package),
                ignore=shutil.ignore_patterns("*.so", "__pycache__", "_native", "*.part"),
            )
        shutil.copyfile(ROOT / "pyproject.toml", Path(tmp, "pyproject.toml"))  # mypy's options
        modules = {name: Path(*name.split(".")).with_suffix(".py") for name in CORE}
        why = _mypyc(Path(tmp), [str(module) for module in modules.values()])
        if why is not None:
            return why
        files = {name: module.with_suffix(_suffix()) for name, module in modules.items()}
        libraries = sorted(Path(tmp).glob(f"*__mypyc{_suffix()}"))  # the code of them all
        if len(libraries) != 1 or not all(Path(tmp, file).is_file() for file in files.values()):
            return "mypyc built other files than expected"
        library = libraries[0].name
        files[library.removesuffix(_suffix())] = Path(library)
        staged = DIRECTORY.with_name(DIRECTORY.name + ".part")
        shutil.rmtree(staged, ignore_errors=True)
        for file in files.values():
            (staged / file).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp, file), staged / file)
        manifest = {"files": {name: str(file) for name, file in files.items()}, "sources": digests}
        (staged / MANIFEST.name).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        # (A running process keeps the libraries it loaded: they are unlinked, not changed.)
        shutil.rmtree(DIRECTORY, ignore_errors=True)
        staged.replace(DIRECTORY)
    return None


def main() -> int:
    if shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        print("compile_kernels: no C compiler: the kernels and the router's core run interpreted")
        return 0
    if "--core" in sys.argv[1:]:
        why = compile_core()
        if why is None:
            print(f"compile_kernels: the router's core built in {DIRECTORY.relative_to(ROOT)}")
        else:
            print(f"compile_kernels: the router's core: {why}\nit runs interpreted")
        return 0
    for package in PACKAGES:
        why = compile_kernels(package)
        if why is not None:
            print(f"compile_kernels: {package}: {why}\n{package} runs interpreted")
            continue
        print(f"compile_kernels: {package.replace('.', '/')}/_compiled{_suffix()} built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
