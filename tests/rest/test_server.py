"""End to end over real sockets: uvicorn on 127.0.0.1:0 in-process, and `ladle rest` as a
process (ready line, requests, SIGTERM → exit 0)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from rest.cli import add_commands, config_from_args
from rest.service import start_server
from tests.rest.conftest import World

ROOT = Path(__file__).resolve().parents[2]


async def test_uvicorn_serves_the_api(world: World) -> None:
    running = await start_server(world.config(rate_limit=5), host="127.0.0.1", port=0)
    try:
        assert running.port > 0
        async with httpx.AsyncClient(base_url=running.url) as client:
            health = await client.get("/health")
            assert health.status_code == 200 and health.json()["database"] == "ok"
            cat = world.oracle.categories()[0]
            r = await client.get(
                f"/tokenpool/pool/active?token={cat}",
                headers={"Accept-Encoding": "gzip", "Origin": "https://w.example"},
            )
            assert r.status_code == 200
            assert r.headers["x-index-height"] == str(max(world.oracle.blocks))
            assert r.headers["access-control-allow-origin"] == "*"
            assert len(r.json()["active"]) == world.oracle.tvl(cat)[2]
            etag = {"If-None-Match": r.headers["etag"]}
            again = await client.get(f"/tokenpool/pool/active?token={cat}", headers=etag)
            assert again.status_code == 304
            posted = await client.post("/dex/contract/count")
            assert posted.status_code == 405
            codes = [(await client.get("/dex/contract/count")).status_code for _ in range(5)]
            assert codes[-2:] == [429, 429]  # 5 a minute, three already spent
    finally:
        await running.stop()


async def test_trailing_slash_is_a_json_404_not_a_redirect(world: World) -> None:
    """Starlette's default answer to `/x/` is a 307 to an absolute URL built from the Host
    header (an open redirect); the API answers its usual JSON 404 and no Location."""
    running = await start_server(world.config(rate_limit=0), host="127.0.0.1", port=0)
    hostile = {"Host": "attacker.example"}
    try:
        async with httpx.AsyncClient(base_url=running.url, follow_redirects=False) as client:
            cat = world.oracle.categories()[0]
            for path in (
                "/dex/contract/count/",
                f"/tokenpool/pool/active/?token={cat}",
                "/health/",
                f"/registry/token/{cat}/",
            ):
                r = await client.get(path, headers=hostile)
                assert r.status_code == 404, (path, r.status_code, r.headers)
                assert "location" not in r.headers
                assert r.json()["error"]["code"] == "not_found"
            assert (await client.get("/dex/contract/count", headers=hostile)).status_code == 200
    finally:
        await running.stop()


async def test_ladle_rest_process(world: World) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rest.cli",
        "--db",
        str(world.db),
        "--port",
        "0",
        "--rate-limit",
        "0",
        "--stale-after",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        ready = orjson.loads(line)
        assert ready["db"] == str(world.db)
        async with httpx.AsyncClient(base_url=ready["rest"]) as client:
            r = await client.get("/dex/contract/count")
            assert r.status_code == 200
            assert r.json()["active"] == len(world.oracle.utxos_live_at())
            docs = await client.get("/docs/endpoints")
            assert "GET /dex/volume" in docs.text
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ladle")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["rest", *argv])


def test_command_line_options() -> None:
    args = parse()
    config = config_from_args(args)
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert config.db_path == Path("data/index.sqlite") and config.rate_limit == 600
    args = parse("--db", "/x/i.sqlite", "--port", "9", "--host", "0.0.0.0", "--rate-limit", "0")
    config = config_from_args(args)
    assert (config.db_path, config.rate_limit, args.port, args.host) == (
        Path("/x/i.sqlite"),
        0,
        9,
        "0.0.0.0",
    )
    config = config_from_args(parse("--cors-origin", "https://a", "--cors-origin", "https://b"))
    assert config.cors_origins == ("https://a", "https://b")
    with pytest.raises(ValueError, match="rate_limit"):
        config_from_args(parse("--rate-limit", "-1"))
    with pytest.raises(ValueError, match="port"):
        config_from_args(parse("--port", "70000"))
