"""Schema-driven fuzzing: schemathesis draws requests the served OpenAPI document allows, for
every operation, and sends them to the real app over the session's index. No answer may be a
server error or undocumented, every answer must match its schema, and no request the document
allows may be refused, except by a refusal the endpoint declares (`rest.declare.Refusal`) or
an ambiguous symbol (data, not form). Bounded: EXAMPLES requests per operation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import uvicorn
from schemathesis import Case, CheckContext
from schemathesis.core.transport import Response

from rest.app import create_app
from rest.endpoints import ENDPOINTS
from tests.fuzz import error_of, fuzz
from tests.rest.conftest import World
from tests.rest.schemas import document

EXAMPLES = 12  # per operation: ~45 operations × 12 requests stay well under a minute
REFUSALS = {e.path: {(r.code, r.parameter) for r in e.refusals} for e in ENDPOINTS}


@pytest.fixture(scope="module")
def api(world: World) -> Iterator[tuple[schemathesis.BaseSchema, str]]:
    """The document as served, and the server's URL: the app under uvicorn on loopback in a
    thread of its own (its lifespan runs once, as in service)."""
    server = uvicorn.Server(
        uvicorn.Config(create_app(world.config()), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="fuzz-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    try:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json"), base
    finally:
        server.should_exit = True
        thread.join(30)


def accepts_what_the_document_allows(
    ctx: CheckContext, response: Response, case: Case[Any]
) -> bool | None:
    """A 400 for a schema-valid request is a declared refusal of this endpoint or an
    ambiguous symbol; anything else means the document promises more than the server takes."""
    if response.status_code != 400:
        return None
    error = error_of(response)
    declared = REFUSALS.get(case.operation.path, set())
    found = (error["code"], error.get("parameter"))
    assert found in declared or error["code"] == "ambiguous_symbol", (
        f"{case.operation.path}: a request the document allows was refused: {error}"
    )
    return None


@pytest.mark.parametrize("path", sorted(document()["paths"]))
def test_the_server_accepts_what_the_document_allows(
    api: tuple[schemathesis.BaseSchema, str], path: str
) -> None:
    schema, base = api
    fuzz(schema[path]["GET"], base, accepts_what_the_document_allows, EXAMPLES)
