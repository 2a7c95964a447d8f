"""CompactSize integers and a bounds-checked byte reader.

Every decoder in `bch` reads through `Reader`, so truncation and non-minimal encodings are
reported the same way everywhere (as `DecodeError`) instead of as stray `struct.error`s.
"""

from __future__ import annotations

import struct

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")

MAX_U64 = (1 << 64) - 1


class DecodeError(ValueError):
    """Raised for any malformed or truncated encoding."""


def compact_size(n: int) -> bytes:
    """Encode `n` as a minimal CompactSize."""
    if n < 0xFD:
        if n < 0:
            raise ValueError(f"CompactSize cannot encode a negative number: {n}")
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + _U16.pack(n)
    if n <= 0xFFFFFFFF:
        return b"\xfe" + _U32.pack(n)
    if n <= MAX_U64:
        return b"\xff" + _U64.pack(n)
    raise ValueError(f"CompactSize cannot encode {n}: above 2^64-1")


def compact_size_len(n: int) -> int:
    """Length in bytes of the minimal CompactSize encoding of `n`."""
    if n < 0xFD:
        return 1
    if n <= 0xFFFF:
        return 3
    if n <= 0xFFFFFFFF:
        return 5
    return 9


def read_compact_size(buf: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a minimal CompactSize at `pos` (reading no further than `end`).

    Returns (value, next position).
    """
    limit = len(buf) if end is None else end
    if pos >= limit:
        raise DecodeError("CompactSize: requires at least one byte")
    first = buf[pos]
    if first < 0xFD:
        return first, pos + 1
    width = 2 if first == 0xFD else 4 if first == 0xFE else 8
    stop = pos + 1 + width
    if stop > limit:
        raise DecodeError(
            f"CompactSize: prefix {first} requires {width + 1} bytes, {limit - pos} remain"
        )
    value = int.from_bytes(buf[pos + 1 : stop], "little")
    if compact_size_len(value) != width + 1:
        raise DecodeError(
            f"CompactSize is not minimally encoded: value {value} in {width + 1} bytes"
        )
    return value, stop


class Reader:
    """Sequential reader over a bytes object; every read is bounds-checked."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        start = self.pos
        if start + n > self.end:
            remain = self.end - start
            raise DecodeError(f"{what}: needs {n} bytes at offset {start}, {remain} remain")
        self.pos = start + n
        return start

    def take(self, n: int, what: str = "bytes") -> bytes:
        start = self._need(n, what)
        return self.buf[start : start + n]

    def u8(self, what: str = "byte") -> int:
        return self.buf[self._need(1, what)]

    def u32(self, what: str = "uint32") -> int:
        return int(_U32.unpack_from(self.buf, self._need(4, what))[0])

    def i32(self, what: str = "int32") -> int:
        return int(_I32.unpack_from(self.buf, self._need(4, what))[0])

    def u64(self, what: str = "uint64") -> int:
        return int(_U64.unpack_from(self.buf, self._need(8, what))[0])

    def compact(self, what: str = "CompactSize") -> int:
        try:
            value, self.pos = read_compact_size(self.buf, self.pos, self.end)
        except DecodeError as exc:
            raise DecodeError(f"{what}: {exc}") from None
        return value

    def var_bytes(self, what: str = "bytes") -> bytes:
        n = self.compact(f"{what} length")
        return self.take(n, what)
