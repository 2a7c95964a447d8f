"""Token registries: `/registry/token/<category>` (the on-chain BCMR entry) and
`/registry/token/<category>/all` (every registry's entry: on-chain first, then the configured
off-chain sources by name).

Read from what the indexer's fetch job stored (`indexer.store.queries_registry`), never fetched
here; each identity's snapshot is the one current at the index tip's time. An unknown symbol
answers like an unknown id (`null`, `[]`); a shared one is still a 400 listing the tokens.
Answers are cached per index version and registry-tables revision (copies arrive between
blocks).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries_registry as qr
from rest import endpoints as e
from rest.db import Snapshot
from rest.errors import not_synced
from rest.routes.common import context, token_id
from rest.tokens import UnknownSymbolError


class _RegistryMovedError(Exception):
    """The registry tables changed after the answer's key was made: key and answer again."""


# A registry copy arrives about once per fetch: more changes than this during one request
# mean the tables are being rewritten, and the client is asked to come back.
_ATTEMPTS = 4


async def _entry(request: Request, args: e.CategoryArgs, every: bool) -> Response:
    ctx = context(request)
    try:
        category: str | None = await token_id(ctx, args.category, "category")
    except UnknownSymbolError:
        # The specification's answer for "no registry entry": a symbol no registry names is
        # no different from an id no registry describes.
        category = None
    tables = ctx.registry_tables

    for _ in range(_ATTEMPTS):
        revision = tables.revision

        async def compute(snap: Snapshot, revision: int = revision) -> Any:
            # The key (and so the ETag) names a revision: what is read must be that one's,
            # or another worker or replica could answer other bytes under the same ETag.
            if await tables.revision_in(snap.conn) != revision:
                raise _RegistryMovedError
            if category is None:
                return [] if every else None
            now = snap.tip.max_time
            if every:
                return await qr.all_entries(snap.conn, category, now)
            return await qr.onchain_entry(snap.conn, category, now)

        key = ("registry_all" if every else "registry", category, revision)
        try:
            return await ctx.answer(request, key, compute)
        except _RegistryMovedError:
            continue
    raise not_synced("the token registries are being updated: retry shortly")


async def entry(request: Request, args: e.CategoryArgs) -> Response:
    return await _entry(request, args, every=False)


async def all_entries(request: Request, args: e.CategoryArgs) -> Response:
    return await _entry(request, args, every=True)


ROUTES = [
    e.REGISTRY_TOKEN.route(entry),
    e.REGISTRY_TOKEN_ALL.route(all_entries),
]
