"""Indexing oracle feeds: configured feed UTXOs (by category and layout) and signed GP messages.

Stateless: every row comes from one transaction's outputs, so `prepare` reads nothing, undo is
a delete above a height, and the mempool is ignored (prices are served from blocks only).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from indexer.decoders.oracle.schema import COMPONENT, MIGRATIONS
from indexer.store.decoder import BlockContext, BlockTx, Decoder
from indexer.store.schema import Migration
from indexer.store.writer import Writer
from protocols.oracle import (
    GP_HEAD,
    CheckedMessage,
    FeedTable,
    Layout,
    check_message,
    decode_feed,
    mainnet_feeds,
    parse_gp_publication,
)


@dataclass(frozen=True, slots=True)
class FeedUpdate:
    txid: bytes  # wire order
    vout: int
    category: bytes  # wire order
    layout: Layout
    position: int
    oracle_time: int
    sequence: int
    price: int | None
    use_fee: int | None
    commitment: bytes


@dataclass(frozen=True, slots=True)
class SignedMessage:
    txid: bytes
    vout: int
    position: int
    checked: CheckedMessage


Row = FeedUpdate | SignedMessage


def decode_oracle_tx(tx: BlockTx, feeds: FeedTable, block_time: int) -> list[Row]:
    """Feed UTXOs (an NFT of a configured category whose commitment fits its layout) and GPPM
    publications. A commitment that does not fit the configured layout is skipped."""
    rows: list[Row] = []
    trusted = feeds.trusted_keys
    for i, out in enumerate(tx.tx.outputs):
        t = out.token
        if t is not None and t.nft is not None:
            feed = feeds.get(t.category)
            if feed is not None:
                try:
                    p = decode_feed(feed.layout, t.nft.commitment, block_time)
                except ValueError:
                    continue
                rows.append(
                    FeedUpdate(
                        tx.txid,
                        i,
                        t.category,
                        feed.layout,
                        tx.position,
                        p.time,
                        p.sequence,
                        p.price,
                        p.use_fee,
                        t.nft.commitment,
                    )
                )
            continue
        if out.locking.startswith(GP_HEAD):
            parsed = parse_gp_publication(out.locking)
            if parsed is not None:
                m, sig, pubkey = parsed
                rows.append(
                    SignedMessage(tx.txid, i, tx.position, check_message(m, sig, pubkey, trusted))
                )
    return rows


class OracleDecoder(Decoder[int, Row]):
    """See `indexer.store.decoder.Decoder`. `feeds`: the configured feed table (default: the
    mainnet Delphi feed); its keys are the trusted signers of GP messages."""

    name = COMPONENT
    sparse = True  # a block without candidates changes nothing here
    migrations: Sequence[Migration] = MIGRATIONS
    undo_tables = ("oracle_updates", "oracle_messages")  # rows carry their height

    def __init__(self, feeds: FeedTable | None = None) -> None:
        self.feeds = feeds if feeds is not None else mainnet_feeds()
        self.patterns: Sequence[bytes] = (
            *(f.category_wire for f in self.feeds.feeds),
            GP_HEAD,
        )

    async def load(self, conn: Writer) -> None:
        return None

    async def prepare(
        self, conn: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], int]:
        return txs, block.time

    def decode(self, tx: BlockTx, context: int) -> Sequence[Row]:
        return decode_oracle_tx(tx, self.feeds, context)

    async def write(self, conn: Writer, block: BlockContext, rows: Sequence[Row]) -> None:
        h, t = block.height, block.time
        updates, messages = [], []
        for r in rows:
            if isinstance(r, FeedUpdate):
                updates.append(
                    (
                        *(r.txid[::-1], r.vout, r.category[::-1], r.layout, h, t, r.position),
                        *(r.oracle_time, r.sequence, r.price, r.use_fee, r.commitment),
                    )
                )
            else:
                c = r.checked
                m = c.message
                messages.append(
                    (
                        *(r.txid[::-1], r.vout, h, t, r.position, c.pubkey, m.encode()),
                        *(c.signature, c.status, m.timestamp, m.message_sequence),
                        *(m.data_sequence, m.price, c.price),
                    )
                )
        # Queued, not awaited (errors surface before COMMIT); nothing for a block without rows.
        conn.submit_many(
            (
                ("INSERT INTO oracle_updates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", updates),
                ("INSERT INTO oracle_messages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", messages),
            ),
        )

    def committed(
        self, block: BlockContext, rows: Sequence[Row], evicted: Collection[bytes]
    ) -> None:
        return None
