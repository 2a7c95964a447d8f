"""OpenAPI schemas and paths of the oracle and registry endpoints, merged by `rest.spec.build`."""

from __future__ import annotations

from typing import Any

from rest.spec import Schema

SCHEMAS: dict[str, Schema] = {}


def paths() -> dict[str, Any]:
    """Path → GET operation (built with `rest.spec.op`)."""
    return {}
