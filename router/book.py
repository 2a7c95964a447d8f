"""The live `PoolBook`: the indexer's `PoolSnapshot` seen as the router's immutable book.

The snapshot changes in place; a route must see one consistent state, so the daemon routes on a
`PoolBook` made once per snapshot version, lazily, on the first request after a change. Only
the tokens a change touched are converted again, and incrementally: the new book is the previous
one with the changed pools taken out and re-inserted in order (`PoolBook.replaced`), and their
route models are updated the same way at once (`route.update_models`, so the first order after
a change does not pay for them); every other token keeps its `Pool` objects and its models.

The book also keeps each routed pool's encodings (`Encodings`: its transaction input, output
and template, whether they are standard, its JSON text), made once per pool and carried from
book to book while the pool stays, so a build spends no time re-encoding the pools it trades
or asking again whether they are standard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, cast

from bch.policy import standard_spend
from bch.token import TokenData
from bch.tx import FungibleTemplate, OutPoint, TxInput, TxOutput, hex_to_hash
from indexer.snapshot import LivePool, PoolSnapshot, SnapshotChange
from protocols.cauldron.contract import pool_locking_bytecode, trade_unlocking
from router.hop import Hop
from router.pools import Pool, PoolBook
from router.route import inherit_models, prewarm, update_models
from router.wire import leg_pieces, leg_templates, source_output_bytes


class PoolEncoding(NamedTuple):
    """A pool as a transaction and a reply spell it. The builder spends `trade_input` and
    `source_output` and re-creates the pool from `template`; the gate holds the transaction to
    them; `wire` splices the JSON text. A named tuple, so a route's encodings turn into
    columns with one `zip` (`EncodingColumns`)."""

    pool: Pool  # what is encoded
    trade_input: TxInput  # outpoint, the 69-byte redeem push, final sequence
    input_hex: bytes  # `trade_input`'s wire bytes in hex, ASCII (`wire` splices the tx's hex)
    source_output: TxOutput  # the pool's UTXO
    template: FungibleTemplate  # the bytes its re-created outputs share
    source_json: bytes  # its `source_outputs` entry (`wire.source_output_bytes`)
    leg_buy: bytes  # `wire.leg_templates`: its leg object buying and selling, numbers as %d
    leg_sell: bytes
    leg_buy_pieces: tuple[bytes, ...]  # the same split at the numbers (`wire.leg_pieces`)
    leg_sell_pieces: tuple[bytes, ...]
    # `trade_input`, `source_output` and `template` are each standard on their own
    # (`bch.policy.standard_spend`): the gate need not ask the policy checks again per build.
    standard: bool
    price: float | None  # sats per token before any trade (None without tokens)
    sats: int  # the pool's state: what `source_output` holds
    tokens: int


class EncodingColumns(NamedTuple):
    """A route's `PoolEncoding`s field by field, each a tuple in the route's order: what the
    builder, the gate and the reply read of every leg, transposed at once (`of_encodings`)
    instead of one pass over the legs per field."""

    pool: tuple[Pool, ...]
    trade_input: tuple[TxInput, ...]
    input_hex: tuple[bytes, ...]
    source_output: tuple[TxOutput, ...]
    template: tuple[FungibleTemplate, ...]
    source_json: tuple[bytes, ...]
    leg_buy: tuple[bytes, ...]
    leg_sell: tuple[bytes, ...]
    leg_buy_pieces: tuple[tuple[bytes, ...], ...]
    leg_sell_pieces: tuple[tuple[bytes, ...], ...]
    standard: tuple[bool, ...]
    price: tuple[float | None, ...]
    sats: tuple[int, ...]
    tokens: tuple[int, ...]

    @classmethod
    def of_encodings(cls, encodings: Sequence[PoolEncoding]) -> EncodingColumns:
        if not encodings:
            return _NO_COLUMNS
        return cls._make(zip(*encodings, strict=True))

    def part(self, start: int, end: int) -> EncodingColumns:
        """The columns of the encodings `start:end` (one hop's of a two-hop route)."""
        return EncodingColumns._make(column[start:end] for column in self)


_NO_COLUMNS = EncodingColumns._make(() for _ in EncodingColumns._fields)


def encode(pool: Pool) -> PoolEncoding:
    category = hex_to_hash(pool.token_id)
    locking = pool_locking_bytecode(pool.owner_pkh)
    token = TokenData(category, pool.tokens) if pool.tokens else None
    source = TxOutput(pool.sats, locking, token)
    outpoint = OutPoint(hex_to_hash(pool.txid), pool.vout)
    trade_input = TxInput(outpoint, trade_unlocking(pool.owner_pkh))
    buy, sell = leg_templates(pool)
    template = FungibleTemplate(locking, category)
    return PoolEncoding(
        pool,
        trade_input,
        trade_input.encode().hex().encode(),
        source,
        template,
        source_output_bytes(source),
        buy,
        sell,
        leg_pieces(buy),
        leg_pieces(sell),
        standard_spend(trade_input, source, template),
        pool.sats / pool.tokens if pool.tokens else None,
        pool.sats,
        pool.tokens,
    )


class Encodings:
    """Pools' `PoolEncoding`s, made on first use and kept until `forget`.

    An identity map: a build looks up every pool it trades, and a `Pool`'s hash is a
    Python-level call over its six fields, while `id` is one C call. An entry holds its pool,
    so while it exists no other object can have that id."""

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[int, PoolEncoding] = {}

    def of(self, pools: Sequence[Pool]) -> tuple[PoolEncoding, ...]:
        """Each pool's encoding, in order."""
        found = tuple(map(self._by_id.get, map(id, pools)))
        if None not in found:
            return cast(tuple[PoolEncoding, ...], found)
        make = self._by_id.setdefault
        return tuple(
            make(id(pool), encode(pool)) if e is None else e
            for pool, e in zip(pools, found, strict=True)
        )

    def of_hops(self, hops: Sequence[Hop]) -> tuple[PoolEncoding, ...]:
        """Each hop's pools' encodings, in order: by the legs' model positions where the hop
        has them (`Hop.aligned`: a list index, not a dict lookup per pool), kept there once
        made."""
        found: list[PoolEncoding] = []
        for hop in hops:
            aligned = hop.aligned()
            if aligned is None:
                found.extend(self.of(hop.columns()[0]))
                continue
            table, positions = aligned
            taken = list(map(table.__getitem__, positions))
            if not all(taken):  # (an encoding is a non-empty tuple: None is the only falsy)
                taken = list(self.of(hop.columns()[0]))
                for position, encoding in zip(positions, taken, strict=True):
                    table[position] = encoding
            found.extend(taken)
        return tuple(found)

    def forget(self, pools: Iterable[Pool]) -> None:
        """Drop pools that left the book."""
        for pool in pools:
            self._by_id.pop(id(pool), None)


_ENCODINGS = ("encodings",)


def encodings(book: PoolBook) -> Encodings:
    """The encodings table of `book` (carried over from the previous book by `LiveBook`)."""
    return book.memo(_ENCODINGS, Encodings)


def to_pool(live: LivePool) -> Pool:
    """The router's view of a live pool (the router needs neither lineage nor height)."""
    return Pool(live.txid, live.vout, live.owner_pkh, live.token_id, live.sats, live.tokens)


class LiveBook:
    """`current()` is the `PoolBook` of the snapshot's current version (cached per version).

    Subscribes to the snapshot's synchronous change feed only to note which tokens changed;
    all work happens in `current()`. Call `close()` to detach from the snapshot.
    """

    def __init__(self, snapshot: PoolSnapshot) -> None:
        self._snapshot = snapshot
        self._pools: dict[str, tuple[Pool, ...]] = {}
        self._dirty: set[str] = set(snapshot.tokens())
        self._book: PoolBook | None = None
        self._unsubscribe: Callable[[], None] = snapshot.subscribe(self._on_change)

    @property
    def snapshot(self) -> PoolSnapshot:
        return self._snapshot

    def _on_change(self, change: SnapshotChange) -> None:
        self._dirty.add(change.token)

    def current(self) -> PoolBook:
        book = self._book
        snap = self._snapshot
        if book is not None and book.version == snap.version and book.height == snap.height:
            return book
        return self._rebuild()

    def _rebuild(self) -> PoolBook:
        snap = self._snapshot
        dirty, self._dirty = self._dirty, set()
        changes = {token: self._convert(token, snap.pools(token)) for token in dirty}
        old = self._book
        if old is None:
            book = PoolBook(
                (p for group in self._pools.values() for p in group),
                version=snap.version,
                height=snap.height,
            )
            for token in dirty:
                if token in self._pools:
                    prewarm(book, token)
        else:
            book, moved = old.replaced(changes, version=snap.version, height=snap.height)
            inherit_models(book, old, (t for t in self._pools if t not in dirty))
            for token, (lost, gained) in moved.items():
                if token in self._pools:
                    update_models(book, old, token, lost, gained)
            table = encodings(old)
            for removed, _ in changes.values():
                table.forget(removed)
            book.memo(_ENCODINGS, lambda: table)
        self._book = book
        return book

    def _convert(self, token: str, live: Iterable[LivePool]) -> tuple[list[Pool], list[Pool]]:
        """Bring the token's pools up to `live`, keeping every unchanged `Pool` object;
        returns (the pools that left, the pools that joined)."""
        previous = {p.key: p for p in self._pools.get(token, ())}
        group: list[Pool] = []
        removed: list[Pool] = []
        added: list[Pool] = []
        for lp in live:
            old = previous.pop((lp.txid, lp.vout), None)
            if (
                old is not None
                and old.sats == lp.sats
                and old.tokens == lp.tokens
                and old.owner_pkh == lp.owner_pkh
            ):
                group.append(old)
                continue
            if old is not None:
                removed.append(old)
            pool = to_pool(lp)
            group.append(pool)
            added.append(pool)
        removed.extend(previous.values())  # gone from the snapshot
        if group:
            self._pools[token] = tuple(group)
        else:
            self._pools.pop(token, None)
        return removed, added

    def close(self) -> None:
        self._unsubscribe()
