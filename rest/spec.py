"""The OpenAPI 3.1 document, built here and kept in `schemas/openapi.json` (a test checks the
file is current; regenerate with `python -m rest.spec > schemas/openapi.json`).

Operations come from the endpoint declarations (`rest.endpoints`), the same that parse the
requests; answer schemas from their Structs (`rest.answers`), by msgspec.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec
import orjson

from rest import answers
from rest.declare import Endpoint
from rest.endpoints import ENDPOINTS

ERRORS = {
    "400": "bad parameter (which and why)",
    "404": "unknown token or pool",
    "405": "method not allowed",
    "429": "rate limited (see Retry-After)",
    "503": "index not synced past the requested time, or database unavailable",
}
REF = "#/components/schemas/{name}"


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(name=name)}


def operation(endpoint: Endpoint[Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The GET operation: parameters and description from the declaration, the 200 answer's
    schema, and the error answers every endpoint shares."""
    out = endpoint.operation()
    out["operationId"] = "get_" + "_".join(
        part.strip("{}") for part in endpoint.path.strip("/").split("/")
    )
    responses: dict[str, Any] = {
        "200": {
            "description": "OK (headers: X-Index-Height, ETag, Cache-Control)",
            "content": {"application/json": {"schema": answer}},
        },
        "304": {"description": "Not modified (If-None-Match matched the ETag)"},
    }
    for code in ERRORS:
        responses[code] = {"$ref": f"#/components/responses/E{code}"}
    out["responses"] = responses
    return out


def build() -> dict[str, Any]:
    types = [getattr(answers, e.answer) for e in ENDPOINTS]
    schemas, components = msgspec.json.schema_components(
        [*types, answers.Health, answers.Error], ref_template=REF
    )
    paths: dict[str, Any] = {
        e.path: {"get": operation(e, schema)}
        for e, schema in zip(ENDPOINTS, schemas[: len(ENDPOINTS)], strict=True)
    }
    paths["/health"] = {
        "get": {
            "operationId": "get_health",
            "summary": "Index height, lag behind the chain tip, database status",
            "responses": {
                "200": {
                    "description": "database readable",
                    "content": {"application/json": {"schema": ref("Health")}},
                },
                "503": {
                    "description": "database unavailable",
                    "content": {"application/json": {"schema": ref("Health")}},
                },
            },
        }
    }
    paths["/metrics"] = {
        "get": {
            "operationId": "get_metrics",
            "summary": "Prometheus metrics: requests and latencies per route, index height",
            "responses": {
                "200": {
                    "description": "text exposition format 0.0.4",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ladle data API",
            "version": "1.0.0",
            "description": "Cauldron DEX pools, prices, volume, value locked and tokens, read "
            "from the ladle index. Prices are sats per token base unit; timestamps are Unix "
            "seconds; values beyond 2^53 are decimal strings. Semantics: docs/api.md.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "responses": {
                f"E{code}": {
                    "description": text,
                    "content": {"application/json": {"schema": ref("Error")}},
                }
                for code, text in ERRORS.items()
            },
        },
    }


def dumps() -> bytes:
    return orjson.dumps(build(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


if __name__ == "__main__":
    sys.stdout.buffer.write(dumps())
