"""The router's JSON Schemas (schemas/rpc), loaded with cross-file references resolved."""

from __future__ import annotations

import json
from functools import cache

# jsonschema ships no type stubs and pyproject's mypy overrides do not list it yet.
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource

from tests.conftest import ROOT

SCHEMAS = ROOT / "schemas" / "rpc"

__all__ = ["SCHEMAS", "Draft202012Validator", "ValidationError", "registry", "validator"]


@cache
def registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        doc = json.loads(path.read_text())
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    return Draft202012Validator(schema, registry=registry())
