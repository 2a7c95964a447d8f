"""Input discipline of the HTTP API over a real uvicorn server on loopback: every request that
is not the documented shape is refused with its documented 4xx and the `{error: {code,
message}}` body, nothing is repaired (no trimming, no guessing a charset), and nothing yields a
5xx or a traceback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from devnet.service import Devnet
from tests.broadcast.helpers import ALICE, BOB, devnet, fund, pay, served

DOC = json.loads(
    (Path(__file__).resolve().parents[2] / "schemas" / "openapi-broadcast.json").read_text()
)
JSON = {"content-type": "application/json"}
DRY = b'{"tx": "00", "dry_run": true}'  # reaches the service, sends nothing, answers 200


@pytest.fixture
async def net() -> AsyncIterator[Devnet]:
    network = devnet(1)
    await network.start()
    yield network
    await network.stop()


@pytest.fixture
async def http(net: Devnet, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with served(net, tmp_path / "r.sqlite") as client:
        yield client


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text
    message: str = body["error"]["message"]
    return message


# --- tx is exact ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tx", [" 00", "00 ", "00\n", "\t00", "\n", " ", "00 00", "0x00", "００"])
async def test_tx_is_taken_as_sent_not_trimmed(http: httpx.AsyncClient, tx: str) -> None:
    body = json.dumps({"tx": tx, "dry_run": True}).encode()
    response = await http.post("/broadcast", content=body, headers=JSON)
    refused(response, 400, "BAD_REQUEST")


async def test_whitespace_around_a_real_transaction_is_refused(
    http: httpx.AsyncClient, net: Devnet
) -> None:
    coin = await fund(net, ALICE, 30_000)
    tx = pay(coin, BOB.locking_bytecode).hex()
    for sent in (tx + " ", " " + tx, tx + "\n", tx + "\r\n"):
        response = await http.post("/broadcast", json={"tx": sent})
        assert "hexadecimal" in refused(response, 400, "BAD_REQUEST")
    assert not net.nodes[0].mempool.entries  # nothing was sent
    ok = await http.post("/broadcast", json={"tx": tx.upper(), "dry_run": True})
    assert ok.status_code == 200 and ok.json()["validation"]["status"] == "valid"


# --- Content-Type --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        'application/json; charset="utf-8"',
        "Application/Json ; Charset=Utf-8",
        "application/json;",
    ],
)
async def test_json_in_utf8_is_accepted(http: httpx.AsyncClient, content_type: str) -> None:
    response = await http.post("/broadcast", content=DRY, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    assert response.json()["dry_run"] is True


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=latin-1",
        "application/json; charset=iso-8859-1",
        "application/json; charset=utf-16",
        "application/json; charset=utf8",
        "application/json; charset=",
        "application/json; charset=utf-8; charset=latin-1",
        "application/json; boundary=x",
        "application/json; charset",
        "text/plain",
        "text/json",
        "application/jsonx",
        "application/json-patch+json",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ],
)
async def test_other_media_types_and_charsets_are_415(
    http: httpx.AsyncClient, content_type: str
) -> None:
    response = await http.post("/broadcast", content=DRY, headers={"content-type": content_type})
    refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_missing_or_repeated_content_type_is_415(http: httpx.AsyncClient) -> None:
    # httpx adds no Content-Type for raw content
    refused(await http.post("/broadcast", content=DRY), 415, "UNSUPPORTED_MEDIA_TYPE")
    twice = [("content-type", "application/json"), ("content-type", "text/plain")]
    response = await http.post("/broadcast", content=DRY, headers=twice)
    refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_latin1_body_is_not_read_as_utf8(http: httpx.AsyncClient) -> None:
    body = '{"tx": "00", "dry_run": true, "é": 1}'.encode("latin-1")
    declared = {"content-type": "application/json; charset=latin-1"}
    refused(
        await http.post("/broadcast", content=body, headers=declared), 415, "UNSUPPORTED_MEDIA_TYPE"
    )
    # undeclared, the same bytes are invalid UTF-8: a 400, not a misread
    refused(await http.post("/broadcast", content=body, headers=JSON), 400, "BAD_REQUEST")


# --- the body ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"null",
        b"[]",
        b'["tx"]',
        b'"00"',
        b"5",
        b"{",
        b'{"tx": "00"} x',
        b'\xef\xbb\xbf{"tx": "00", "dry_run": true}',  # a UTF-8 byte-order mark
        b'{"tx": "00", "dry_run": true, "\\ud800": 1}',  # a lone surrogate
        b'{"tx": "\xff\xfe"}',  # invalid UTF-8
        b'{"tx": null}',
        b'{"tx": ["00"]}',
        b'{"dry_run": true}',
        b'{"tx": "00", "dry_run": true, "dryrun": true}',
        b'{"tx": "00", "dry_run": true, "extra": null}',
        b'{"tx": "00", "dry_run": null}',
        b'{"tx": "00", "dry_run": "true"}',
        b'{"tx": "00", "dry_run": 1}',
        b'{"tx": "00", "dry_run": true, "diagnosis": "yes"}',
        b'{"tx": "00", "dry_run": true, "diagnosis": null}',
        b'{"tx": "00", "dry_run": true, "protection": []}',
        b'{"tx": "00", "dry_run": true, "protection": "on"}',
        b'{"tx": "00", "dry_run": true, "protection": true}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee": 1}}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee_per_byte": -1}}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee_per_byte": "1"}}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee_per_byte": true}}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee_per_byte": 1e400}}',
        b'{"tx": "00", "dry_run": true, "protection": {"max_fee_per_byte": 2100000000000001}}',
        b'{"tx": "00", "dry_run": true, "protection": {"reject_token_burn": null}}',
        b'{"tx": "00", "dry_run": true, "protection": {"reject_nft_burn": 1}}',
    ],
)
async def test_malformed_bodies_are_400(http: httpx.AsyncClient, body: bytes) -> None:
    refused(await http.post("/broadcast", content=body, headers=JSON), 400, "BAD_REQUEST")


async def test_oversized_bodies_are_413(http: httpx.AsyncClient) -> None:
    body = b'{"tx": "' + b"00" * 500_000 + b'"}'  # 1,000,010 bytes: just above the limit
    refused(await http.post("/broadcast", content=body, headers=JSON), 413, "PAYLOAD_TOO_LARGE")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"tx": "'
        for _ in range(40):
            yield b"00" * 20_000
        yield b'"}'

    response = await http.post("/broadcast", content=chunks(), headers=JSON)
    refused(response, 413, "PAYLOAD_TOO_LARGE")


# --- the status path -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "txid",
    [
        "xyz",
        "ab" * 31 + "a",
        "ab" * 32 + "a",
        "ab" * 33,
        "g" * 64,
        " " + "ab" * 31 + "a",
        "%20" + "ab" * 32,
        "ab" * 32 + "%0A",
        "%ff" * 64,
        "%00" * 64,
    ],
)
async def test_invalid_txids_are_400(http: httpx.AsyncClient, txid: str) -> None:
    refused(await http.get(f"/broadcast/status/{txid}"), 400, "BAD_REQUEST")


async def test_unknown_txid_is_404(http: httpx.AsyncClient) -> None:
    for txid in ("ab" * 32, "AB" * 32):
        message = refused(await http.get(f"/broadcast/status/{txid}"), 404, "TRANSACTION_NOT_FOUND")
        assert "ab" * 32 in message


# --- the OpenAPI document says what the server accepts -------------------------------------------


def schema_valid(body: dict[str, Any]) -> bool:
    schema = {"$ref": "#/components/schemas/BroadcastRequest", "components": DOC["components"]}
    return bool(jsonschema.Draft202012Validator(schema).is_valid(body))


async def test_the_request_schema_is_what_the_parser_accepts(
    http: httpx.AsyncClient, net: Devnet
) -> None:
    """Schema-valid bodies are never refused as malformed, schema-invalid ones always are (a
    dry run of a real transaction, so nothing is sent whatever the verdict)."""
    coin = await fund(net, ALICE, 30_000)
    tx = pay(coin, BOB.locking_bytecode).hex()
    base: dict[str, Any] = {"tx": tx, "dry_run": True}
    variants: list[dict[str, Any]] = [
        {},
        {"tx": tx.upper()},
        {"diagnosis": True},
        {"diagnosis": False},
        {"protection": None},
        {"protection": {}},
        {"protection": {"max_fee_per_byte": None}},
        {"protection": {"max_fee_per_byte": 0}},
        {"protection": {"max_fee_per_byte": 1.5}},
        {"protection": {"max_fee_per_byte": 2_100_000_000_000_000}},
        {"protection": {"reject_token_burn": True, "reject_nft_burn": False}},
        {"tx": tx + " "},
        {"tx": " " + tx},
        {"tx": tx + "\n"},
        {"tx": tx[:-1]},
        {"tx": ""},
        {"tx": None},
        {"tx": 5},
        {"dry_run": None},
        {"dry_run": "true"},
        {"dry_run": 0},
        {"diagnosis": None},
        {"protection": []},
        {"protection": "on"},
        {"protection": {"max": 1}},
        {"protection": {"max_fee_per_byte": -0.5}},
        {"protection": {"max_fee_per_byte": 2_100_000_000_000_001}},
        {"protection": {"max_fee_per_byte": "1"}},
        {"protection": {"max_fee_per_byte": False}},
        {"protection": {"reject_nft_burn": None}},
        {"unknown": 1},
    ]
    agreed = 0
    for variant in variants:
        body = {**base, **variant}
        response = await http.post("/broadcast", json=body)
        assert response.status_code < 500, (body, response.text)
        if schema_valid(body):
            # 200, or 422 PROTECTION_REJECTED for a tight fee cap: never "malformed"
            assert response.status_code in (200, 422), (variant, response.text)
        else:
            assert response.status_code == 400, (variant, response.text)
        agreed += 1
    missing = {k: v for k, v in base.items() if k != "tx"}
    assert not schema_valid(missing)
    refused(await http.post("/broadcast", json=missing), 400, "BAD_REQUEST")
    assert agreed == len(variants)
