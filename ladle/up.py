"""`ladle up`: start the devnet and every ladle component that exists, then serve.

Each component is one async start function registered in `COMPONENTS`, in start order; it gets
the `UpContext` (the command line and what earlier components started, e.g. the devnet's
Electrum endpoints for the indexer) and returns a `Started`: the keys it adds to the ready line,
the lines a person reads, and how to stop it. When every component is serving, `ladle up` prints
those lines, then exactly one machine-readable line

    LADLE_READY {"electrum": [...], "wallets": [...], ...}

(JSON on one line; a component that does not exist adds no key), and serves until SIGINT or
SIGTERM, when it stops the components in reverse order and exits with status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from devnet.cli import LaunchedDevnet

READY = "LADLE_READY"
EXIT_USAGE = 2


@dataclass(slots=True)
class Started:
    name: str
    ready: dict[str, object]  # merged into the LADLE_READY object
    lines: list[str]  # printed for people before the ready line
    stop: Callable[[], Awaitable[None]]


@dataclass(slots=True)
class UpContext:
    args: argparse.Namespace
    started: dict[str, Started] = field(default_factory=dict)
    devnet: LaunchedDevnet | None = None  # what later components connect to
    usd_feed: str | None = None  # the devnet's BCH/USD oracle feed category (display hex)
    # The live pool snapshot the indexer writes and the router reads (one object, in-process).
    snapshot: Any = field(default_factory=lambda: _new_snapshot())


def _new_snapshot() -> Any:
    from indexer.snapshot import PoolSnapshot

    return PoolSnapshot()


StartFn = Callable[[UpContext], Awaitable[Started | None]]


async def start_devnet(ctx: UpContext) -> Started:
    from devnet.cli import launch

    launched = await launch(ctx.args)
    ctx.devnet = launched
    if launched.scenario is not None:
        ctx.usd_feed = launched.scenario.ledger.oracle.category
    return Started(
        "devnet",
        {"electrum": launched.electrum(), "wallets": launched.wallets(), "devnet": launched.info()},
        launched.lines(),
        launched.stop,
    )


# Later issues register here, in start order: ("indexer", start_indexer), ("rest", …), …
async def start_rest(ctx: UpContext) -> Started | None:
    from rest.service import start_in_up

    return await start_in_up(ctx)


async def start_broadcast(ctx: UpContext) -> Started | None:
    from broadcast.cli import start_in_up

    return await start_in_up(ctx)


async def start_indexer(ctx: UpContext) -> Started | None:
    from indexer.service import start_indexer as start

    return await start(ctx)


async def start_router(ctx: UpContext) -> Started | None:
    """The router shares the indexer's process and `ctx.snapshot` (so it starts after it)."""
    from router.service import start_router_component

    return await start_router_component(ctx)


COMPONENTS: list[tuple[str, StartFn]] = [
    ("devnet", start_devnet),
    ("indexer", start_indexer),
    ("rest", start_rest),
    ("router", start_router),
    ("broadcast", start_broadcast),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from broadcast.cli import add_up_options
    from devnet.cli import add_devnet_options
    from indexer.cli import add_registry_arguments

    add_devnet_options(parser)
    parser.add_argument(
        "--router-port",
        type=int,
        metavar="PORT",
        help="router WebSocket port (default 8765; 0 when --ports is 0)",
    )
    parser.add_argument(
        "--rest-port",
        type=int,
        metavar="PORT",
        help="data API port (default 8000; 0 when --ports is 0)",
    )
    add_registry_arguments(parser)
    add_up_options(parser)


def cmd_up(args: argparse.Namespace) -> int:
    return run_components(args)


def run_components(args: argparse.Namespace, *, only: Collection[str] | None = None) -> int:
    """Start the components (all, or those named in `only`) and serve until a signal."""
    return asyncio.run(_serve(args, only))


async def _serve(args: argparse.Namespace, only: Collection[str] | None) -> int:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    ctx = UpContext(args)
    started: list[Started] = []

    async def start_all() -> None:
        for name, start in COMPONENTS:
            if only is not None and name not in only:
                continue
            component = await start(ctx)
            if component is not None:
                started.append(component)
                ctx.started[name] = component

    startup = asyncio.create_task(start_all())
    waiter = asyncio.create_task(stopping.wait())
    status = 0
    try:
        done, _ = await asyncio.wait({startup, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if startup in done:
            error = startup.exception()
            if error is not None:
                # ValueError: an option's value (exit 2, like a usage error); else a failure.
                print(f"ladle: error: {error}", file=sys.stderr)
                status = EXIT_USAGE if isinstance(error, ValueError) else 1
            else:
                _announce(started)
                await waiter
        else:
            startup.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await startup
    finally:
        waiter.cancel()
        for component in reversed(started):
            try:
                await component.stop()
            except Exception as exc:  # one component's failure must not keep others running
                print(f"ladle: stopping {component.name}: {exc}", file=sys.stderr)
        for sig in signals:
            loop.remove_signal_handler(sig)
    return status


def ready_line(started: list[Started]) -> str:
    ready: dict[str, object] = {}
    for component in started:
        ready.update(component.ready)
    return f"{READY} {orjson.dumps(ready).decode()}"


def _announce(started: list[Started]) -> None:
    out = sys.stdout
    for component in started:
        for line in component.lines:
            print(line, file=out)
    print(ready_line(started), file=out, flush=True)
