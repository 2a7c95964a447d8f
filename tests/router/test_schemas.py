"""The router's JSON Schemas are valid draft 2020-12 and agree with the code's vocabulary."""

from __future__ import annotations

import json

import pytest

from router.errors import ErrorCode, RouterError
from router.quotes import RouteKind
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


def test_route_kinds_match() -> None:
    doc = json.loads((SCHEMAS / "quote.result.json").read_text())
    assert doc["properties"]["kind"]["enum"] == [k.value for k in RouteKind]


def test_build_params_name_the_spec_fields_and_mark_the_aliases() -> None:
    """The spec's swap build request names; the previous release's are deprecated aliases."""
    doc = json.loads((SCHEMAS / "tx.build.params.json").read_text())
    assert doc["properties"]["funding_inputs"]["deprecated"] is True
    item = doc["$defs"]["funding_input"]["properties"]
    assert {"txid", "vout", "value", "script_hex", "token"} <= set(item)
    assert item["locking_script_hex"]["deprecated"] is True
    assert not doc["properties"]["funding"].get("deprecated", False)
