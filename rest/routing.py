"""Starlette's router with a shortcut: a request whose path is exactly that of a route without
parameters is handed to it by one dict lookup, instead of trying every route's pattern in turn
(the API has about 60 routes, and the scan was most of what a cheap answer cost).

The shortcut takes only what the scan would find first: a route none of those before it
matches, for a method it accepts. Everything else (parameters, 405, 404) goes the usual way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Route, Router
from starlette.types import Receive, Scope, Send


class StaticFirstRouter(Router):
    def __init__(self, routes: Sequence[BaseRoute], **kwargs: Any) -> None:
        super().__init__(list(routes), **kwargs)
        self._static = first_static(self.routes)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = self._static.get(get_route_path(scope))
            if route is not None and (route.methods is None or scope["method"] in route.methods):
                scope.setdefault("router", self)
                scope["route"] = route
                scope["endpoint"] = route.endpoint
                scope["path_params"] = dict(scope.get("path_params", {}))
                await route.handle(scope, receive, send)
                return
        await super().app(scope, receive, send)


def first_static(routes: Sequence[BaseRoute]) -> dict[str, Route]:
    """Path → the route without parameters that the scan reaches first for that path: no
    route before it matches the path (a route of another kind is assumed to)."""
    out: dict[str, Route] = {}
    for i, route in enumerate(routes):
        if not isinstance(route, Route) or route.param_convertors or route.path in out:
            continue
        if all(isinstance(r, Route) and not r.path_regex.match(route.path) for r in routes[:i]):
            out[route.path] = route
    return out
