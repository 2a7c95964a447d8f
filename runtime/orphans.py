"""A supervised process ends when its parent does: no orphan keeps a port or a database open
after `ladle up` (or the `ladle rest` worker parent) was killed with a signal it cannot catch.

On Linux the kernel sends the child SIGTERM when its parent dies (`PR_SET_PDEATHSIG`), and
SIGTERM is every command's clean stop; elsewhere a daemon thread notices the new parent. A
process whose parent is not the one it must not outlive (a worker forked by a fork server)
waits for that process's end instead (`end_with`).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time

# Set by a supervisor in its children's environment: the pid they must not outlive.
PARENT_PID_ENV = "LADLE_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Get SIGTERM once `parent` is gone (at once if it already is)."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    else:
        threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it died before the request above: nobody will signal us
        os.kill(os.getpid(), signal.SIGTERM)


def die_with_supervisor() -> None:
    """`die_with_parent` when a supervisor started this process (`PARENT_PID_ENV` is set)."""
    value = os.environ.get(PARENT_PID_ENV)
    if value and value.isdigit():
        die_with_parent(int(value))


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def end_with(pid: int) -> None:
    """Get SIGTERM once process `pid` (any, not only the parent) has exited."""
    threading.Thread(target=_wait_for, args=(pid,), daemon=True).start()


def _wait_for(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        pass  # already gone
    except OSError:  # no pidfd (an old kernel): ask every second
        while _exists(pid):
            time.sleep(1.0)
    else:
        select.select([fd], [], [])  # readable once the process has exited
        os.close(fd)
    os.kill(os.getpid(), signal.SIGTERM)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
