"""Registry endpoints (filled in by the registry REST work)."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
