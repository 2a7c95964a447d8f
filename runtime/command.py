"""The body of a standalone HTTP service command (`ladle rest`, `ladle broadcast`): options to a
configuration (a bad one is one line on stderr and exit status 2), then serve until a signal
(a port that cannot be bound is exit status 1; SIGINT/SIGTERM is a clean 0)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from runtime.logs import configure_logging
from runtime.usage import EXIT_FAILURE, EXIT_USAGE

ConfigT = TypeVar("ConfigT")


def run_service(
    args: argparse.Namespace,
    config_from_args: Callable[[argparse.Namespace], ConfigT],
    serve: Callable[[ConfigT, str, int], Coroutine[Any, Any, None]],
) -> int:
    """`config_from_args` raises ValueError (or OSError for an unreadable file) naming the
    problem; `serve(config, args.host, args.port)` serves until SIGINT/SIGTERM."""
    try:
        config = config_from_args(args)
    except (ValueError, OSError) as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_format, args.log_level.upper())
    try:
        asyncio.run(serve(config, args.host, args.port))
    except OSError as exc:
        print(f"ladle: error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        pass
    return 0
