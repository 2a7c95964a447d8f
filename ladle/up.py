"""`ladle up`: start the devnet and every ladle component that exists, then serve.

This module only composes: each component is one async start function registered in
`COMPONENTS`, in start order; it gets the `runtime.UpContext` (the command line and what earlier
components started, e.g. the devnet's Electrum endpoints for the indexer) and returns a
`runtime.Started` (types below every component, so none imports this module): the keys it adds
to the ready line,
the lines a person reads, and how to stop it. When every component is serving, `ladle up` prints
those lines, then exactly one machine-readable line

    LADLE_READY {"electrum": [...], "wallets": [...], ...}

(JSON on one line; a component that does not exist adds no key), and serves until SIGINT or
SIGTERM, when it stops the components in reverse order and exits with status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Collection
from typing import Any

import orjson

import broadcast.cli
import indexer.service
import rest.service
import router.service
from broadcast.cli import add_up_options
from devnet.cli import LaunchConfig, add_devnet_options, launch, launch_config_from_args
from indexer.cli import add_registry_arguments
from indexer.snapshot import PoolSnapshot
from runtime.component import Component, Started, UpContext, merged_ready
from runtime.tasks import cancel_and_wait
from runtime.usage import EXIT_USAGE

READY = "LADLE_READY"


async def start_devnet(ctx: UpContext, config: LaunchConfig) -> Started:
    launched = await launch(config)
    ctx.devnet = launched
    if launched.scenario is not None:
        ctx.usd_feed = launched.scenario.ledger.oracle.category
    return Started(
        "devnet",
        launched.ready(),
        launched.lines(),
        launched.stop,
    )


def _no_config(args: argparse.Namespace) -> None:
    """The router reads `ctx.args` until it has a configuration of its own."""


async def start_router(ctx: UpContext, config: None) -> Started | None:
    """The router shares the indexer's process and `ctx.snapshot` (so it starts after it)."""
    return await router.service.start_router_component(ctx)


# In start order; every configuration is built (and checked) before the first start.
COMPONENTS: list[Component[Any]] = [
    Component("devnet", launch_config_from_args, start_devnet),
    Component("indexer", indexer.service.up_config_from_args, indexer.service.start_indexer),
    Component("rest", rest.service.up_config_from_args, rest.service.start_in_up),
    Component("router", _no_config, start_router),
    Component("broadcast", broadcast.cli.up_config_from_args, broadcast.cli.start_in_up),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def cmd_devnet(args: argparse.Namespace) -> int:
    """`ladle devnet`: `ladle up` with the devnet alone (the same ready line, the same stop)."""
    return run_components(args, only=("devnet",))


def run_components(args: argparse.Namespace, *, only: Collection[str] | None = None) -> int:
    """Start the components (all, or those named in `only`) and serve until a signal."""
    return asyncio.run(_serve(args, only))


async def _serve(args: argparse.Namespace, only: Collection[str] | None) -> int:
    chosen = [c for c in COMPONENTS if only is None or c.name in only]
    try:  # every option is checked before anything starts: a bad one is exit 2 at once
        configs = [(c, c.from_args(args)) for c in chosen]
    except ValueError as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stopping.set)
    ctx = UpContext(args, snapshot=PoolSnapshot())
    started: list[Started] = []

    async def start_all() -> None:
        for component, config in configs:
            running = await component.start(ctx, config)
            if running is not None:
                started.append(running)
                ctx.started[component.name] = running

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
            await cancel_and_wait([startup])
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
    return f"{READY} {orjson.dumps(merged_ready(started)).decode()}"


def _announce(started: list[Started]) -> None:
    out = sys.stdout
    for component in started:
        for line in component.lines:
            print(line, file=out)
    print(ready_line(started), file=out, flush=True)
