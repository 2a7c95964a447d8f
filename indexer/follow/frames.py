"""The fetch process's frames: a 4-byte little-endian length, then a pickle."""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

LENGTH = struct.Struct("<I")


def frame(message: Any) -> bytes:
    body = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """The next frame's message; EOFError at the end of input."""
    try:
        size = LENGTH.unpack(await reader.readexactly(LENGTH.size))[0]
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        raise EOFError from None
