"""Helpers every route module uses."""

from __future__ import annotations

from starlette.requests import Request

from rest import queries_dex as qd
from rest.context import ApiContext
from rest.db import Snapshot
from rest.errors import not_found
from rest.tokens import resolve_token


def context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.ctx
    return ctx


async def token_id(ctx: ApiContext, text: str, name: str = "token") -> str:
    """A token parameter (64-hex id or symbol) → id; 400/404 as `resolve_token` says."""
    return await resolve_token(ctx.config.registry, name, text)


async def require_token(ctx: ApiContext, snap: Snapshot, token: str) -> None:
    """404 unless the index has seen a pool of `token` (the token list of this version, when
    it is ready, answers without a query)."""
    known = ctx.tokens.known(snap.tip, token)
    if known is None:
        known = await qd.token(snap.conn, token) is not None
    if not known:
        raise not_found("unknown_token", f"the index has never seen a pool of {token}")
