"""Lending endpoints (filled in by the lending REST work)."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
