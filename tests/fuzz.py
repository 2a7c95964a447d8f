"""Schema-driven fuzzing shared by the data and broadcast APIs' tests: schemathesis draws
requests an OpenAPI operation allows (positive mode) and each answer of the real server must
pass the standard checks plus the API's own `accepts` check (which refusals of a schema-valid
request its document declares)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import CheckFunction, not_a_server_error
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)


def fuzz(
    operation: APIOperation[Any, Any, Any, Any],
    base_url: str,
    accepts: CheckFunction,
    examples: int,
) -> None:
    """`examples` schema-valid requests to `operation` at `base_url`: none may be a server
    error, answer with an undocumented status or off its schema, or fail `accepts`."""
    checks = [not_a_server_error, status_code_conformance, response_schema_conformance, accepts]
    strategy = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case: Case[Any] = data.draw(strategy)
        case.validate_response(case.call(base_url=base_url), checks=checks)

    run()


def error_of(response: Response) -> dict[str, Any]:
    """The `error` object of a JSON error answer."""
    error: dict[str, Any] = response.json()["error"]
    return error
