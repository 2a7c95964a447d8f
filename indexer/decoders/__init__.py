"""The decoder registry: every protocol the indexer understands, by name.

A new protocol (oracles, registries, lending) subclasses `Decoder` (`indexer.store.decoder`)
and registers a factory here; `Store.open(path, decoders=create_decoders(...))` (or
`indexer.index.open_store`) then migrates its tables and feeds it blocks and mempool
transactions. The follower and the store never change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from indexer.decoders.cauldron import CauldronDecoder
from indexer.decoders.lending import LendingDecoder
from indexer.decoders.oracle import OracleDecoder
from indexer.decoders.registry import RegistryDecoder
from indexer.snapshot import PoolSnapshot
from indexer.store.decoder import AnyDecoder, BlockContext, BlockTx, Decoder, matches
from protocols.lending.contracts import LendingConfig
from protocols.oracle import FeedConfig, FeedTable


@dataclass(frozen=True, slots=True)
class DecoderDeps:
    """What a decoder factory may use: shared in-memory state owned by the indexer process, and
    the protocol configuration (None: the decoder's mainnet defaults)."""

    snapshot: PoolSnapshot
    feeds: tuple[FeedConfig, ...] | None = None  # oracle feeds to decode
    lending: tuple[LendingConfig, ...] | None = None  # lending deployments to decode


DecoderFactory = Callable[[DecoderDeps], AnyDecoder]

_REGISTRY: dict[str, DecoderFactory] = {}


def register_decoder(name: str, factory: DecoderFactory) -> None:
    if name in _REGISTRY:
        raise ValueError(f"decoder {name!r} is already registered")
    _REGISTRY[name] = factory


def registered_decoders() -> list[str]:
    return list(_REGISTRY)


def create_decoders(
    names: Sequence[str] | None = None,
    *,
    snapshot: PoolSnapshot | None = None,
    feeds: Sequence[FeedConfig] | None = None,
    lending: Sequence[LendingConfig] | None = None,
) -> list[AnyDecoder]:
    """Instantiate decoders by name (default: all registered, in registration order).
    `feeds`, `lending`: what to decode instead of the mainnet defaults."""
    deps = DecoderDeps(
        snapshot if snapshot is not None else PoolSnapshot(),
        None if feeds is None else tuple(feeds),
        None if lending is None else tuple(lending),
    )
    chosen = list(_REGISTRY) if names is None else list(names)
    unknown = [n for n in chosen if n not in _REGISTRY]
    if unknown:
        raise ValueError(f"unknown decoders {unknown}; registered: {list(_REGISTRY)}")
    decoders = [_REGISTRY[n](deps) for n in chosen]
    for n, d in zip(chosen, decoders, strict=True):
        if d.name != n:
            raise ValueError(f"decoder registered as {n!r} calls itself {d.name!r}")
    return decoders


register_decoder("cauldron", lambda deps: CauldronDecoder(deps.snapshot))
register_decoder(
    "oracle", lambda deps: OracleDecoder(None if deps.feeds is None else FeedTable(deps.feeds))
)
register_decoder("registry", lambda deps: RegistryDecoder())
register_decoder("lending", lambda deps: LendingDecoder(deps.lending))

__all__ = [
    "AnyDecoder",
    "BlockContext",
    "BlockTx",
    "Decoder",
    "DecoderDeps",
    "DecoderFactory",
    "create_decoders",
    "matches",
    "register_decoder",
    "registered_decoders",
]
