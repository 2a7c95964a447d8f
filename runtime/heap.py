"""The C heap: keeping freed pages for reuse while serving, giving them back when idle.

CPython hands every block over 512 bytes (push bodies, JSON frames, WebSocket buffers) to the C
allocator. glibc returns freed memory to the system only from the top of its heap: what is
freed below a block still in use stays mapped, so a process keeps the resident size of its
peak (a burst of subscriptions, say) long after the objects are gone. `malloc_trim(0)` gives
back every free page of the heap wherever it lies (madvise). Allocators without it (musl,
macOS) return memory their own way; there this is a no-op.

The opposite matters on the hot path. glibc serves a block of more than its mmap threshold
(128 KiB at first, then the largest block freed) with a fresh mapping, and gives the top of its
heap back on free once more than twice that is free there. A `tx.build` reply over hundreds of
pools is a few such blocks (transaction, hex, legs, the document: ~350 kB at 352 pools), so
with glibc's own thresholds every build maps its pages anew: ~165 page faults, a third of the
in-process build time on this kind of VM (docs/benchmarks.md). `keep_freed_pages` fixes both
thresholds, so freed blocks are reused; `release_free_heap` still returns them when the process
decides it is idle.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable


def _libc_call(name: str, *argtypes: type[ctypes._SimpleCData[int]]) -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None)  # the symbols the interpreter is linked with, libc among them
    except OSError:
        return None
    call = getattr(libc, name, None)
    if call is None:
        return None
    call.argtypes = list(argtypes)
    call.restype = ctypes.c_int
    return call  # type: ignore[no-any-return]


_TRIM = _libc_call("malloc_trim", ctypes.c_size_t)
_MALLOPT = _libc_call("mallopt", ctypes.c_int, ctypes.c_int)
# glibc's <malloc.h> parameter numbers
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks below this come from the heap, where freed ones are reused: far above any reply
# (a transaction at the 100 kB standard limit and its JSON are ~1 MB).
MMAP_THRESHOLD = 16 << 20
# Free memory at the heap's top kept mapped, up to this much (the process's own trims aside).
TRIM_THRESHOLD = 32 << 20


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; False where the allocator has no such
    call (nothing was done)."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True


def keep_freed_pages() -> bool:
    """Fix the C allocator's thresholds (`MMAP_THRESHOLD`, `TRIM_THRESHOLD`) so large blocks
    freed by one request are reused by the next instead of being unmapped and faulted in
    again; for a long-running server process. False where there is no `mallopt` (nothing
    was changed) or glibc refused a value."""
    if _MALLOPT is None:
        return False
    # mallopt answers 1 on success, 0 on error
    return bool(_MALLOPT(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        _MALLOPT(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
