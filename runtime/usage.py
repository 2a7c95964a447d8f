"""The one usage error of every command: bad input from the user, reported as one line on
stderr with exit status 2, so that scripts can tell it from a runtime failure (1)."""

from __future__ import annotations

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "UsageError"]

EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input from the user: reported as one line on stderr with exit status 2."""
