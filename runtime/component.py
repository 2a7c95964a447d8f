"""What every `ladle up` component shares: the context it starts in and what it hands back.

A component is its `Component` entry: `from_args` turns the command line into the component's
own configuration (ValueError names a bad option), so that `ladle up` checks every one before it
starts anything and no Namespace reaches a component's `start`.

They live below the components so that a component's `start` depends on these types only, never
on the composition root (`ladle.up`) that calls it, nor on the devnet it may run beside:
`DevnetView` is the part of a running devnet the components read (`devnet.cli.LaunchedDevnet`
has it), so that production code needs no devnet import.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from bch.wallet import Wallet
    from protocols.ledger import Ledger

__all__ = ["Component", "DevnetView", "StartFn", "Started", "UpContext"]

ConfigT = TypeVar("ConfigT")


class DevnetView(Protocol):
    """The devnet as the components see it: endpoints, the scenario's facts, the tip."""

    @property
    def ledger(self) -> Ledger | None:
        """The scenario's ledger (None: the devnet runs without a scenario)."""
        ...

    @property
    def http_url(self) -> str:
        """The devnet's HTTP server (registries, the IPFS gateway at /ipfs/)."""
        ...

    def electrum(self) -> list[dict[str, object]]:
        """One entry per node, in node order: "node", "host", "tcp" (a URL), "ws" if served."""
        ...

    def router_fee_wallet(self) -> Wallet: ...

    def tip_height(self) -> int:
        """Node 0's chain height."""
        ...


@dataclass(slots=True)
class Started:
    name: str
    ready: dict[str, object]  # merged into the LADLE_READY object
    lines: list[str]  # printed for people before the ready line
    stop: Callable[[], Awaitable[None]]


def merged_ready(started: Iterable[Started]) -> dict[str, object]:
    """The LADLE_READY object: every started component's keys, later ones winning."""
    ready: dict[str, object] = {}
    for component in started:
        ready.update(component.ready)
    return ready


@dataclass(slots=True)
class UpContext:
    # The command line, for the router alone until it has its own `Component` configuration.
    args: argparse.Namespace
    started: dict[str, Started] = field(default_factory=dict)
    devnet: DevnetView | None = None  # what later components connect to
    usd_feed: str | None = None  # the devnet's BCH/USD oracle feed category (display hex)
    # The live pool snapshot the indexer writes and the router reads (one object, in-process);
    # `ladle up` gives it (an `indexer.snapshot.PoolSnapshot`), else the indexer makes its own.
    snapshot: Any = None
    # The best chain tips heard (an `indexer.tipwatch.TipWatch`): the indexer sets it, the
    # router in its process reads it to refuse answering from a stale snapshot.
    tips: Any = None


StartFn = Callable[[UpContext], Awaitable[Started | None]]


@dataclass(frozen=True, slots=True)
class Component(Generic[ConfigT]):
    """One `ladle up` component: its configuration from the command line, then its start (None:
    nothing to start, e.g. no devnet to index)."""

    name: str
    from_args: Callable[[argparse.Namespace], ConfigT]  # ValueError names the bad option
    start: Callable[[UpContext, ConfigT], Awaitable[Started | None]]
