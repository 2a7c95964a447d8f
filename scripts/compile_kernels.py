"""Compile `router/kernels/source.py` with mypyc into `router/kernels/_compiled…so` (`make`
runs it; `router.kernels` uses the result when it was made from the source as it is).

    .venv/bin/python scripts/compile_kernels.py

The source is compiled as a copy named `router.kernels._compiled`, with the source's digest
appended (`SOURCE_DIGEST`), in a temporary directory; only the extension module is copied
back. Without a C compiler, or if mypyc fails, it says so and exits 0: the router then runs
the same functions interpreted.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from router.kernels import source, source_digest  # noqa: E402  (the repository's, by path)

PACKAGE = ROOT / "router" / "kernels"


def _suffix() -> str:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert isinstance(suffix, str)
    return suffix


def compile_kernels() -> str | None:
    """Build and install the extension module; None when done, else why not."""
    target = PACKAGE / f"_compiled{_suffix()}"
    with tempfile.TemporaryDirectory(prefix="ladle-kernels-") as tmp:
        where = Path(tmp) / "router" / "kernels"
        where.mkdir(parents=True)
        (where.parent / "__init__.py").write_text("")
        (where / "__init__.py").write_text("")
        text = Path(source.__file__).read_text()
        (where / "_compiled.py").write_text(f'{text}\nSOURCE_DIGEST = "{source_digest()}"\n')
        try:
            done = subprocess.run(
                [sys.executable, "-m", "mypyc", "router/kernels/_compiled.py"],
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
            partial = PACKAGE / f"{made.name}.part"
            shutil.copyfile(made, partial)
            partial.replace(PACKAGE / made.name)  # (a running router keeps what it loaded)
    return None


def main() -> int:
    if shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]) is None:
        print("compile_kernels: no C compiler: the router runs its kernels interpreted")
        return 0
    why = compile_kernels()
    if why is not None:
        print(f"compile_kernels: {why}\nthe router runs its kernels interpreted")
        return 0
    print(f"compile_kernels: router/kernels/_compiled{_suffix()} built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
