"""Oracle endpoints (filled in by the oracle REST work)."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
