"""Oracle, prefix `/oracle`: the history's entry fields and its required `start`, the closest
price's six fields for the devnet's feed (at now, the default, and at an earlier timestamp), and
null for a token ID without oracle data. Expected values come from the devnet's ledger."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conformance.client import Ladle, assert_fields, is_hex64

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

# Oracle price entry, history (array elements).
PRICE_ENTRY = {
    "time": "integer",
    "price": "integer",
    "txid": "string",
    "blockhash": "string",
    "sequence": "integer",
}
# Oracle closest price.
CLOSEST = {
    "oracle_timestamp": "integer",
    "oracle_price": "integer",
    "oracle_sequence": "integer",
    "token_id": "string",
    "txid": "string",
    "blockhash": "string",
}
NO_ORACLE = "ab" * 32


async def test_history_entries(ladle: Ladle, api: httpx.AsyncClient) -> None:
    feed = ladle.oracle_feed
    start = ladle.ledger["chain"]["start_time"] - 86400
    r = await api.get(f"/oracle/feed/{feed}/history", params={"start": start})
    assert r.status_code == 200, r.text
    entries = r.json()
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert_fields(entry, PRICE_ENTRY, "oracle price entry")
        assert is_hex64(entry["txid"]) and is_hex64(entry["blockhash"])
    confirmed = {u["txid"]: u for u in ladle.oracle_updates if u["height"] is not None}
    assert {e["txid"] for e in entries} <= set(confirmed) | {
        u["txid"] for u in ladle.ledger["mempool"]["oracle_updates"]
    }
    for entry in entries:
        if entry["txid"] in confirmed:
            update = confirmed[entry["txid"]]
            assert (entry["price"], entry["sequence"]) == (update["price"], update["sequence"])
    # end defaults to now
    ended = await api.get(
        f"/oracle/feed/{feed}/history", params={"start": start, "end": int(time.time()) + 60}
    )
    assert ended.json() == entries


async def test_history_with_a_stepsize(ladle: Ladle, api: httpx.AsyncClient) -> None:
    feed = ladle.oracle_feed
    start = ladle.ledger["chain"]["start_time"] - 86400
    r = await api.get(f"/oracle/feed/{feed}/history", params={"start": start, "stepsize": 86400})
    assert r.status_code == 200, r.text
    entries = r.json()
    assert isinstance(entries, list) and entries
    for entry in entries:
        assert_fields(entry, PRICE_ENTRY, "oracle price entry")


async def test_history_requires_start(ladle: Ladle, api: httpx.AsyncClient) -> None:
    r = await api.get(f"/oracle/feed/{ladle.oracle_feed}/history")
    assert 400 <= r.status_code < 500, f"start is required: {r.status_code} {r.text}"


async def test_closest_price_of_the_devnet_feed(ladle: Ladle, api: httpx.AsyncClient) -> None:
    feed = ladle.oracle_feed
    r = await api.get("/oracle/feed/closest", params={"token_id": feed})
    assert r.status_code == 200, r.text
    closest = r.json()
    assert_fields(closest, CLOSEST, "oracle closest price")
    assert set(closest) == set(CLOSEST), "the closest price is these six fields"
    assert closest["token_id"] == feed
    assert is_hex64(closest["txid"]) and is_hex64(closest["blockhash"])
    latest = ladle.oracle_updates[-1]  # timestamp defaults to now: the last update
    assert (closest["oracle_price"], closest["oracle_sequence"], closest["txid"]) == (
        latest["price"],
        latest["sequence"],
        latest["txid"],
    )
    assert closest["oracle_timestamp"] == latest["timestamp"]


async def test_closest_price_at_an_earlier_timestamp(ladle: Ladle, api: httpx.AsyncClient) -> None:
    feed = ladle.oracle_feed
    updates = ladle.oracle_updates
    assert len(updates) >= 3
    earlier = updates[len(updates) // 2]
    r = await api.get(
        "/oracle/feed/closest", params={"token_id": feed, "timestamp": earlier["timestamp"]}
    )
    assert r.status_code == 200, r.text
    closest = r.json()
    assert_fields(closest, CLOSEST, "oracle closest price")
    assert closest["txid"] == earlier["txid"]
    assert closest["oracle_sequence"] == earlier["sequence"]


async def test_closest_is_null_without_oracle_data(api: httpx.AsyncClient) -> None:
    r = await api.get("/oracle/feed/closest", params={"token_id": NO_ORACLE})
    assert r.status_code == 200, r.text
    assert r.json() is None
