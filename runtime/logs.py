"""Structured logs for every command: JSON lines for collectors, key=value text for people.

Log calls attach their data as fields (`log.info("reorg", extra=fields(fork=812, depth=2))`)
rather than formatting it into the message, so both outputs carry the same machine-readable
keys and a log collector never parses prose.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Literal, TextIO

import orjson

LogFormat = Literal["auto", "json", "text"]
_FIELDS = "fields"


def fields(**values: object) -> dict[str, object]:
    """The `extra` argument that attaches `values` to a log record."""
    return {_FIELDS: values}


def record_fields(record: logging.LogRecord) -> dict[str, object]:
    values = getattr(record, _FIELDS, None)
    return dict(values) if isinstance(values, dict) else {}


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, then the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, object] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            obj.setdefault(key, value)
        if record.exc_info:
            obj["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(obj, default=str).decode()


def _kv(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return orjson.dumps(text).decode()
    return text


class KeyValueFormatter(logging.Formatter):
    """`<ts> <level> <logger>: <msg> key=value …` (values with spaces are JSON-quoted)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname.lower(), f"{record.name}:"]
        parts.append(record.getMessage())
        parts.extend(f"{k}={_kv(v)}" for k, v in record_fields(record).items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def add_log_options(parser: argparse.ArgumentParser) -> None:
    """`--log-format` and `--log-level`, the same on every command that logs."""
    parser.add_argument(
        "--log-format",
        choices=("auto", "json", "text"),
        default="auto",
        help="log lines on stderr: auto = text on a terminal, JSON lines otherwise",
    )
    parser.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info"
    )


def configure_logging(
    fmt: LogFormat = "auto", level: int | str = logging.INFO, stream: TextIO | None = None
) -> Literal["json", "text"]:
    """Send every log record to `stream` (stderr) in `fmt`; "auto" is text on a terminal and
    JSON lines otherwise. For processes whose entry point is ours (`ladle index`)."""
    out = stream if stream is not None else sys.stderr
    resolved: Literal["json", "text"] = (
        ("text" if out.isatty() else "json") if fmt == "auto" else fmt
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLineFormatter() if resolved == "json" else KeyValueFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return resolved
