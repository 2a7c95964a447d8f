"""Pool listing, prefix `/tokenpool`: `{active: [pool entry]}` with the pool entry's seven fields
and types, the token (ID or symbol) and pkh filters and the `user` name of pkh; every active
pool in /tokenpool/pools; exactly the tokens with an active pool in /tokenpool/tokens."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conformance.client import Ladle, assert_fields, is_hex64

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

# Pool entry (element of `active`).
POOL_ENTRY = {
    "owner_p2pkh_addr": "string",
    "owner_pkh": "string",
    "sats": "integer",
    "token_id": "string",
    "tokens": "integer",
    "tx_pos": "integer",
    "txid": "string",
}


async def _active(api: httpx.AsyncClient, **params: str) -> list[dict[str, Any]]:
    r = await api.get("/tokenpool/pool/active", params=params)
    assert r.status_code == 200, f"{params}: {r.status_code} {r.text}"
    body = r.json()
    assert_fields(body, {"active": "array"}, "/tokenpool/pool/active")
    entries: list[dict[str, Any]] = body["active"]
    return entries


async def _all_active(ladle: Ladle, api: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Every active pool of every devnet token, through the Stable listing endpoint."""
    pools: list[dict[str, Any]] = []
    for token in ladle.token_ids:
        pools += await _active(api, token=token)
    return pools


def _check_entry(entry: dict[str, Any]) -> None:
    assert_fields(entry, POOL_ENTRY, "pool entry")
    assert is_hex64(entry["token_id"]) and is_hex64(entry["txid"])
    owner = entry["owner_pkh"]
    assert len(owner) == 40 and bytes.fromhex(owner), "20-byte public key hash, hex"
    assert entry["owner_p2pkh_addr"].startswith("bitcoincash:"), "a CashAddr"
    assert entry["sats"] > 0 and entry["tokens"] > 0 and entry["tx_pos"] >= 0


async def test_pool_active_by_token_id(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    entries = await _active(api, token=token)
    assert entries, "the busiest token has active pools"
    for entry in entries:
        _check_entry(entry)
        assert entry["token_id"] == token
    assert len({(e["txid"], e["tx_pos"]) for e in entries}) == len(entries)


async def test_pool_active_by_symbol(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    by_symbol = await _active(api, token=ladle.symbol_of(token))
    assert by_symbol == await _active(api, token=token)


async def test_pool_active_by_pkh(ladle: Ladle, api: httpx.AsyncClient) -> None:
    [first, *_] = await _active(api, token=ladle.busiest_token)
    owner = first["owner_pkh"]
    entries = await _active(api, pkh=owner)
    assert first in entries
    for entry in entries:
        _check_entry(entry)
        assert entry["owner_pkh"] == owner
    both = await _active(api, token=ladle.busiest_token, pkh=owner)
    assert both and all(e["token_id"] == ladle.busiest_token for e in both)
    assert all(e in entries for e in both)


async def test_pool_active_user_is_the_pkh(ladle: Ladle, api: httpx.AsyncClient) -> None:
    """ "the description also calls pkh `user`"."""
    [first, *_] = await _active(api, token=ladle.busiest_token)
    owner = first["owner_pkh"]
    assert await _active(api, user=owner) == await _active(api, pkh=owner)


async def test_pools_lists_every_active_pool(ladle: Ladle, api: httpx.AsyncClient) -> None:
    """ "every active pool, all tokens, at its latest state" (shape not shown: each active
    pool's txid appears in the answer)."""
    r = await api.get("/tokenpool/pools")
    assert r.status_code == 200, r.text
    text = r.text
    active = await _all_active(ladle, api)
    assert len({e["token_id"] for e in active}) >= 2
    missing = [f"{e['txid']}:{e['tx_pos']}" for e in active if e["txid"] not in text]
    assert not missing, f"{len(missing)} of {len(active)} active pools absent: {missing[:3]}"


async def test_tokens_lists_exactly_the_tokens_with_an_active_pool(
    ladle: Ladle, api: httpx.AsyncClient
) -> None:
    """ "token ids present in at least one active pool" (shape not shown: which of the devnet's
    token IDs occur in the answer)."""
    r = await api.get("/tokenpool/tokens")
    assert r.status_code == 200, r.text
    listed = {t for t in ladle.token_ids if t in r.text}
    with_pool = {e["token_id"] for e in await _all_active(ladle, api)}
    assert with_pool, "the devnet has active pools"
    assert listed == with_pool
