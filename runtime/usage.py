"""The one usage error of every command: bad input from the user, reported as one line on
stderr with exit status 2, so that scripts can tell it from a runtime failure (1)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "UsageError", "reporting_usage"]

ArgT = TypeVar("ArgT")

EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr with exit status 2."""


def reporting_usage(command: Callable[[ArgT], int]) -> Callable[[ArgT], int]:
    """`command`, with a UsageError it raises reported as one line on stderr and exit status 2
    (for a command function called directly, not through `ladle`'s main)."""

    def run(arg: ArgT) -> int:
        try:
            return command(arg)
        except UsageError as exc:
            print(f"ladle: error: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return run
