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
from schemathesis import Case, CheckContext
from schemathesis.core.transport import Response

from broadcast.cli import start_server
from tests.broadcast.helpers import config_for, devnet
from tests.fuzz import error_of, fuzz

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
    error = error_of(response)
    assert error["code"] == "BAD_REQUEST" and error["message"].startswith(NOT_A_TRANSACTION), (
        f"{case.operation.label}: a request the document allows was refused: {error}"
    )
    return None


@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/broadcast"), ("GET", "/broadcast/status/{txid}")]
)
def test_the_service_accepts_what_the_document_allows(served: str, method: str, path: str) -> None:
    schema = schemathesis.openapi.from_path(DOC)
    fuzz(schema[path][method], served, accepts_what_the_document_allows, EXAMPLES)
