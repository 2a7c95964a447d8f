"""Listings held in memory per version: every item of a listing computed once (for an index
tip, and whatever else the answer depends on), each item's JSON made on first use, so a page is
a slice of serialised items, answered without a read (`ApiContext.answer`'s `from_memory`).

For the listings that are small, or whose rows change between blocks so that no row keeps
its place (live loans, live pools, the token lists): `rest.pages` keeps the rows of the
chain-ordered logs, which only grow."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")
MAX_HELD = 64  # listings kept (a token search per query, a volume window per second…)


class Held(Generic[T]):
    """`items` as of `version`, each shown as `shape(item)`."""

    def __init__(self, version: Hashable, items: Sequence[T], shape: Callable[[T], Any]) -> None:
        self.version = version
        self.items = items
        self._shape = shape
        self._json: list[bytes | None] = [None] * len(items)

    def __len__(self) -> int:
        return len(self.items)

    def page(self, offset: int, limit: int | None) -> list[bytes]:
        """The JSON of `items[offset : offset + limit]` (to the end when `limit` is None)."""
        end = len(self.items) if limit is None else min(len(self.items), offset + limit)
        out, kept = [], self._json
        for i in range(offset, end):
            row = kept[i]
            if row is None:
                row = kept[i] = orjson.dumps(self._shape(self.items[i]))
            out.append(row)
        return out


class HeldListings:
    """The held listings by name (an endpoint's and its parameters'), one version each; the
    least recently used dropped beyond `capacity`."""

    def __init__(self, capacity: int = MAX_HELD) -> None:
        self.capacity = capacity
        self._by_name: OrderedDict[Hashable, Held[Any]] = OrderedDict()

    def get(self, name: Hashable, version: Hashable) -> Held[Any] | None:
        """The listing `name` if it is held at `version`."""
        held = self._by_name.get(name)
        if held is None or held.version != version:
            return None
        self._by_name.move_to_end(name)
        return held

    def put(self, name: Hashable, held: Held[T]) -> Held[T]:
        self._by_name[name] = held
        self._by_name.move_to_end(name)
        while len(self._by_name) > self.capacity:
            self._by_name.popitem(last=False)
        return held
