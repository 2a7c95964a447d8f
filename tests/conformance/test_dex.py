"""Analytics, prefix `/dex`: the spec's Endpoints table row by row (path, query, top-level fields
and their JSON types where the spec shows them), then its resources' element fields, stated
defaults (candlestick stepsize 3600, periods of 30 days and 24 hours) and symbol acceptance."""

from __future__ import annotations

import itertools
import time
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.conformance.client import Ladle, assert_fields, has_type, is_hex64

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

DAY = 86400

# Resources and their fields (spec: "Resources and their fields").
CONTRACT_COUNT = {"active": "integer", "ended": "integer"}
AGGREGATED_YIELD = {"apy": "string", "pools": "integer"}
CURRENT_PRICE = {"price": "number"}
CANDLESTICK = {
    "open": "number",
    "high": "number",
    "low": "number",
    "close": "number",
    "time": "integer",
    "transaction_count": "integer",
    "volume_sats": "integer",
    "volume_tokens": "integer",
}
PRICE_POINT = {"avg": "number", "max": "number", "min": "number", "time": "integer"}
VALUE_LOCKED_ALL = {"satoshis": "integer"}
VALUE_LOCKED_ONE = {"satoshis": "integer", "token_amount": "integer", "token_id": "string"}
VOLUME_ALL = {"total_volume_sats": "integer", "period_start": "integer", "period_end": "integer"}
VOLUME_ONE = {
    "volume_sats": "integer",
    "volume_tokens": "integer",
    "token_id": "string",
    "period_start": "integer",
    "period_end": "integer",
}
POOL_LIST = {"active": "array"}
CANDLESTICKS = {"candlesticks": "array"}
HISTORY = {"history": "array"}
NOT_SHOWN: dict[str, str] = {}  # "Response shape …: not shown" — 200 with a JSON body

# The Endpoints table of `/dex`: (path, query, top-level fields). Placeholders: {token} a real
# token ID of the devnet, {symbol} its symbol, {pool_id} one of its pools, {pkh} that pool's
# owner, {ts} a timestamp inside the history, {start}/{end} a period around it.
ENDPOINTS: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("/dex/contract/count", {}, CONTRACT_COUNT),
    ("/dex/contract/count/{token}", {}, CONTRACT_COUNT),
    ("/dex/contract/count/{symbol}", {}, CONTRACT_COUNT),
    ("/dex/pool/active", {"token": "{token}"}, POOL_LIST),
    ("/dex/pool/active", {"pkh": "{pkh}"}, POOL_LIST),
    ("/dex/pool/active", {"token": "{token}", "pkh": "{pkh}"}, POOL_LIST),
    ("/dex/pool/aggregated_apy", {}, AGGREGATED_YIELD),
    ("/dex/pool/aggregated_apy", {"token": "{token}"}, AGGREGATED_YIELD),
    ("/dex/pool/aggregated_apy", {"pkh": "{pkh}"}, AGGREGATED_YIELD),
    ("/dex/pool/aggregated_apy", {"start": "{start}", "end": "{end}"}, AGGREGATED_YIELD),
    ("/dex/pool/history/{pool_id}", {}, NOT_SHOWN),
    ("/dex/pool/history/{pool_id}", {"start": "{start}"}, NOT_SHOWN),
    ("/dex/price/{token}/at/{ts}", {}, NOT_SHOWN),
    ("/dex/price/{token}/candlesticks", {}, CANDLESTICKS),
    ("/dex/price/{token}/candlesticks", {"start": "{start}", "end": "{end}"}, CANDLESTICKS),
    ("/dex/price/{token}/candlesticks", {"stepsize": "86400"}, CANDLESTICKS),
    ("/dex/price/{token}/current", {}, CURRENT_PRICE),
    ("/dex/price/{token}/history", {}, HISTORY),
    (
        "/dex/price/{token}/history",
        {"start": "{start}", "end": "{end}", "stepsize": "3600"},
        HISTORY,
    ),
    ("/dex/token/{token}/first_pool", {}, NOT_SHOWN),
    ("/dex/tokens/list_by_volume", {}, NOT_SHOWN),
    ("/dex/tokens/list_cached", {}, NOT_SHOWN),
    ("/dex/tokens/list_cached", {"limit": "2", "offset": "1"}, NOT_SHOWN),
    ("/dex/tokens/list_cached_by_ids", {"ids": "{token}"}, NOT_SHOWN),
    ("/dex/tokens/search_by_volume", {"search_query": "{symbol}"}, NOT_SHOWN),
    ("/dex/tokens/search_cached", {"q": "{symbol}"}, NOT_SHOWN),
    ("/dex/tokens/search_cached", {"q": "{symbol}", "limit": "2", "offset": "0"}, NOT_SHOWN),
    ("/dex/tx/latest", {}, NOT_SHOWN),
    ("/dex/tx/latest", {"limit": "3", "offset": "1", "token": "{token}"}, NOT_SHOWN),
    ("/dex/user/unique_addresses", {}, NOT_SHOWN),
    ("/dex/valuelocked", {}, VALUE_LOCKED_ALL),
    ("/dex/valuelocked", {"time": "{ts}"}, VALUE_LOCKED_ALL),
    ("/dex/valuelocked/{token}", {}, VALUE_LOCKED_ONE),
    ("/dex/valuelocked/{token}", {"time": "{ts}"}, VALUE_LOCKED_ONE),
    ("/dex/volume", {}, VOLUME_ALL),
    ("/dex/volume", {"start": "{start}", "end": "{end}"}, VOLUME_ALL),
    ("/dex/volume/{token}", {}, VOLUME_ONE),
    ("/dex/volume/{token}", {"start": "{start}", "end": "{end}"}, VOLUME_ONE),
]


