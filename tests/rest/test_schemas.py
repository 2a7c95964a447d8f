"""The OpenAPI document: current, well-formed, covering every route, and every endpoint's
answer valid against its schema."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped, unused-ignore]
import orjson
from starlette.routing import Route

from rest.app import create_app
from rest.config import RestConfig
from rest.explorer import explorer_routes
from rest.openapi import SPEC_PATH
from rest.spec import dumps
from tests.rest.conftest import World
from tests.rest.schemas import document, response_schema, template, validator

# The explorer's pages, files and the docs viewer are not data API endpoints.
UNDOCUMENTED = {"/openapi.json", *(r.path for r in explorer_routes() if isinstance(r, Route))}


def test_the_committed_document_is_current() -> None:
    assert SPEC_PATH.read_bytes() == dumps(), "run: python -m rest.spec > schemas/openapi.json"


def test_document_is_openapi_3_1_with_valid_schemas() -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0"
    for name, schema in doc["components"]["schemas"].items():
        assert isinstance(name, str)
        jsonschema.Draft202012Validator.check_schema(schema)
    for path, item in doc["paths"].items():
        op = item["get"]
        assert op["operationId"] and op["summary"] and "200" in op["responses"], path
        names = {p["name"] for p in op.get("parameters", [])}
        placeholders = {part[1:-1] for part in path.split("/") if part.startswith("{")}
        assert placeholders <= names, path
    ids = [item["get"]["operationId"] for item in doc["paths"].values()]
    assert len(ids) == len(set(ids))


def test_every_route_is_documented_and_nothing_else() -> None:
    app = create_app(RestConfig())
    routes = {r.path for r in app.routes if isinstance(r, Route)}
    assert routes - UNDOCUMENTED == set(document()["paths"])


def examples(world: World) -> dict[str, list[str]]:
    """Valid requests of every documented path (full URLs)."""
    o = world.oracle
    cat = max(o.categories(), key=lambda c: sum(t.category == c for t in o.trades))
    live = o.utxos_live_at()
    pkh, lineage = live[0].owner, live[0].lineage
    t = world.now - 86_400
    price = f"/dex/price/{cat}"
    return {
        "/tokenpool/pool/active": [
            f"/tokenpool/pool/active?token={cat}",
            f"/tokenpool/pool/active?pkh={pkh}",
        ],
        "/tokenpool/pools": ["/tokenpool/pools", "/tokenpool/pools?limit=3&offset=2"],
        "/tokenpool/tokens": ["/tokenpool/tokens"],
        "/dex/contract/count": ["/dex/contract/count"],
        "/dex/contract/count/{token}": [f"/dex/contract/count/{cat}"],
        "/dex/pool/active": [f"/dex/pool/active?token={cat}&pkh={pkh}"],
        "/dex/pool/aggregated_apy": [
            "/dex/pool/aggregated_apy",
            f"/dex/pool/aggregated_apy?token={cat}",
            f"/dex/pool/aggregated_apy?pkh={pkh}",
        ],
        "/dex/pool/history/{pool_id}": [
            f"/dex/pool/history/{lineage}",
            f"/dex/pool/history/{lineage}?start=0",
        ],
        "/dex/price/{token}/current": [f"{price}/current"],
        "/dex/price/{token}/at/{timestamp}": [f"{price}/at/{t}", f"{price}/at/5"],
        "/dex/price/{token}/history": [f"{price}/history", f"{price}/history?stepsize=86400"],
        "/dex/price/{token}/candlesticks": [
            f"{price}/candlesticks",
            f"{price}/candlesticks?stepsize=600",
        ],
        "/dex/token/{token}/first_pool": [f"/dex/token/{cat}/first_pool"],
        "/dex/tokens/list_by_volume": [
            "/dex/tokens/list_by_volume",
            "/dex/tokens/list_by_volume?limit=2",
        ],
        "/dex/tokens/list_cached": [
            "/dex/tokens/list_cached",
            "/dex/tokens/list_cached?by=name&order=asc",
        ],
        "/dex/tokens/list_cached_by_ids": [f"/dex/tokens/list_cached_by_ids?ids={cat}"],
        "/dex/tokens/search_by_volume": ["/dex/tokens/search_by_volume?search_query=spice"],
        "/dex/tokens/search_cached": ["/dex/tokens/search_cached?q=dr"],
        "/dex/tx/latest": ["/dex/tx/latest", f"/dex/tx/latest?token={cat}&limit=3"],
        "/dex/user/unique_addresses": ["/dex/user/unique_addresses"],
        "/dex/valuelocked": ["/dex/valuelocked", f"/dex/valuelocked?time={t}"],
        "/dex/valuelocked/{token}": [
            f"/dex/valuelocked/{cat}",
            f"/dex/valuelocked/{cat}?time={t}",
        ],
        "/dex/volume": ["/dex/volume", "/dex/volume?start=0"],
        "/dex/volume/{token}": [f"/dex/volume/{cat}"],
        "/health": ["/health"],
        "/metrics": ["/metrics"],
    }


async def test_every_endpoint_answers_with_its_documented_shape(
    client: httpx.AsyncClient, world: World
) -> None:
    covered: set[str] = set()
    for path, exs in examples(world).items():
        for url in exs:
            assert template(url.split("?")[0]) == path, url
            r = await client.get(url)
            assert r.status_code == 200, (url, r.text)
            if path == "/metrics":
                assert r.headers["content-type"].startswith("text/plain")
                continue
            body: Any = r.json()
            schema = response_schema(url.split("?")[0], 200)
            assert schema is not None
            validator(schema).validate(body)
            covered.add(path)
            if isinstance(body, list | dict):
                assert body, f"{url}: an empty answer proves little"
    # The lending, oracle and registry endpoints answer from their own scenarios:
    # tests/rest/test_lending.py, test_oracle.py and test_registry.py.
    own = ("/lending/", "/oracle/", "/registry/")
    elsewhere = {p for p in document()["paths"] if p.startswith(own)}
    assert covered | {"/metrics"} | elsewhere == set(document()["paths"])


async def test_a_response_with_an_extra_field_would_fail() -> None:
    """The schemas are closed: validation really checks field names."""
    schema = response_schema("/dex/volume", 200)
    assert schema is not None
    good = {"total_volume_sats": 1, "period_start": 0, "period_end": 1}
    validator(schema).validate(good)
    try:
        validator(schema).validate({**good, "surprise": 1})
    except jsonschema.ValidationError:
        return
    raise AssertionError("an undocumented field passed validation")


async def test_openapi_and_docs_are_served(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi.json")
    assert r.status_code == 200 and orjson.loads(r.content) == document()
    page = await client.get("/docs/endpoints")  # `/docs` is the explorer's OpenAPI viewer
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for path in document()["paths"]:
        assert f"GET {path}" in page.text
    for name in document()["components"]["schemas"]:
        assert f"id='schema-{name}'" in page.text
    # Self-contained: no scripts, no stylesheets or fonts from elsewhere.
    assert "<script" not in page.text and "<link" not in page.text
    assert "https://" not in page.text and "http://" not in page.text
