"""The router's JSON Schemas are valid draft 2020-12 and agree with the code's vocabulary."""

from __future__ import annotations

import json

import pytest

from router.errors import ErrorCode, RouterError
from tests.router.schemas import SCHEMAS, Draft202012Validator, validator

NAMES = [
    "quote.params.json",
    "quote.result.json",
    "tx.build.params.json",
    "tx.build.result.json",
    "error.json",
]


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_2020_12(name: str) -> None:
    doc = json.loads((SCHEMAS / name).read_text())
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert doc["$id"].endswith("/" + name)
    Draft202012Validator.check_schema(doc)


def test_error_codes_match() -> None:
    doc = json.loads((SCHEMAS / "error.json").read_text())
    assert doc["properties"]["code"]["enum"] == [c.value for c in ErrorCode]
    check = validator("error.json")
    for code in ErrorCode:
        check.validate(RouterError(code, "why", {"k": 1}).to_json())
    check.validate(RouterError(ErrorCode.SLIPPAGE, "why").to_json())
    assert not check.is_valid({"code": "oops", "message": "x"})
    assert not check.is_valid({"code": "bad_request"})
