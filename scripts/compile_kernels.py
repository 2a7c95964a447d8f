"""Compile the kernel packages' `source.py` with mypyc into their `_compiled…so` (`make`
runs it; each package uses the result when it was made from its source as it is:
`bch.compiled`).

    .venv/bin/python scripts/compile_kernels.py

Each source is compiled as a copy named `<package>._compiled`, with the source's digest
appended (`SOURCE_DIGEST`), in a temporary directory; only the extension modules are copied
back. Without a C compiler, or if mypyc fails, it says so and exits 0: the package then runs
the same functions interpreted.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bch.compiled import source_digest  # noqa: E402  (the repository's, by path)

# The kernel packages, each with a `source.py`: `bch`'s output bytes, the router's loops.
PACKAGES = ("bch.kernels", "router.kernels")


def _suffix() -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert isinstance(suffix, str)
    return suffix


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
        try:
            done = subprocess.run(
                [sys.executable, "-m", "mypyc", str(relative / "_compiled.py")],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"mypyc did not run: {err}"
        # The module and, beside it, the library holding its code (`_compiled__mypyc…`).
        built = sorted(where.glob(f"*{_suffix()}"))
        if done.returncode != 0 or where / target.name not in built:
            return f"mypyc failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        for made in sorted(built, key=lambda path: path.name == target.name):  # module last
            partial = installed / f"{made.name}.part"
            shutil.copyfile(made, partial)
            partial.replace(installed / made.name)  # (a running process keeps what it loaded)
    return None


def main() -> int:
    if shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        print("compile_kernels: no C compiler: the kernels run interpreted")
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
