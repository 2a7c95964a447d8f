"""The broadcast API is open to browsers: a web wallet (the explorer's swap page) posts its
signed transaction from another origin. CORS is answered before any route runs, so no node
or service is needed here."""

from __future__ import annotations

from typing import cast

import httpx

from broadcast.app import create_app
from broadcast.service import BroadcastService

ORIGIN = "http://127.0.0.1:8000"


async def test_preflight_and_answers_allow_any_origin() -> None:
    app = create_app(cast(BroadcastService, object()), manage=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://broadcast") as client:
        pre = await client.options(
            "/broadcast",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "*"
        assert "POST" in pre.headers["access-control-allow-methods"]
        bad = await client.get("/broadcast/status/nothex", headers={"Origin": ORIGIN})
        assert bad.status_code == 400
        assert bad.headers["access-control-allow-origin"] == "*"
