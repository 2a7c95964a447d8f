"""Giving the C heap's free memory back to the operating system.

CPython hands every block over 512 bytes (push bodies, JSON frames, WebSocket buffers) to the C
allocator. glibc returns freed memory to the system only from the top of its heap: what is
freed below a block still in use stays mapped, so a process keeps the resident size of its
peak (a burst of subscriptions, say) long after the objects are gone. `malloc_trim(0)` gives
back every free page of the heap wherever it lies (madvise). Allocators without it (musl,
macOS) return memory their own way; there this is a no-op.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None)  # the symbols the interpreter is linked with, libc among them
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


_TRIM = _malloc_trim()


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; False where the allocator has no such
    call (nothing was done)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
