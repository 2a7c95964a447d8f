"""Responses of the real service validate against schemas/openapi-broadcast.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from devnet.service import Devnet
from tests.broadcast.helpers import ALICE, BOB, fund, pay

DOC = json.loads(
    (Path(__file__).resolve().parents[2] / "schemas" / "openapi-broadcast.json").read_text()
)


def check(instance: Any, name: str) -> None:
    schema = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


def response_schema(path: str, method: str, status: int) -> str:
    ref: str = DOC["paths"][path][method]["responses"][str(status)]["content"]["application/json"][
        "schema"
    ].get("$ref", "")
    return ref.rsplit("/", 1)[-1]


def test_every_reference_resolves() -> None:
    text = json.dumps(DOC)
    for name in DOC["components"]["schemas"]:
        check_schema = {"$ref": f"#/components/schemas/{name}", "components": DOC["components"]}
        jsonschema.Draft202012Validator.check_schema(check_schema)
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs <= set(DOC["components"]["schemas"])


async def test_responses_match_the_document(http: httpx.AsyncClient, net: Devnet) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)

    dry = await http.post("/broadcast", json={"tx": tx.hex(), "dry_run": True})
    check(dry.json(), "DryRunResult")
    ok = await http.post("/broadcast", json={"tx": tx.hex()})
    assert ok.status_code == 200
    check(ok.json(), "BroadcastAccepted")
    status = await http.get(f"/broadcast/status/{tx.txid_hex}")
    check(status.json(), "StatusRecord")

    double = pay(coin, ALICE.locking_bytecode, fee=900)
    rejected = await http.post("/broadcast", json={"tx": double.hex(), "diagnosis": True})
    assert rejected.status_code == 422
    assert response_schema("/broadcast", "post", 422) == "ErrorBody"
    check(rejected.json(), "ErrorBody")
    assert rejected.json()["diagnosis"]["conflicts"]

    dry_rejected = await http.post(
        "/broadcast", json={"tx": double.hex(), "dry_run": True, "diagnosis": True}
    )
    check(dry_rejected.json(), "DryRunResult")
    assert dry_rejected.json()["validation"]["status"] == "rejected"

    expensive = pay(coin, BOB.locking_bytecode, fee=30_000)
    protected = await http.post(
        "/broadcast", json={"tx": expensive.hex(), "protection": {"max_fee_per_byte": 1}}
    )
    assert protected.status_code == 422
    check(protected.json(), "ErrorBody")

    for response in (
        await http.post("/broadcast", content=b"{", headers={"content-type": "application/json"}),
        await http.get("/broadcast/status/" + "00" * 32),
        await http.post("/broadcast", json={"tx": "00", "dry_run": True}),
    ):
        body = response.json()
        check(body, "DryRunResult" if response.status_code == 200 else "ErrorBody")
