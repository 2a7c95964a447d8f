"""Indexing token identities: authchains from each token's genesis to its head, and the BCMR
publications found on them. Fetching the registries is `indexer.registry_fetch`'s background job.

An authchain is tracked from the genesis of a category: the genesis spends output 0 of the
authbase (the category id), each later link spends output 0 of the previous one. In memory the
decoder keeps the live heads (outpoint → authbases); within a block, transactions are decoded
parents first so a chain can advance several links in one block. Limitation: a publication in
the authbase transaction itself is not seen (the category is only known from its genesis).

No byte pattern announces a link (it is recognised by what it spends), so instead of
`patterns` the decoder selects its candidates with the store's `select` hook, searching the
block's bytes without decoding anything: a transaction is a candidate if an input spends
output 0 of a tracked head (the heads' txids are kept in memory, in step with `heads`) or of
another candidate of the same block (a chain may advance several links in one block), or if
an output's token category is the txid of an output 0 it spends (a genesis). Only those are
decoded; before, every transaction of every block was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from bch.block import output0_spends_and_categories, transactions_holding
from bch.token import PREFIX_TOKEN
from bch.tx import OutPoint
from indexer.decoders.cauldron.decode import decode_order
from indexer.decoders.registry.schema import COMPONENT, MIGRATIONS
from indexer.store.decoder import BlockBytes, BlockContext, BlockTx, Decoder
from indexer.store.schema import Migration
from indexer.store.writer import Writer
from protocols.bcmr import Publication, find_publication, genesis_categories


@dataclass(frozen=True, slots=True)
class Head:
    authbase: bytes  # wire order
    seq: int  # of the link whose output 0 this is


@dataclass(frozen=True, slots=True)
class Link:
    authbase: bytes  # wire
    seq: int
    txid: bytes  # wire
    burned: bool


@dataclass(frozen=True, slots=True)
class PublicationRow:
    authbase: bytes
    seq: int
    txid: bytes
    publication: Publication


Row = Link | PublicationRow


@dataclass(slots=True)
class RegistryContext:
    heads: dict[OutPoint, list[Head]]  # the heads as of before the block …
    added: dict[OutPoint, list[Head]] = field(default_factory=dict)  # … and the block's own
    spent: set[OutPoint] = field(default_factory=set)

    def lookup(self, op: OutPoint) -> list[Head]:
        if op in self.spent:
            return []
        return self.added.get(op) or self.heads.get(op, [])


def decode_registry_tx(tx: BlockTx, ctx: RegistryContext) -> list[Row]:
    """Links (and the publication) this transaction adds to any tracked authchain."""
    t = tx.tx
    extends: list[Head] = []
    for inp in t.inputs:
        if inp.outpoint.index == 0:
            heads = ctx.lookup(inp.outpoint)
            if heads:
                extends += heads
                ctx.spent.add(inp.outpoint)
    known = {h.authbase for h in extends}
    for category in genesis_categories(t):
        if category not in known:
            extends.append(Head(category, 0))  # the authbase is seq 0
            ctx.spent.add(OutPoint(category, 0))
    if not extends:
        return []
    burned = not t.outputs or t.outputs[0].locking[:1] == b"\x6a"
    pub = find_publication(t)
    rows: list[Row] = []
    new_head = OutPoint(tx.txid, 0)
    for h in extends:
        link = Link(h.authbase, h.seq + 1, tx.txid, burned)
        rows.append(link)
        if pub is not None:
            rows.append(PublicationRow(h.authbase, link.seq, tx.txid, pub))
        if not burned:
            ctx.added.setdefault(new_head, []).append(Head(h.authbase, link.seq))
    return rows


# Up to this many tracked heads, `select` searches the block for their outpoints; beyond, it
# walks every transaction's inputs (and outputs, where an output 0 is spent). A search costs
# a pass over the block's bytes per head, the walk a fixed Python step per input: they cost the
# same at about 4 heads, the walk less beyond (docs/benchmarks.md, "Figures the code relies on").
HEAD_SEARCH_LIMIT = 4
_ZERO4 = bytes(4)  # output index 0, little-endian
_TOKEN = bytes((PREFIX_TOKEN,))
# What could be a token prefix: 0xef, 32 bytes of category (captured), a bitfield that
# `bch.token.decode_token_prefix` accepts (reserved bit clear, capability ≤ 2, commitment and
# capability only with an NFT, an NFT or an amount). Zero-width after the 0xef, so that a
# match inside a signature cannot swallow a real prefix that starts within its 33 bytes.
_PREFIX_LIKE = re.compile(
    re.escape(_TOKEN) + rb"(?=([\x00-\xff]{32})[\x10\x20-\x22\x30-\x32\x60-\x62\x70-\x72])"
)


def _holds_output0(raw: bytes, txid: bytes) -> bool:
    """Does `raw` hold `txid ‖ 00000000` (an outpoint spending output 0 of `txid`)? Searched as
    the txid, then the index checked at each hit: a head's txid is rarely in the block at all,
    and 32 random bytes let the search skip ahead, where `txid ‖ 00000000` ends in the block's
    commonest byte (−25 % per head). (Not for categories: their token prefixes are hits.)"""
    at = raw.find(txid)
    while at >= 0:
        if raw.startswith(_ZERO4, at + 32):
            return True
        at = raw.find(txid, at + 1)
    return False


def _holders(block: BlockBytes, spent: list[bytes], chosen: set[int]) -> list[int]:
    """`chosen` (block positions) and the transactions holding `txid ‖ 00000000` for each of
    `spent`, then for each of theirs, and so on (a chain may advance several links in one
    block): a superset of the spends of those outputs 0, which `decode` sorts out."""
    raw, offsets, txids = block.raw, block.offsets, block.txids
    todo = spent
    while todo:
        pattern = todo.pop() + _ZERO4
        for i in transactions_holding(raw, offsets, pattern):
            if i not in chosen:
                chosen.add(i)
                todo.append(txids[i])
    return sorted(chosen)


class RegistryDecoder(Decoder[RegistryContext, Row]):
    """See `indexer.store.decoder.Decoder`."""

    name = COMPONENT
    sparse = True  # a block without candidates changes nothing here
    migrations: Sequence[Migration] = MIGRATIONS
    undo_tables = ("registry_publications", "registry_links")  # rows carry their height
    patterns: Sequence[bytes] = (b"",)  # the mempool's (never used: confirmed only)

    def __init__(self, *, head_search_limit: int = HEAD_SEARCH_LIMIT) -> None:
        self.head_search_limit = head_search_limit
        self.heads: dict[OutPoint, list[Head]] = {}
        self.head_of: dict[bytes, OutPoint] = {}  # authbase (wire) -> its head
        # The txids of the keys of `heads` that are an output 0 (all are: a link's output 0
        # carries the chain on), for `select`'s set test.
        self._head_txids: set[bytes] = set()
        # Categories (wire) whose genesis the index holds: their authbase's output 0 is spent,
        # so no later block can hold their genesis, and `select` does not search for it (a
        # busy token's category is in every block that trades it). Only geneses decoded from
        # the chain go here, never bytes merely seen after an 0xef: those could be planted
        # ahead of a genesis to hide it.
        self._geneses: set[bytes] = set()

    def select(self, block: BlockBytes) -> list[int]:
        """The block's possible links and geneses (see the module doc): a superset of the
        transactions `decode` uses, found without decoding any.

        With few heads tracked, by C-level searches alone: a transaction spending output 0 of
        a head (or of another candidate of the block) holds `txid ‖ 00000000`, and a genesis
        holds a token prefix `ef ‖ category ‖ bitfield` and spends output 0 of the category,
        so it holds `category ‖ 00000000` too. Every 32 bytes between an 0xef and a valid
        bitfield are tried as a category (the block's categories, and a few strings inside
        signatures). Most blocks are proved free of links and geneses without a Python step
        per transaction; the others select only the transactions holding such an outpoint.
        With many heads, every transaction's inputs and outputs are walked instead."""
        raw, txids = block.raw, block.txids
        heads = self._head_txids
        if len(heads) > self.head_search_limit:
            return self._walk(block, range(len(txids)))
        spent = [h for h in heads if _holds_output0(raw, h)]
        # The set difference runs in C over the block's few categories, most of them known.
        unknown = set(_PREFIX_LIKE.findall(raw)) - self._geneses
        if unknown:
            spent += [c for c in unknown if c + _ZERO4 in raw]
        if not spent:
            return []
        return _holders(block, spent, set())

    def _walk(self, block: BlockBytes, indexes: Iterable[int]) -> list[int]:
        """The candidates among `indexes`, read from their inputs (and outputs, where an
        output 0 is spent), and the transactions extending them. Most blocks hold none: the
        transactions extending a candidate are then never looked for."""
        raw, offsets = block.raw, block.offsets
        heads = self._head_txids
        found: list[int] = []
        walk = output0_spends_and_categories
        for i in indexes:
            zeros, categories = walk(raw, offsets[i])
            if zeros and (
                not heads.isdisjoint(zeros)
                or (categories and not set(categories).isdisjoint(zeros))
            ):
                found.append(i)
        if not found:
            return []
        txids = block.txids
        return _holders(block, [txids[i] for i in found], set(found))

    async def load(self, conn: Writer) -> None:
        rows = await conn.execute_fetchall(
            "SELECT l.authbase, l.seq, l.txid FROM registry_links AS l "
            "JOIN (SELECT authbase, max(seq) AS seq FROM registry_links GROUP BY authbase) AS m "
            "ON l.authbase = m.authbase AND l.seq = m.seq WHERE l.burned = 0"
        )
        self.heads, self.head_of, self._head_txids = {}, {}, set()
        for authbase, seq, txid in rows:
            self._move(bytes(authbase)[::-1], OutPoint(bytes(txid)[::-1], 0), int(seq))
        geneses = await conn.execute_fetchall("SELECT authbase FROM registry_links WHERE seq = 1")
        self._geneses = {bytes(r[0])[::-1] for r in geneses}

    async def prepare(
        self, conn: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], RegistryContext]:
        return decode_order(txs, full=True), RegistryContext(self.heads)

    def decode(self, tx: BlockTx, context: RegistryContext) -> Sequence[Row]:
        return decode_registry_tx(tx, context)

    async def write(self, conn: Writer, block: BlockContext, rows: Sequence[Row]) -> None:
        h, t = block.height, block.time
        links, pubs = [], []
        for r in rows:
            if isinstance(r, Link):
                links.append((r.authbase[::-1], r.seq, r.txid[::-1], h, t, int(r.burned)))
            else:
                p = r.publication
                pubs.append(
                    (
                        *(r.txid[::-1], r.authbase[::-1], r.seq, p.output_index),
                        *(p.expected_hash, p.hash_encoding, json.dumps(list(p.uris)), h, t),
                    )
                )
        # Queued, not awaited (errors surface before COMMIT); nothing for a block without rows.
        conn.submit_many(
            (
                ("INSERT INTO registry_links VALUES (?,?,?,?,?,?)", links),
                ("INSERT INTO registry_publications VALUES (?,?,?,?,?,?,?,?,?)", pubs),
            ),
        )

    def committed(
        self, block: BlockContext, rows: Sequence[Row], evicted: Collection[bytes]
    ) -> None:
        for r in rows:
            if isinstance(r, Link):
                self._move(r.authbase, None if r.burned else OutPoint(r.txid, 0), r.seq)
                if r.seq == 1:
                    self._geneses.add(r.authbase)

    def _move(self, authbase: bytes, to: OutPoint | None, seq: int) -> None:
        old = self.head_of.pop(authbase, None)
        if old is not None:
            kept = [x for x in self.heads.get(old, []) if x.authbase != authbase]
            if kept:
                self.heads[old] = kept
            else:
                self.heads.pop(old, None)
                if old.index == 0:
                    self._head_txids.discard(old.txid)
        if to is not None:
            self.heads.setdefault(to, []).append(Head(authbase, seq))
            self.head_of[authbase] = to
            if to.index == 0:
                self._head_txids.add(to.txid)
