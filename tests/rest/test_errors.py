"""Bad input is a 400 that names the parameter, unknown things are 404s, wrong methods 405s:
always the JSON error shape (checked against the OpenAPI Error schema by the client hook)."""

from __future__ import annotations

import httpx
import pytest

from tests.rest.conftest import World

UNKNOWN = "ab" * 32


def some_token(world: World) -> str:
    return world.oracle.categories()[0]


async def error(client: httpx.AsyncClient, url: str, status: int) -> dict[str, str]:
    r = await client.get(url)
    assert r.status_code == status, (url, r.status_code, r.text)
    assert r.headers["content-type"] == "application/json"
    assert r.headers["cache-control"] == "no-store"
    body: dict[str, dict[str, str]] = r.json()
    assert set(body) == {"error"}
    assert body["error"]["message"]
    return body["error"]


BAD_QUERIES = [
    # (url, parameter named in the answer)
    ("/dex/volume?start=abc", "start"),
    ("/dex/volume?start=1.5", "start"),
    ("/dex/volume?start=1e9", "start"),
    ("/dex/volume?start=%201", "start"),
    ("/dex/volume?start=-5", "start"),
    ("/dex/volume?end=-1", "end"),
    ("/dex/volume?end=99999999999999999999999", "end"),
    ("/dex/volume?start=", "start"),
    ("/dex/volume?start=1&start=2", "start"),
    ("/dex/volume?bogus=1", "bogus"),
    ("/dex/tx/latest?limit=501", "limit"),
    ("/dex/tx/latest?limit=0", "limit"),
    ("/dex/tx/latest?limit=-1", "limit"),
    ("/dex/tx/latest?offset=100001", "offset"),
    ("/dex/tx/latest?token=" + "a" * 63, "token"),
    ("/dex/tx/latest?token=" + "a" * 65, "token"),
    ("/dex/tokens/list_cached?limit=1001", "limit"),
    ("/dex/tokens/list_cached?by=popularity", "by"),
    ("/dex/tokens/list_cached?order=up", "order"),
    ("/dex/tokens/list_cached_by_ids", "ids"),
    ("/dex/tokens/list_cached_by_ids?ids=" + "a" * 63, "ids"),
    ("/dex/tokens/list_cached_by_ids?ids=" + ",".join(["ab" * 32] * 101), "ids"),
    ("/dex/tokens/search_cached", "q"),
    ("/dex/tokens/search_cached?q=%20%20", "q"),
    ("/dex/tokens/search_cached?q=" + "x" * 65, "q"),
    ("/dex/tokens/search_cached?limit=101&q=a", "limit"),
    ("/dex/tokens/search_by_volume", "search_query"),
    ("/tokenpool/pool/active", "token"),
    ("/tokenpool/pool/active?pkh=" + "a" * 39, "pkh"),
    ("/dex/pool/active?pkh=zz" + "a" * 38, "pkh"),
    ("/dex/pool/active?user=" + "a" * 41, "user"),
    ("/tokenpool/pool/active?user=" + "a" * 40 + "&pkh=" + "a" * 40, "user"),
    ("/dex/pool/active?pkh=" + "a" * 40 + "&user=" + "a" * 40, "user"),
    ("/tokenpool/pools?limit=10001", "limit"),
    ("/dex/pool/aggregated_apy?start=100&end=200", "start"),
    ("/dex/pool/aggregated_apy?start=300&end=200", "start"),
    ("/dex/pool/history/" + "a" * 64, "pool_id"),
    ("/dex/pool/history/" + "a" * 63 + ":0", "pool_id"),
    ("/dex/pool/history/" + "a" * 64 + ":-1", "pool_id"),
    ("/dex/pool/history/" + "a" * 64 + ":01", "pool_id"),
    ("/dex/pool/history/" + "a" * 64 + ":4294967296", "pool_id"),
    ("/dex/pool/history/" + "a" * 64 + ":0?start=x", "start"),
    ("/dex/price/" + "a" * 63 + "/current", "token"),
    ("/dex/price/{t}/at/-5", "timestamp"),
    ("/dex/price/{t}/at/noon", "timestamp"),
    ("/dex/price/{t}/history?stepsize=59", "stepsize"),
    ("/dex/price/{t}/history?stepsize=abc", "stepsize"),
    ("/dex/valuelocked?time=-1", "time"),
    ("/dex/valuelocked/{t}?time=soon", "time"),
    ("/dex/contract/count?token=x", "token"),
    ("/dex/user/unique_addresses?limit=5", "limit"),
]


