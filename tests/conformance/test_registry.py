"""Registry, prefix `/registry`: the registry entry's fields and types for the devnet's tokens
that publish one (by token ID and by symbol); null for an unknown token ID or symbol; `/all` an
array of entries, the empty array when there are none."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conformance.client import Ladle, assert_fields, is_hex64

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

# Registry entry.
REGISTRY_ENTRY = {
    "description": "string",
    "name": "string",
    "filemeta.actual_hash": "string",
    "filemeta.expected_hash": "string",
    "filemeta.source": "string",
    "token.category": "string",
    "token.decimals": "integer",
    "token.symbol": "string",
    "uris.icon": "string",
    "uris.web": "string",
}
UNKNOWN_ID = "00" * 32
UNKNOWN_SYMBOL = "NOSUCHTOKEN"


def _published(ladle: Ladle) -> list[dict[str, Any]]:
    """Devnet tokens whose on-chain registry matches its published hash."""
    tokens = [t for t in ladle.ledger["tokens"] if t["bcmr"] and not t["bcmr"]["mismatch"]]
    assert tokens, "the devnet publishes registries"
    return tokens


def _unpublished(ladle: Ladle) -> list[str]:
    return [t["category"] for t in ladle.ledger["tokens"] if not t["bcmr"]]


def _check_entry(entry: object, category: str) -> None:
    assert_fields(entry, REGISTRY_ENTRY, f"registry entry of {category}")
    assert isinstance(entry, dict)
    assert entry["token"]["category"] == category and is_hex64(category)
    for name in ("actual_hash", "expected_hash"):
        bytes.fromhex(entry["filemeta"][name])  # "string (hex)"
    for name in ("icon", "web"):
        assert entry["uris"][name].startswith(("http://", "https://", "ipfs://")), "a URL"


async def test_entry_by_token_id(ladle: Ladle, api: httpx.AsyncClient) -> None:
    for token in _published(ladle):
        r = await api.get(f"/registry/token/{token['category']}")
        assert r.status_code == 200, r.text
        entry = r.json()
        _check_entry(entry, token["category"])
        assert entry["name"] == token["name"]
        assert entry["token"]["symbol"] == token["symbol"]
        assert entry["token"]["decimals"] == token["decimals"]
        assert entry["filemeta"]["source"] == "onchain"


async def test_entry_by_symbol(ladle: Ladle, api: httpx.AsyncClient) -> None:
    symbols = [t["symbol"] for t in ladle.ledger["tokens"]]
    unique = [t for t in _published(ladle) if symbols.count(t["symbol"]) == 1]
    assert unique
    for token in unique:
        by_symbol = (await api.get(f"/registry/token/{token['symbol']}")).json()
        by_id = (await api.get(f"/registry/token/{token['category']}")).json()
        assert by_symbol == by_id


@pytest.mark.parametrize("category", [UNKNOWN_ID, UNKNOWN_SYMBOL], ids=["token-id", "symbol"])
async def test_entry_is_null_when_none_found(api: httpx.AsyncClient, category: str) -> None:
    r = await api.get(f"/registry/token/{category}")
    assert r.status_code == 200, f"{r.status_code} {r.text}"
    assert r.json() is None


async def test_entry_is_null_for_a_token_without_registry(
    ladle: Ladle, api: httpx.AsyncClient
) -> None:
    tokens = _unpublished(ladle)
    assert tokens, "the devnet has a token that publishes no registry"
    for category in tokens:
        r = await api.get(f"/registry/token/{category}")
        assert r.status_code == 200, r.text
        assert r.json() is None


async def test_all_is_an_array_of_entries(ladle: Ladle, api: httpx.AsyncClient) -> None:
    for token in _published(ladle):
        r = await api.get(f"/registry/token/{token['category']}/all")
        assert r.status_code == 200, r.text
        entries = r.json()
        assert isinstance(entries, list) and entries
        for entry in entries:
            _check_entry(entry, token["category"])
        assert "onchain" in {e["filemeta"]["source"] for e in entries}


@pytest.mark.parametrize("category", [UNKNOWN_ID, UNKNOWN_SYMBOL], ids=["token-id", "symbol"])
async def test_all_is_empty_when_none(api: httpx.AsyncClient, category: str) -> None:
    r = await api.get(f"/registry/token/{category}/all")
    assert r.status_code == 200, f"{r.status_code} {r.text}"
    assert r.json() == []
