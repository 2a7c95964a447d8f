"""Oracle feeds: `/oracle/feed/<token>/history` and `/oracle/feed/closest`.

A feed is named by its 64-hex token category (the oracle NFT's). Each history entry is one update
of the feed (`time` the oracle's own timestamp, `price` integer US cents per BCH, the `txid` and
`blockhash` that carried it, its `sequence`), read by `indexer.store.queries_oracle`; `closest`
answers one update in the specification's own shape (`oracle_timestamp`, `oracle_price`,
`oracle_sequence`, `token_id`, `txid`, `blockhash`). A feed the
index has no update of answers `[]` / `null`, like one that is merely quiet.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries_oracle as qo
from rest import endpoints as e
from rest.db import Snapshot
from rest.endpoints import MAX_UPDATES
from rest.errors import bad_parameter, not_found
from rest.routes.common import context
from rest.tokens import TOKEN_ID

_COUNT = (
    "SELECT count(*) FROM oracle_updates WHERE category = ? AND price IS NOT NULL "
    "AND oracle_time BETWEEN ? AND ?"
)


def point(p: qo.FeedPoint) -> dict[str, Any]:
    return {
        "time": p.time,
        "price": p.price,
        "txid": p.txid,
        "blockhash": p.blockhash,
        "sequence": p.sequence,
    }


def closest_point(category: str, p: qo.FeedPoint) -> dict[str, Any]:
    """The specification's closest-price object: its own field names (not the history
    entry's), and the feed it came from."""
    return {
        "oracle_timestamp": p.time,
        "oracle_price": p.price,
        "oracle_sequence": p.sequence,
        "token_id": category,
        "txid": p.txid,
        "blockhash": p.blockhash,
    }


async def history(request: Request, args: e.FeedHistoryArgs) -> Response:
    ctx = context(request)
    token = args.token.lower()
    start, end = e.window(args.start, args.end, ctx.now(), 0)
    step = args.stepsize

    async def compute(snap: Snapshot) -> Any:
        if step is None:
            rows = list(
                await snap.conn.execute_fetchall(_COUNT, (bytes.fromhex(token), start, end))
            )
            if int(rows[0][0]) > MAX_UPDATES:
                raise bad_parameter(
                    "stepsize",
                    f"{rows[0][0]} updates between start and end; at most {MAX_UPDATES} without "
                    "a stepsize (give one, or a shorter window)",
                )
        points = await qo.feed_history(snap.conn, token, start, end, step)
        return [point(p) for p in points]

    key = ("oracle_history", token, start, end, step)
    return await ctx.answer(request, key, compute, requested_time=end)


async def closest(request: Request, args: e.FeedClosestArgs) -> Response:
    ctx = context(request)
    text = args.token_id
    if not TOKEN_ID.match(text):
        # A malformed id names no feed: not found (as the reference API answers).
        raise not_found("unknown_token", "token_id: not a 64-character hex token id")
    token = text.lower()
    when = args.timestamp
    timestamp = ctx.now() if when is None else when

    async def compute(snap: Snapshot) -> Any:
        found = await qo.feed_closest(snap.conn, token, timestamp)
        return None if found is None else closest_point(token, found)

    key = ("oracle_closest", token, timestamp)
    return await ctx.answer(request, key, compute, requested_time=timestamp)


ROUTES = [
    e.FEED_CLOSEST.route(closest),
    e.FEED_HISTORY.route(history),
]
