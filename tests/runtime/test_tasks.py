"""`cancel_and_wait`: the tasks end, and a cancellation of the caller is never swallowed."""

from __future__ import annotations

import asyncio

import pytest

from runtime.tasks import cancel_and_wait


async def _slow_to_stop(stopped: list[str]) -> None:
    """A task that needs a moment to clean up once cancelled, as a pipeline's fetches do."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)
        stopped.append("cleaned up")
        raise


async def _failing() -> None:
    raise ValueError("a helper's own failure")


async def test_every_task_ends_whatever_it_ended_with() -> None:
    stopped: list[str] = []
    slow = asyncio.create_task(_slow_to_stop(stopped))
    failing = asyncio.create_task(_failing())
    await asyncio.sleep(0)
    await cancel_and_wait([slow, failing])
    assert slow.cancelled() and failing.done() and stopped == ["cleaned up"]


async def test_the_callers_cancellation_goes_through() -> None:
    stopped: list[str] = []
    entered = asyncio.Event()

    async def caller() -> str:
        helper = asyncio.create_task(_slow_to_stop(stopped))
        await asyncio.sleep(0)
        entered.set()
        await cancel_and_wait([helper])  # cancelled while the helper cleans up
        return "ran on"

    outer = asyncio.create_task(caller())
    await entered.wait()
    await asyncio.sleep(0.01)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert outer.cancelled()


async def test_no_tasks_is_nothing_to_do() -> None:
    await cancel_and_wait([])
