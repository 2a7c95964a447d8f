"""The writer process binds parameters and configures SQLite for speed without changing what
is stored: every value it writes reads back as stock `sqlite3` writes it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

from indexer.store.writer import Step, Writer, _frame

CHILD = Path(__file__).resolve().parents[3] / "indexer" / "store" / "writer_child.py"

SCHEMA = "CREATE TABLE t (k INTEGER PRIMARY KEY, a, b BLOB NOT NULL, c TEXT, d) WITHOUT ROWID"
INSERT = "INSERT INTO t VALUES (?, ?, ?, ?, ?)"

# Every kind of value the decoders send, and the edges of each: blobs of 0, 1, 20, 32 and
# 80 bytes (with zero bytes inside), NULLs in every nullable column, 64-bit integer limits,
# text, floats, and a bytearray (bound directly by stock sqlite3 too).
ROWS: list[tuple[object, ...]] = [
    (1, None, b"", None, None),
    (2, b"\x00", b"\x00" * 32, "buy", 0),
    (3, 2**63 - 1, bytes(range(20)), "", -(2**63)),
    (4, 1.5, bytes(range(80)), "withdraw", None),
    (5, bytearray(b"\x01\x02"), b"\xff" * 32, None, b"\x00\x00"),
    (6, None, b"x", None, None),
]


def stored(path: Path) -> list[tuple[object, ...]]:
    """Each value with its SQLite storage class, as a plain connection reads them."""
    with sqlite3.connect(path) as db:
        return list(
            db.execute(
                "SELECT k, a, typeof(a), b, typeof(b), c, typeof(c), d, typeof(d) FROM t ORDER BY k"
            )
        )


async def test_the_writer_process_stores_what_stock_sqlite3_stores(tmp_path: Path) -> None:
    expected_path = tmp_path / "stock.sqlite"
    with sqlite3.connect(expected_path) as db:  # this process: no adapters registered
        db.execute(SCHEMA)
        db.executemany(INSERT, ROWS[:3])
        db.execute(INSERT, ROWS[3])
        db.executemany(INSERT, ROWS[4:])
    conn = await Writer(tmp_path / "w.sqlite")
    try:
        await conn.execute(SCHEMA)
        conn.submit([("begin",), ("many", INSERT, ROWS[:3], None, "")])
        conn.submit([("exec", INSERT, ROWS[3]), ("many", INSERT, ROWS[4:], None, "")])
        await conn.collect()
        assert await conn.commit_queued() is None
        # Read back through the child too: blobs come back as bytes, NULLs as None.
        back = list(await conn.execute_fetchall("SELECT * FROM t ORDER BY k"))
    finally:
        await conn.close()
    assert stored(tmp_path / "w.sqlite") == stored(expected_path)
    assert [tuple(r) for r in back] == [
        tuple(bytes(v) if isinstance(v, bytearray) else v for v in row) for row in ROWS
    ]


async def test_requests_marshal_cannot_hold_go_as_pickles(tmp_path: Path) -> None:
    """Named parameters in a dict subclass (not marshal's exact types) still reach SQLite."""
    conn = await Writer(tmp_path / "w.sqlite")
    try:
        await conn.execute("CREATE TABLE t (a, b)")
        await conn.execute("INSERT INTO t VALUES (:a, :b)", OrderedDict(a=b"\x00\x01", b=7))
        back = list(await conn.execute_fetchall("SELECT a, b FROM t"))
    finally:
        await conn.close()
    assert [tuple(r) for r in back] == [(b"\x00\x01", 7)]


def run_python(code: str) -> str:
    """Run `code` in a fresh isolated interpreter, as the writer process runs."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.strip()


def test_the_writer_process_configures_sqlite_before_its_first_use(tmp_path: Path) -> None:
    """The child run as the writer runs it (`__main__`, framed requests on stdin): SQLite
    accepted the single-thread configuration (memory statistics off: it counts nothing
    although it allocated), the requests ran, and a later attempt is refused and reported."""
    requests: list[tuple[str, list[Step]]] = [
        ("call", [("exec", "CREATE TABLE t (x)", ())]),
        ("post", [("begin",), ("many", "INSERT INTO t VALUES (?)", [(b"a",), (None,)], None, "")]),
        ("post", [("exec", "INSERT INTO t VALUES (:x)", OrderedDict(x=3))]),  # pickled
        ("commit", []),
        ("call", [("exec", "SELECT count(*), typeof(min(x)) FROM t", ())]),
        ("close", []),
    ]
    stdin = tmp_path / "requests"
    stdin.write_bytes(b"".join(_frame(r) for r in requests))
    out = run_python(
        f"""
        import ctypes, io, pickle, runpy, struct, sys
        answers = io.BytesIO()
        sys.stdin = io.TextIOWrapper(open({str(stdin)!r}, "rb"))
        sys.stdout = io.TextIOWrapper(answers)
        sys.argv = ["writer_child.py", {str(tmp_path / "c.sqlite")!r}]
        child = runpy.run_path({str(CHILD)!r}, run_name="__main__")
        sys.stdout.flush()
        data, pos, results = answers.getvalue(), 0, []
        while pos < len(data):
            n = struct.unpack_from("<I", data, pos)[0]
            results.append(pickle.loads(data[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        print(results[-1][1][0], lib.sqlite3_memory_used(), child["_single_thread_sqlite"](),
              file=sys.__stdout__)
        """
    )
    assert out == "[(3, 'integer')] 0 False"


def test_stock_sqlite_counts_memory_so_the_check_above_can_fail() -> None:
    out = run_python(
        """
        import ctypes, sqlite3
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE t (x)")
        print(lib.sqlite3_memory_used() > 0)
        """
    )
    assert out == "True"