EMPTY_WINDOWS = [
    # start after end: nothing happened in the window, answered as such
    ("/dex/volume?start=200&end=100", {"total_volume_sats": 0}),
    ("/dex/volume/{t}?start=200&end=100", {"volume_sats": 0, "volume_tokens": 0}),
    ("/dex/tokens/list_by_volume?start=10&end=5", {"period_start": 10, "period_end": 5}),
    ("/dex/price/{t}/candlesticks?start=9&end=8", {"candlesticks": []}),
    ("/dex/price/{t}/history?start=9&end=8", {"history": []}),
]


@pytest.mark.parametrize(("url", "want"), EMPTY_WINDOWS)
async def test_start_after_end_is_an_empty_window(
    client: httpx.AsyncClient, world: World, url: str, want: dict[str, object]
) -> None:
    r = await client.get(url.replace("{t}", some_token(world)))
    assert r.status_code == 200, r.text
    body = r.json()
    assert {k: body[k] for k in want} == want


async def test_many_intervals_are_answered(client: httpx.AsyncClient, world: World) -> None:
    """Cost follows the trades, not the intervals (empty ones are omitted): no bound."""
    t = some_token(world)
    url = f"/dex/price/{t}/candlesticks?start=0&end={world.now}&stepsize=60"
    r = await client.get(url)
    assert r.status_code == 200, r.text
    hourly = await client.get(f"/dex/price/{t}/candlesticks?start=0&end={world.now}&stepsize=3600")
    count = sum(c["transaction_count"] for c in r.json()["candlesticks"])
    assert count == sum(c["transaction_count"] for c in hourly.json()["candlesticks"]) > 0


@pytest.mark.parametrize(("url", "parameter"), BAD_QUERIES)
async def test_bad_parameters_are_400_naming_the_parameter(
    client: httpx.AsyncClient, world: World, url: str, parameter: str
) -> None:
    err = await error(client, url.replace("{t}", some_token(world)), 400)
    assert err["code"] in (
        "invalid_parameter",
        "missing_parameter",
        "unknown_parameter",
    )
    assert err["parameter"] == parameter
    assert err["message"].startswith(parameter)


@pytest.mark.parametrize(
    "url",
    [
        f"/dex/price/{UNKNOWN}/current",
        f"/dex/price/{UNKNOWN}/at/1700000000",
        f"/dex/price/{UNKNOWN}/history",
        f"/dex/price/{UNKNOWN}/candlesticks",
        f"/dex/token/{UNKNOWN}/first_pool",
        f"/dex/contract/count/{UNKNOWN}",
        f"/dex/valuelocked/{UNKNOWN}",
        f"/dex/volume/{UNKNOWN}",
        f"/dex/tx/latest?token={UNKNOWN}",
        f"/tokenpool/pool/active?token={UNKNOWN}",
        f"/dex/pool/aggregated_apy?token={UNKNOWN}",
        "/dex/price/NOSUCHSYMBOL/current",
    ],
)
async def test_unknown_tokens_are_404(client: httpx.AsyncClient, url: str) -> None:
    assert (await error(client, url, 404))["code"] == "unknown_token"


async def test_unknown_pool_and_endpoint_are_404(client: httpx.AsyncClient) -> None:
    err = await error(client, f"/dex/pool/history/{UNKNOWN}:0", 404)
    assert err["code"] == "unknown_pool"
    err = await error(client, f"/dex/pool/history/{UNKNOWN}:0?start=5", 404)
    assert err["code"] == "unknown_pool"
    assert (await error(client, "/dex/nothing", 404))["code"] == "not_found"


async def test_an_owner_without_pools_is_an_empty_list(client: httpx.AsyncClient) -> None:
    r = await client.get("/dex/pool/active?pkh=" + "00" * 20)
    assert r.status_code == 200 and r.json() == {"active": []}


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
async def test_other_methods_are_405(client: httpx.AsyncClient, method: str) -> None:
    for url in ("/dex/volume", "/dex/contract/count", "/health"):
        r = await client.request(method, url, content=b"{}")
        assert r.status_code == 405
        assert r.json()["error"]["code"] == "method_not_allowed"
        assert set(r.headers["allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}


async def test_head_answers_without_a_body(client: httpx.AsyncClient) -> None:
    r = await client.head("/dex/contract/count")
    assert r.status_code == 200 and r.content == b""
    assert r.headers["x-index-height"]
