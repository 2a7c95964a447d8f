"""The body of a standalone command: options to a configuration (a bad one is one line on stderr
and exit status 2), logging as asked, then run until a signal. `run_service` is an HTTP service
(`ladle rest`, `ladle broadcast`: a port that cannot be bound is exit status 1; SIGINT/SIGTERM
is a clean 0), run at the niceness of its `--nice` option (`runtime.priority`); `run_daemon`
one whose main coroutine returns its own exit status (`ladle devnet`, `ladle index`,
`ladle router`)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from runtime.logs import configure_logging
from runtime.priority import set_nice
from runtime.usage import EXIT_FAILURE, EXIT_USAGE

ConfigT = TypeVar("ConfigT")


def run_service(
    args: argparse.Namespace,
    config_from_args: Callable[[argparse.Namespace], ConfigT],
    serve: Callable[[ConfigT, str, int], Coroutine[Any, Any, None]],
) -> int:
    """`config_from_args` raises ValueError (or OSError for an unreadable file) naming the
    problem (an `args.nice` out of range among them); `serve(config, args.host, args.port)`
    serves until SIGINT/SIGTERM."""
    config = _configured(args, config_from_args)
    if config is None:
        return EXIT_USAGE
    set_nice(args.nice)
    try:
        asyncio.run(serve(config, args.host, args.port))
    except OSError as exc:
        print(f"ladle: error: cannot serve on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        pass
    return 0


def run_daemon(
    args: argparse.Namespace,
    config_from_args: Callable[[argparse.Namespace], ConfigT],
    main: Callable[[ConfigT], Coroutine[Any, Any, int]],
    failed: Callable[[Exception], int],
) -> int:
    """`main(config)` runs until a signal and returns the exit status; an exception escaping it
    is reported by `failed`, which returns the status (each command words its own failure)."""
    config = _configured(args, config_from_args)
    if config is None:
        return EXIT_USAGE
    try:
        return asyncio.run(main(config))
    except Exception as exc:
        return failed(exc)


def usage_error(exc: Exception) -> int:
    """One line on stderr, exit status 2: an option's value refused once running started."""
    print(f"ladle: error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def _configured(
    args: argparse.Namespace, config_from_args: Callable[[argparse.Namespace], ConfigT]
) -> ConfigT | None:
    """The configuration, logging set up as the options ask; None (after one line on stderr)
    when an option is refused."""
    try:
        config = config_from_args(args)
    except (ValueError, OSError) as exc:
        usage_error(exc)
        return None
    configure_logging(args.log_format, args.log_level.upper())
    return config
