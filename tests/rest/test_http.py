"""What every answer carries: index height, ETag/304, cache headers, gzip, CORS; the rate limit
with Retry-After; 503s; /health and /metrics; and no traceback ever."""

from __future__ import annotations

import asyncio
import gzip
import sqlite3
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from indexer.index import open_store
from rest.app import create_app
from rest.tokens import TokenMetadata
from tests.metrics_text import sample
from tests.rest.conftest import World, api_client, validate_health


async def test_index_height_etag_and_304(client: httpx.AsyncClient, world: World) -> None:
    tip = max(world.oracle.blocks)
    r = await client.get("/dex/contract/count")
    assert r.status_code == 200
    assert r.headers["x-index-height"] == str(tip)
    etag = r.headers["etag"]
    assert etag.startswith(f'W/"{tip}.')
    assert r.headers["cache-control"] == "public, max-age=5"
    again = await client.get("/dex/contract/count", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag and again.headers["x-index-height"] == str(tip)
    listed = await client.get("/dex/contract/count", headers={"If-None-Match": f'"x", {etag}'})
    assert listed.status_code == 304
    star = await client.get("/dex/contract/count", headers={"If-None-Match": "*"})
    assert star.status_code == 304
    other = await client.get("/dex/contract/count", headers={"If-None-Match": 'W/"nope"'})
    assert other.status_code == 200 and other.json() == r.json()
    # Another resource (or other parameters) has another ETag.
    r2 = await client.get("/dex/volume?start=0&end=5")
    r3 = await client.get("/dex/volume?start=0&end=6")
    assert len({etag, r2.headers["etag"], r3.headers["etag"]}) == 3


async def test_gzip_for_large_bodies_only_when_accepted(
    client: httpx.AsyncClient, world: World
) -> None:
    url = "/tokenpool/pools?limit=100"
    plain = await client.get(url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) > 1024
    zipped = await client.get(url, headers={"Accept-Encoding": "gzip, deflate"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) < len(plain.content) / 2
    assert zipped.json() == plain.json()  # httpx decoded it
    refused = await client.get(url, headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers
    small = await client.get("/dex/contract/count", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in small.headers


async def test_gzip_bytes_on_the_wire(world: World) -> None:
    """Check the raw bytes, not httpx's decoding."""
    app = create_app(world.config())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            headers = {"Accept-Encoding": "gzip"}
            async with c.stream("GET", "/tokenpool/pools", headers=headers) as r:
                raw = b"".join([chunk async for chunk in r.aiter_raw()])
    assert r.headers["content-encoding"] == "gzip"
    assert gzip.decompress(raw).startswith(b'{"pools":[')


async def test_hourly_candles_gzip_member_is_the_plain_answer(world: World) -> None:
    """Hourly candlesticks come with a gzip member spliced from kept and fresh pieces: the
    bytes on the wire decode to exactly the plain answer, whichever is asked first."""
    token = Counter(t.category for t in world.oracle.trades).most_common(1)[0][0]
    app = create_app(world.config(gzip_min_size=0))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            for shift in (0, 1_234, 86_400 + 55):
                end = world.now - shift
                url = f"/dex/price/{token}/candlesticks?start={end - 30 * 86_400}&end={end}"
                headers = {"Accept-Encoding": "gzip"}
                async with c.stream("GET", url, headers=headers) as r:
                    raw = b"".join([chunk async for chunk in r.aiter_raw()])
                plain = await c.get(url, headers={"Accept-Encoding": "identity"})
                assert r.headers["content-encoding"] == "gzip"
                assert r.headers["etag"] == plain.headers["etag"]
                assert gzip.decompress(raw) == plain.content
                assert len(plain.json()["candlesticks"]) > 10


async def test_cors_simple_and_preflight(client: httpx.AsyncClient) -> None:
    r = await client.get("/dex/contract/count", headers={"Origin": "https://wallet.example"})
    assert r.headers["access-control-allow-origin"] == "*"
    assert "X-Index-Height" in r.headers["access-control-expose-headers"]
    pre = await client.options(
        "/dex/contract/count",
        headers={
            "Origin": "https://wallet.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "if-none-match",
        },
    )
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "*"
    assert "GET" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "if-none-match"
    # Errors carry CORS headers too, so browsers can read them.
    err = await client.get("/dex/volume?start=x", headers={"Origin": "https://a.example"})
    assert err.status_code == 400 and err.headers["access-control-allow-origin"] == "*"
    no_origin = await client.get("/dex/contract/count")
    assert "access-control-allow-origin" not in no_origin.headers


async def test_cors_with_an_origin_list(world: World) -> None:
    config = world.config(cors_origins=("https://good.example",))
    async with api_client(config) as c:
        good = await c.get("/dex/contract/count", headers={"Origin": "https://good.example"})
        assert good.headers["access-control-allow-origin"] == "https://good.example"
        assert "Origin" in good.headers["vary"]
        bad = await c.get("/dex/contract/count", headers={"Origin": "https://bad.example"})
        assert bad.status_code == 200
        assert "access-control-allow-origin" not in bad.headers


async def test_rate_limit_429_with_retry_after(world: World) -> None:
    async with api_client(world.config(rate_limit=3)) as c:
        codes = [(await c.get("/dex/contract/count")).status_code for _ in range(3)]
        assert codes == [200, 200, 200]
        r = await c.get("/dex/contract/count")
        assert r.status_code == 429
        assert r.json()["error"]["code"] == "rate_limited"
        assert int(r.headers["retry-after"]) >= 1  # 3 a minute: one more in 20 s
        assert (await c.get("/health")).status_code == 200  # monitoring is exempt
        assert (await c.get("/metrics")).status_code == 200
        metrics = (await c.get("/metrics")).text
        assert sample(metrics, "ladle_rest_rate_limited_total") == 1


async def test_rate_limit_is_per_client(world: World) -> None:
    config = world.config(rate_limit=2, trust_forwarded=True)
    async with api_client(config) as c:
        for client_ip in ("198.51.100.1", "198.51.100.2"):
            headers = {"X-Forwarded-For": f"{client_ip}, 10.0.0.1"}
            codes = [(await c.get("/dex/volume", headers=headers)).status_code for _ in range(3)]
            assert codes == [200, 200, 429]


async def test_rate_limit_disabled(world: World) -> None:
    async with api_client(world.config(rate_limit=0)) as c:
        for _ in range(50):
            assert (await c.get("/dex/contract/count")).status_code == 200


async def test_database_missing_is_503_and_health_says_so(tmp_path: Path, world: World) -> None:
    async with api_client(world.config(db_path=tmp_path / "absent.sqlite")) as c:
        r = await c.get("/dex/contract/count")
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "database_unavailable"
        assert r.headers["retry-after"]
        h = await c.get("/health")
        assert h.status_code == 503
        assert h.json()["database"] == "unavailable" and h.json()["status"] == "unavailable"


async def test_empty_index_is_503_not_synced(tmp_path: Path, world: World) -> None:
    db = tmp_path / "empty.sqlite"
    store = await open_store(db)
    await store.close()
    async with api_client(world.config(db_path=db)) as c:
        r = await c.get("/dex/volume")
        assert r.status_code == 503 and r.json()["error"]["code"] == "not_synced"
        h = await c.get("/health")
        assert h.status_code == 200 and h.json()["status"] == "empty"


async def test_a_time_past_a_stale_index_is_503(world: World) -> None:
    """The clock runs a day past the tip: time-based answers beyond the tip are refused,
    answers about the tip's state are not."""
    tip_time = max(b.max_time for b in world.oracle.blocks.values())
    late = world.now + 86_400
    async with api_client(world.config(clock=lambda: late, stale_after=7200)) as c:
        for url in (
            "/dex/volume",
            f"/dex/valuelocked?time={tip_time + 100}",
            f"/dex/price/{world.oracle.categories()[0]}/at/{late}",
            "/dex/pool/aggregated_apy",
        ):
            r = await c.get(url)
            assert r.status_code == 503, url
            assert r.json()["error"]["code"] == "not_synced"
        ok = await c.get(f"/dex/volume?start=0&end={tip_time}")
        assert ok.status_code == 200
        assert (await c.get("/dex/contract/count")).status_code == 200
        health = (await c.get("/health")).json()
        assert health["status"] == "syncing" and health["synced"] is False
        assert health["lag_seconds"] == late - tip_time


async def test_chain_tip_source_decides_synced(world: World) -> None:
    tip = max(world.oracle.blocks)
    chain = {"height": tip + 3}

    async def chain_tip() -> int | None:
        return chain["height"]

    async with api_client(world.config(chain_tip=chain_tip, stale_after=0)) as c:
        health = (await c.get("/health")).json()
        assert health["chain_height"] == tip + 3 and health["lag_blocks"] == 3
        assert health["synced"] is False
        assert (await c.get("/dex/volume")).status_code == 503
        chain["height"] = tip
        health = (await c.get("/health")).json()
        assert health["lag_blocks"] == 0 and health["synced"] is True
        assert (await c.get("/dex/volume")).status_code == 200


async def test_health_fields(client: httpx.AsyncClient, world: World) -> None:
    tip = max(world.oracle.blocks)
    r = await client.get("/health")
    body = r.json()
    validate_health(body)
    assert r.headers["cache-control"] == "no-store"
    assert body["status"] == "ok" and body["database"] == "ok" and body["synced"] is True
    assert body["index_height"] == tip
    assert body["index_hash"] == world.oracle.blocks[tip].hash
    assert body["lag_seconds"] == 60 and body["chain_height"] is None


async def test_metrics_count_routes_by_template(client: httpx.AsyncClient, world: World) -> None:
    cats = world.oracle.categories()
    for cat in cats[:3]:
        await client.get(f"/dex/price/{cat}/current")
    await client.get("/dex/volume?start=x")
    text = (await client.get("/metrics")).text
    price = "/dex/price/{token}/current"
    requests = "ladle_rest_requests_total"
    assert sample(text, requests, route=price, method="GET", status="200") == 3
    assert sample(text, requests, route="/dex/volume", method="GET", status="400") == 1
    assert sample(text, "ladle_rest_request_duration_seconds_count", route=price) == 3
    assert sample(text, "ladle_rest_request_duration_seconds_bucket", route=price, le="+Inf") == 3
    assert sample(text, "ladle_rest_index_height") == max(world.oracle.blocks)
    for cat in cats:
        assert cat not in text  # labels are templates, never raw paths


class ExplodingRegistry:
    """A registry plug-in with a bug."""

    revision = 0

    async def by_symbol(self, symbol: str) -> Sequence[TokenMetadata]:
        raise RuntimeError("secret internal detail")

    async def metadata(self, token_ids: object) -> dict[str, TokenMetadata]:
        return {}


async def test_an_unexpected_error_is_a_bare_json_500(world: World) -> None:
    app = create_app(world.config(registry=ExplodingRegistry()))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.get("/dex/price/SPICE/current")
    assert r.status_code == 500
    assert r.json() == {
        "error": {"code": "internal_error", "message": "internal error (logged on the server)"}
    }
    assert b"secret" not in r.content and b"Traceback" not in r.content


async def test_database_errors_are_503(tmp_path: Path, world: World) -> None:
    """A file that is not a database: every data request is a clean 503."""
    db = tmp_path / "garbage.sqlite"
    db.write_bytes(b"this is not a database" * 100)
    async with api_client(world.config(db_path=db)) as c:
        r = await c.get("/dex/contract/count")
        assert r.status_code == 503 and r.json()["error"]["code"] == "database_unavailable"
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(db).execute("SELECT 1 FROM blocks").fetchall()


async def test_warm_candles_answer_without_a_reader(world: World) -> None:
    """Once the warmer has the token list and the series at the tip, a candle window nobody
    asked for is answered from memory: it completes while the only reader connection is held
    elsewhere, with the bytes, gzip member, ETag and height of an app that reads a snapshot."""
    token = Counter(t.category for t in world.oracle.trades).most_common(1)[0][0]
    tip = max(world.oracle.blocks)
    ends = (world.now - 7, world.now - 3_600 * 5 - 11, world.now - 86_400 - 55)
    urls = [
        f"/dex/price/{token}/{kind}?start={end - 20 * 86_400}&end={end}&stepsize={step}"
        for end in ends
        for kind, step in (("candlesticks", 3_600), ("history", 3_600), ("candlesticks", 86_400))
    ]
    gz = {"Accept-Encoding": "gzip"}

    async def fetch(c: httpx.AsyncClient, url: str) -> tuple[bytes, dict[str, str]]:
        async with c.stream("GET", url, headers=gz) as r:
            raw = b"".join([chunk async for chunk in r.aiter_raw()])
        assert r.status_code == 200
        keep = ("etag", "x-index-height", "content-encoding")
        return raw, {k: r.headers.get(k, "") for k in keep}

    reference = create_app(world.config(gzip_min_size=0, warm=False))
    async with reference.router.lifespan_context(reference):
        transport = httpx.ASGITransport(app=reference)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            expected = [await fetch(c, url) for url in urls]
    app = create_app(world.config(gzip_min_size=0, readers=1))
    async with app.router.lifespan_context(app):
        ctx = app.state.ctx
        async with asyncio.timeout(60):  # a guard: a request needing a reader would wait forever
            while ctx.warmed_height != tip:
                await asyncio.sleep(0.02)
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://t")
            async with client as c, ctx.pool.connection():  # every reader busy
                got = [await fetch(c, url) for url in urls]
            assert ctx.cache.misses >= len(urls)
    assert got == expected
    assert all(h["x-index-height"] == str(tip) for _, h in got)
