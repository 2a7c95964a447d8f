"""The process tree as Linux shows it in /proc: children, command lines, liveness."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # state, ppid, … (the name may hold spaces)


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, is not)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return sorted(out)


def descendants(pid: int) -> list[int]:
    found = []
    for child in children(pid):
        found += [child, *descendants(child)]
    return found


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode() for part in raw.split(b"\0") if part]


def child_running(pid: int, *words: str) -> int:
    """The child of `pid` whose command line holds `words` in order (e.g. "ladle", "rest")."""
    for child in children(pid):
        line = cmdline(child)
        for i in range(len(line) - len(words) + 1):
            if tuple(line[i : i + len(words)]) == words:
                return child
    raise LookupError(f"no child of {pid} runs {' '.join(words)}")


def established_on(pid: int, port: int) -> int:
    """How many TCP connections to local `port` the process holds."""
    return len(peers_on(pid, port))


def peers_on(pid: int, port: int) -> set[int]:
    """The remote ports of the TCP connections to local `port` the process holds (its fds
    against the ESTABLISHED sockets of /proc/<pid>/net/tcp{,6}): on loopback, the client
    ends' local ports, which tell which process accepted a client's connection."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    except OSError:
        return set()
    peers = set()
    local = f":{port:04X} "  # the local address column ends so; a cheap filter of a long table
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                if local not in line:
                    continue
                cols = line.split()
                local_port = int(cols[1].rsplit(":", 1)[1], 16)
                if local_port == port and cols[3] == "01" and cols[9] in inodes:
                    peers.add(int(cols[2].rsplit(":", 1)[1], 16))
    return peers
