"""Schema-driven fuzzing of the broadcast API: schemathesis draws requests that
schemas/openapi-broadcast.json allows and sends them to the real service (uvicorn on loopback,
over a devnet). No answer may be a server error or undocumented, every answer must match its
schema, and the only refusal of a schema-valid request is the one no JSON Schema can state:
bytes that do not parse as a transaction (BAD_REQUEST "not a valid transaction"). Bounded:
EXAMPLES requests per operation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from broadcast.cli import start_server
from tests.broadcast.helpers import config_for, devnet

EXAMPLES = 60
DOC = Path(__file__).resolve().parents[2] / "schemas" / "openapi-broadcast.json"
NOT_A_TRANSACTION = "not a valid transaction"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service's URL: a devnet and the server in a thread with a loop of their own."""
    db = tmp_path_factory.mktemp("broadcast-fuzz") / "records.sqlite"
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        net = devnet(3)
        await net.start()
        try:
            running = await start_server(config_for(net, db), port=0)
            box.update(url=running.url, loop=asyncio.get_running_loop(), stop=stop)
            ready.set()
            await stop.wait()
            await running.stop()
        finally:
            await net.stop()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:
            box["error"] = exc
            raise
        finally:
            ready.set()

    thread = threading.Thread(target=run, name="broadcast-fuzz", daemon=True)
    thread.start()
    assert ready.wait(60) and "url" in box, box.get("error", "the service did not start")
    try:
        yield str(box["url"])
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def accepts_what_the_document_allows(
    ctx: CheckContext, response: Response, case: Case[Any]
) -> bool | None:
    if response.status_code != 400:
        return None
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "BAD_REQUEST" and error["message"].startswith(NOT_A_TRANSACTION), (
        f"{case.operation.label}: a request the document allows was refused: {error}"
    )
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    accepts_what_the_document_allows,
]


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/broadcast"), ("GET", "/broadcast/status/{txid}")]
)
def test_the_service_accepts_what_the_document_allows(served: str, method: str, path: str) -> None:
    schema = schemathesis.openapi.from_path(DOC)
    strategy = schema[path][method].as_strategy(generation_mode=GenerationMode.POSITIVE)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(strategy)
        case.validate_response(case.call(base_url=served), checks=CHECKS)

    run()