async def _first_pool(api: httpx.AsyncClient, token: str) -> dict[str, Any]:
    r = await api.get("/dex/pool/active", params={"token": token})
    assert r.status_code == 200, r.text
    pools: list[dict[str, Any]] = r.json()["active"]
    assert pools, "the devnet's busiest token has active pools"
    return pools[0]


async def _values(ladle: Ladle, api: httpx.AsyncClient) -> dict[str, str]:
    token = ladle.busiest_token
    pool = await _first_pool(api, token)
    first, last = ladle.ledger["chain"]["start_time"], ladle.ledger["chain"]["end_time"]
    (created,) = [p for p in ladle.ledger["pools"] if p["category"] == token][:1]
    return {
        "token": token,
        "symbol": ladle.symbol_of(token),
        "pool_id": str(created["pool_id"]),
        "pkh": pool["owner_pkh"],
        "ts": str((first + last) // 2),
        "start": str(first),
        "end": str(last + 3600),
    }


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


@pytest.mark.parametrize(
    ("path", "query", "fields"),
    ENDPOINTS,
    ids=[f"{p}?{'&'.join(q)}" for p, q, _ in ENDPOINTS],
)
async def test_endpoint_answers_with_the_stated_fields(
    ladle: Ladle,
    api: httpx.AsyncClient,
    path: str,
    query: dict[str, str],
    fields: dict[str, str],
) -> None:
    values = await _values(ladle, api)
    url = _fill(path, values)
    params = {k: _fill(v, values) for k, v in query.items()}
    r = await api.get(url, params=params)
    assert r.status_code == 200, f"{url} {params}: {r.status_code} {r.text}"
    body = r.json()
    if fields:
        assert_fields(body, fields, url)


async def test_pool_entries_and_filters_of_dex_pool_active(
    ladle: Ladle, api: httpx.AsyncClient
) -> None:
    token = ladle.busiest_token
    pool = await _first_pool(api, token)
    for params, key, want in (
        ({"token": token}, "token_id", token),
        ({"pkh": pool["owner_pkh"]}, "owner_pkh", pool["owner_pkh"]),
    ):
        r = await api.get("/dex/pool/active", params=params)
        assert r.status_code == 200, r.text
        entries = r.json()["active"]
        assert entries
        assert all(e[key] == want for e in entries), params
    # "same as the pool listing endpoint"
    for params in ({"token": token}, {"pkh": pool["owner_pkh"]}):
        dex = (await api.get("/dex/pool/active", params=params)).json()
        listing = (await api.get("/tokenpool/pool/active", params=params)).json()
        assert dex == listing, params


async def test_contract_count_accepts_a_symbol_and_counts_active_pools(
    ladle: Ladle, api: httpx.AsyncClient
) -> None:
    token = ladle.busiest_token
    by_id = (await api.get(f"/dex/contract/count/{token}")).json()
    by_symbol = (await api.get(f"/dex/contract/count/{ladle.symbol_of(token)}")).json()
    assert by_id == by_symbol
    active = (await api.get("/dex/pool/active", params={"token": token})).json()["active"]
    assert by_id["active"] == len(active)
    total = (await api.get("/dex/contract/count")).json()
    assert total["active"] >= by_id["active"] and total["ended"] >= by_id["ended"]


async def test_aggregated_yield_defaults(ladle: Ladle, api: httpx.AsyncClient) -> None:
    """No parameters: all users and tokens; start defaults to 30 days before end, end to now."""
    everything = (await api.get("/dex/pool/aggregated_apy")).json()
    Decimal(everything["apy"])  # "string (decimal number)"
    one = (await api.get("/dex/pool/aggregated_apy", params={"token": ladle.busiest_token})).json()
    Decimal(one["apy"])
    assert 0 < one["pools"] <= everything["pools"]
    # "Now" is the server's second: the two answers are compared when they fell in one second
    # of one index height.
    for _ in range(10):
        end = int(time.time())
        default = await api.get("/dex/pool/aggregated_apy")
        explicit = await api.get(
            "/dex/pool/aggregated_apy", params={"start": end - 30 * DAY, "end": end}
        )
        heights = {x.headers["x-index-height"] for x in (default, explicit)}
        if int(time.time()) == end and len(heights) == 1:
            assert explicit.json() == default.json()
            break
    else:
        raise AssertionError("no two answers within one second and one index height")


async def test_candlesticks_default_stepsize_is_3600(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    r = await api.get(f"/dex/price/{token}/candlesticks")
    candles = r.json()["candlesticks"]
    assert len(candles) >= 2, "the busiest token trades in several hours of the history"
    for candle in candles:
        assert_fields(candle, CANDLESTICK, "candlestick")
        assert candle["low"] <= min(candle["open"], candle["close"])
        assert candle["high"] >= max(candle["open"], candle["close"])
        assert candle["transaction_count"] >= 1, "intervals with no trades are omitted"
    times = [c["time"] for c in candles]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g > 0 and g % 3600 == 0 for g in gaps), gaps
    # The defaults, stated explicitly: stepsize 3600 and the 30 days up to now. "Now" is the
    # server's second, so the three answers are compared when they fell in one second of one
    # index height (blocks may carry timestamps a little ahead of the wall clock).
    url = f"/dex/price/{token}/candlesticks"
    for _ in range(10):
        now = int(time.time())
        default = await api.get(url)
        explicit = await api.get(url, params={"stepsize": 3600})
        period = await api.get(url, params={"start": now - 30 * DAY, "end": now})
        heights = {x.headers["x-index-height"] for x in (default, explicit, period)}
        if int(time.time()) == now and len(heights) == 1:
            assert explicit.json() == default.json()
            assert period.json() == default.json()
            break
    else:
        raise AssertionError("no three answers within one second and one index height")


async def test_candlesticks_follow_a_given_stepsize(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    r = await api.get(f"/dex/price/{token}/candlesticks", params={"stepsize": DAY})
    candles = r.json()["candlesticks"]
    assert candles
    times = [c["time"] for c in candles]
    assert all(b - a > 0 and (b - a) % DAY == 0 for a, b in itertools.pairwise(times))
    hourly = (await api.get(f"/dex/price/{token}/candlesticks")).json()["candlesticks"]
    assert sum(c["transaction_count"] for c in candles) == sum(
        c["transaction_count"] for c in hourly
    )
    assert sum(c["volume_sats"] for c in candles) == sum(c["volume_sats"] for c in hourly)


async def test_price_history_points(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    history = (await api.get(f"/dex/price/{token}/history")).json()["history"]
    assert history
    for point in history:
        assert_fields(point, PRICE_POINT, "price history point")
        assert point["min"] <= point["avg"] <= point["max"]


async def test_current_price_is_a_positive_number(ladle: Ladle, api: httpx.AsyncClient) -> None:
    body = (await api.get(f"/dex/price/{ladle.busiest_token}/current")).json()
    assert has_type(body["price"], "number") and body["price"] > 0


async def test_value_locked(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    one = (await api.get(f"/dex/valuelocked/{token}")).json()
    assert one["token_id"] == token and is_hex64(one["token_id"])
    pools = (await api.get("/dex/pool/active", params={"token": token})).json()["active"]
    assert one["satoshis"] == sum(p["sats"] for p in pools)
    assert one["token_amount"] == sum(p["tokens"] for p in pools)
    total = (await api.get("/dex/valuelocked")).json()
    assert total["satoshis"] >= one["satoshis"] > 0


async def test_volume_default_period_is_24_hours(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    for url in ("/dex/volume", f"/dex/volume/{token}"):
        before = int(time.time())
        body = (await api.get(url)).json()
        after = int(time.time())
        assert body["period_end"] - body["period_start"] == DAY, body
        assert before - 1 <= body["period_end"] <= after + 1, "end defaults to now"
    one = (await api.get(f"/dex/volume/{token}")).json()
    assert one["token_id"] == token
    total = (await api.get("/dex/volume")).json()
    assert total["total_volume_sats"] >= one["volume_sats"]


async def test_volume_reports_the_asked_period(ladle: Ladle, api: httpx.AsyncClient) -> None:
    token = ladle.busiest_token
    start = ladle.ledger["chain"]["start_time"]
    end = ladle.ledger["chain"]["end_time"] + 3600
    whole = (await api.get(f"/dex/volume/{token}", params={"start": start, "end": end})).json()
    assert (whole["period_start"], whole["period_end"]) == (start, end)
    trades = [
        t
        for t in ladle.ledger["trades"]
        if t["category"] == token and t["height"] is not None and start <= t["time"] <= end
    ]
    assert whole["volume_sats"] > 0 and len(trades) > 0
