"""Validation of answers against the OpenAPI document (schemas/openapi.json) with jsonschema."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import orjson

from rest.openapi import SPEC_PATH


@cache
def document() -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(SPEC_PATH.read_bytes())
    return doc


@cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    out = []
    for path in document()["paths"]:
        pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"
        out.append((re.compile(pattern), path))
    return out


def template(path: str) -> str | None:
    for pattern, name in _templates():
        if pattern.match(path):
            return name
    return None


def response_schema(path: str, status: int) -> dict[str, Any] | None:
    """The documented schema of `status` on `path` (None: not documented)."""
    doc = document()
    name = template(path)
    if name is None:
        return None
    responses = doc["paths"][name]["get"]["responses"]
    resp = responses.get(str(status))
    if resp is None:
        return None
    if "$ref" in resp:
        resp = doc["components"]["responses"][resp["$ref"].rsplit("/", 1)[-1]]
    content = resp.get("content", {}).get("application/json")
    return None if content is None else dict(content["schema"])


@cache
def _error_validator() -> jsonschema.Draft202012Validator:
    return validator({"$ref": "#/components/schemas/Error"})


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    root = {**schema, "components": document()["components"]}
    return jsonschema.Draft202012Validator(root)


def validate(path: str, status: int, body: Any) -> None:
    """Raise if a JSON answer does not match its documented schema. Errors of any path
    (unknown endpoints included) must match the Error schema."""
    schema = response_schema(path, status)
    if schema is None:
        assert status >= 400, f"{status} on {path} is not documented"
        _error_validator().validate(body)
        return
    validator(schema).validate(body)
