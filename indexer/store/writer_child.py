"""The indexer's SQLite writer, as a child process (see `indexer.store.writer`).

Run as a script with the isolated interpreter and no `site` (`python -I -S writer_child.py DB`):
it imports the standard library only, so it starts fast. It reads requests from stdin
and answers on stdout, one frame each (4-byte little-endian length, then a pickle):

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

import pickle
import sqlite3
import struct
import sys
from typing import Any, BinaryIO

_LEN = struct.Struct("<I")


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
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    kept: BaseException | None = None
    try:
        while True:
            head = _read(inp, 4)
            if head is None:
                return  # the parent is gone
            body = _read(inp, _LEN.unpack(head)[0])
            if body is None:
                return
            mode, steps = pickle.loads(body)
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
