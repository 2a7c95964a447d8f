"""Cancelling helper tasks from inside a task that may itself be cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel `tasks` and wait until each has ended, whatever it ended with.

    `with suppress(CancelledError): await task` would also swallow a cancellation of the
    *caller* that arrives during the wait, and the caller would run on as if nothing had asked
    it to stop (an indexer that never stops). `gather(..., return_exceptions=True)` collects the
    tasks' own outcomes but lets the caller's cancellation through."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
