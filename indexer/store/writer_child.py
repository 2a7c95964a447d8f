"""The indexer's SQLite writer, as a child process (see `indexer.store.writer`).

Run as a script with the isolated interpreter and no `site` (`python -I -S writer_child.py DB`):
it imports the standard library only, so it starts fast. It reads requests from stdin (each a
4-byte little-endian length, a format byte, 0 for `marshal` or 1 for `pickle`, then the body)
and answers on stdout (4-byte length, then a pickle):

- request `(mode, steps)`: `mode` is `"call"` (answer with the result), `"post"` (no answer; the
  first error is kept, and later posts are skipped, until the next `"sync"` or `"commit"`),
  `"sync"` (answer with the kept error, or None), `"commit"` (COMMIT, or ROLLBACK if a post
  failed; answer with the error, or None) or `"close"`; `steps` is a list of tuples run in
  order on one connection (`run_steps`).
- answer `(ok, value, in_transaction)`: `value` is the result, or the exception when not ok.

End of input means the parent is gone (even killed with SIGKILL): the connection is closed
without COMMIT, so an open transaction is rolled back and the database keeps its last commit.
"""

from __future__ import annotations

import sys


def _single_thread_sqlite() -> bool:
    """Tell SQLite, before anything initialises it, that this process has one thread and no
    use for memory statistics: every SQLite call then skips its connection mutex, and every
    allocation the global statistics mutex (~8 % of the writer's instructions in a replayed
    sync). Only possible before the first use of the library, hence before `import sqlite3`;
    where the library cannot be reached this way SQLite keeps its defaults (same results)."""
    try:
        import ctypes  # optional (ImportError below); only this subprocess entry needs it

        lib = ctypes.CDLL("libsqlite3.so.0")
        multithread, memstatus = 2, 9  # SQLITE_CONFIG_MULTITHREAD, SQLITE_CONFIG_MEMSTATUS
        return bool(lib.sqlite3_config(multithread) == 0 and lib.sqlite3_config(memstatus, 0) == 0)
    except (ImportError, OSError, AttributeError):
        return False


if __name__ == "__main__":
    _single_thread_sqlite()

import marshal  # noqa: E402
import pickle  # noqa: E402
import sqlite3  # noqa: E402
import struct  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any, BinaryIO, cast  # noqa: E402

_LEN = struct.Struct("<I")
_REQUEST = struct.Struct("<IB")  # body length, body format
_MARSHAL = 0  # else pickle


def bind_blobs_and_nulls_directly() -> None:
    """Skip the adaptation lookup for `bytes` and None parameters.

    Python 3.11's sqlite3 binds int, float, str and bytearray directly, but sends every other
    parameter (bytes and None included) through its adapter protocol first: it builds a
    (type, protocol) key, misses it in the adapter registry, and looks for `__adapt__` on the
    protocol type, which raises an AttributeError (with a formatted message) that it then
    clears: about half a microsecond per parameter, and a sync binds ~1.5 million blobs and
    NULLs. Registered adapters that return the value itself cut that to a dict hit and a
    C-level call that allocates nothing (`bytes.__bytes__(b) is b`; an empty dict's `get`
    returns None), and bind the same values. Replayed sync: ~20 % fewer writer instructions
    (calling the `bytes` type instead goes through its argument parsing: half of that)."""
    sqlite3.register_adapter(bytes, bytes.__bytes__)
    sqlite3.register_adapter(type(None), cast(Callable[[None], None], {}.get))


def run_steps(db: sqlite3.Connection, steps: list[tuple[Any, ...]]) -> Any:
    """Run `steps`; the result is that of the last `exec` step: (rows, rowcount, lastrowid).

    Steps: `("exec", sql, params)`, `("many", sql, rows, expected_rowcount | None, what)`,
    `("script", sql)`, `("begin",)` (BEGIN IMMEDIATE) and `("need_tx", message)` (fail unless
    a transaction is open: SQLite ends one by itself on some errors, and nothing queued for it
    may then run in autocommit)."""
    result: Any = None
    for step in steps:
        op = step[0]
        if op == "many":
            cursor = db.executemany(step[1], step[2])
            expected = step[3]
            if expected is not None and cursor.rowcount != expected:
                raise RuntimeError(f"{step[4]}: {expected - cursor.rowcount} of {expected} lost")
        elif op == "exec":
            cursor = db.execute(step[1], step[2])
            result = (cursor.fetchall(), cursor.rowcount, cursor.lastrowid)
        elif op == "need_tx":
            if not db.in_transaction:
                raise sqlite3.OperationalError(step[1])
        elif op == "begin":
            db.execute("BEGIN IMMEDIATE")
        elif op == "script":
            db.executescript(step[1])
        else:
            raise ValueError(f"unknown step {op!r}")
    return result


def _read(stream: BinaryIO, n: int) -> bytes | None:
    data = stream.read(n)
    return data if data is not None and len(data) == n else None


def _answer(out: BinaryIO, ok: bool, value: Any, in_tx: bool) -> None:
    try:
        body = pickle.dumps((ok, value, in_tx), pickle.HIGHEST_PROTOCOL)
    except Exception:  # an unpicklable exception: send what it said
        body = pickle.dumps((False, RuntimeError(repr(value)), in_tx), pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(body)) + body)
    out.flush()


def serve(path: str, inp: BinaryIO, out: BinaryIO) -> None:
    bind_blobs_and_nulls_directly()
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    kept: BaseException | None = None
    try:
        while True:
            head = _read(inp, _REQUEST.size)
            if head is None:
                return  # the parent is gone
            size, kind = _REQUEST.unpack(head)
            body = _read(inp, size)
            if body is None:
                return
            mode, steps = marshal.loads(body) if kind == _MARSHAL else pickle.loads(body)
            if mode == "post":
                if kept is None:  # after a failure nothing runs until the parent has heard
                    try:
                        run_steps(db, steps)
                    except Exception as exc:
                        kept = exc
            elif mode == "commit":  # COMMIT if every post since the last sync ran, else undo
                if kept is None:
                    try:
                        db.execute("COMMIT")
                    except Exception as exc:
                        kept = exc
                if kept is not None and db.in_transaction:
                    db.execute("ROLLBACK")
                # A failure stays kept (later posts skipped, later commits refused) until the
                # parent syncs: blocks sent after a lost batch must never commit on their own.
                _answer(out, True, kept, db.in_transaction)
            elif mode == "call":
                try:
                    value = run_steps(db, steps)
                except Exception as exc:
                    _answer(out, False, exc, db.in_transaction)
                else:
                    _answer(out, True, value, db.in_transaction)
            elif mode == "sync":
                _answer(out, True, kept, db.in_transaction)
                kept = None
            else:  # "close"
                return
    finally:
        db.close()  # rolls back whatever was not committed


if __name__ == "__main__":
    serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
