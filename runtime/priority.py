"""The scheduling priority of a service process: `--nice N` on `ladle rest` and
`ladle broadcast`, `--http-nice N` on `ladle up`.

The router answers swaps within milliseconds; the data API and broadcast answer HTTP requests
that anyone can send as fast as they like. On a machine with few cores, a flood of such
requests keeps every core busy, and the router's replies then wait for a core. A higher
niceness for the HTTP processes makes the kernel run the router first whenever both want the
CPU; the HTTP processes still use every cycle the router leaves idle, so they lose nothing on an
idle machine. The measurement is in docs/benchmarks.md (*isolation*).
"""

from __future__ import annotations

import argparse
import os

__all__ = ["MAX_NICE", "add_nice_option", "check_nice", "set_nice"]

MAX_NICE = 19  # the lowest priority Linux gives


def add_nice_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        metavar="N",
        help=f"run at this scheduling niceness, 0 to {MAX_NICE} (default 0); higher yields the "
        "CPU to other processes, e.g. the router, when both want it",
    )


def check_nice(value: int, flag: str = "--nice") -> int:
    """`value`, or ValueError naming `flag` if it is not a niceness from 0 to MAX_NICE."""
    if not 0 <= value <= MAX_NICE:
        raise ValueError(f"{flag} must be from 0 to {MAX_NICE}, got {value}")
    return value


def set_nice(niceness: int) -> None:
    """Run this process, and the processes and threads it starts from now on, at `niceness`.
    Never lowers the niceness it already has: raising a priority takes privileges."""
    if niceness > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
