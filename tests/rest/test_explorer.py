"""The explorer's routes without a browser: pages, static and vendor files, the whitelist and
path checks (no traversal), the configuration document, and the file `ladle up` fills it from.
No database is needed: these routes never read the index."""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import httpx
import orjson
import pytest

from rest.app import create_app
from rest.cli import add_arguments, config_from_args
from rest.config import RestConfig
from rest.explorer import ExplorerEnv, explorer_routes
from rest.explorer.routes import NODE_MODULES, PAGE_FILES, PAGES, STATIC, VENDOR

ROUTER = "ws://127.0.0.1:1/"
BROADCAST = "http://127.0.0.1:2"
WALLET = {"name": "wallet0", "wif": "K" + "x" * 51, "address": "bitcoincash:q..."}


def env() -> Mapping[str, object]:
    return {
        "network": "devnet",
        "router": ROUTER,
        "broadcast": BROADCAST,
        "electrum_ws": "ws://127.0.0.1:3",
        "router_fee": {"address": "bitcoincash:z...", "bps": 10},
        "wallets": [WALLET],
        "ignored": "not passed on",
    }


async def client_for(
    explorer_env: ExplorerEnv | None, tmp: Path
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(RestConfig(db_path=tmp / "absent.sqlite", explorer_env=explorer_env))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rest.test") as client:
        yield client


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(env, tmp_path):
        yield c


@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(None, tmp_path):
        yield c


@pytest.mark.parametrize(
    "path",
    [
        "/docs",
        "/explorer",
        "/explorer/token/" + "ab" * 32,
        "/explorer/pool/" + "cd" * 32 + ":0",
        "/explorer/swap",
        "/explorer/oracle",
        "/explorer/lending",
        "/explorer/broadcast",
    ],
)
async def test_pages_are_html_with_local_scripts_only(client: httpx.AsyncClient, path: str) -> None:
    r = await client.get(path)
    assert r.status_code == 200, path
    assert r.headers["content-type"].startswith("text/html")
    # No CDN: every script and stylesheet is a local path.
    assert "https://" not in r.text and "http://" not in r.text
    assert 'src="/' in r.text


def test_every_page_file_and_its_script_exist() -> None:
    for name, file in PAGE_FILES.items():
        html = (PAGES / file).read_text()
        scripts = [part.split('"')[0] for part in html.split('src="/explorer/static/')[1:]]
        assert scripts, name
        for script in scripts:
            assert (STATIC / script).is_file(), (name, script)


async def test_root_redirects_to_the_explorer(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 302 and r.headers["location"] == "/explorer"


async def test_the_plain_endpoint_list_stays_at_docs_endpoints(client: httpx.AsyncClient) -> None:
    r = await client.get("/docs/endpoints")
    assert r.status_code == 200 and "GET /dex/volume" in r.text


async def test_static_files_have_their_types(client: httpx.AsyncClient) -> None:
    js = await client.get("/explorer/static/common.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    css = await client.get("/explorer/static/app.css")
    assert css.headers["content-type"].startswith("text/css")


@pytest.mark.skipif(not NODE_MODULES.is_dir(), reason="node_modules is not installed (npm ci)")
async def test_whitelisted_vendor_files_are_served(client: httpx.AsyncClient) -> None:
    for name, (_, files) in VENDOR.items():
        for file in sorted(files or {"index.js", "lib/crypto/secp256k1.js"}):
            r = await client.get(f"/vendor/{name}/{file}")
            assert r.status_code == 200, (name, file)
            assert r.headers["cache-control"] == "public, max-age=86400"


@pytest.mark.parametrize(
    "path",
    [
        "/vendor/swagger-ui/index.html",  # in the package, not whitelisted
        "/vendor/swagger-ui/package.json",
        "/vendor/nope/index.js",
        "/vendor/libauth/../package.json",
        "/vendor/libauth/..%2Fpackage.json",
        "/vendor/libauth/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
        "/vendor/libauth/lib/../../package.json",
        "/vendor/libauth/.hidden.js",
        "/vendor/libauth//index.js",
        "/vendor/libauth/index.d.ts",  # only scripts
        "/vendor/libauth/%2Fetc%2Fpasswd",
        "/explorer/static/../routes.py",
        "/explorer/static/..%2F__init__.py",
        "/explorer/static/%2e%2e/routes.py",
        "/explorer/static/missing.js",
        "/schemas/../pyproject.toml",
        "/schemas/..%2Fpyproject.toml",
        "/schemas/rpc/missing.json",
    ],
)
async def test_traversal_and_unlisted_files_are_refused(
    client: httpx.AsyncClient, path: str
) -> None:
    r = await client.get(path)
    assert r.status_code == 404, path
    assert r.json()["error"]["code"] == "not_found"


async def test_schemas_are_served(client: httpx.AsyncClient) -> None:
    r = await client.get("/schemas/rpc/tx.build.params.json")
    assert r.status_code == 200
    assert r.json()["title"].startswith("tx.build")


async def test_broadcast_openapi_points_at_the_running_api(
    client: httpx.AsyncClient, bare: httpx.AsyncClient
) -> None:
    doc = (await client.get("/docs/broadcast/openapi.json")).json()
    assert doc["openapi"].startswith("3.") and "/broadcast" in doc["paths"]
    assert doc["servers"][0]["url"] == BROADCAST
    plain = (await bare.get("/docs/broadcast/openapi.json")).json()
    assert plain["paths"] == doc["paths"]


async def test_config_passes_on_only_the_known_keys(client: httpx.AsyncClient) -> None:
    r = await client.get("/explorer/config.json")
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert set(body) == {
        "network",
        "router",
        "broadcast",
        "electrum_ws",
        "router_fee",
        "wallets",
        "oracle_feeds",
    }
    assert body["router"] == ROUTER and body["wallets"] == [WALLET]


async def test_config_without_services_is_all_null(bare: httpx.AsyncClient) -> None:
    body = (await bare.get("/explorer/config.json")).json()
    assert body["wallets"] == [] and body["router"] is None and body["broadcast"] is None


def test_the_explorer_env_file_is_read_over_the_options(tmp_path: Path) -> None:
    """`ladle up` writes the services' addresses once they run; the data API, started before,
    reads the file on each request (options first, the file's keys over them)."""
    path = tmp_path / "explorer.json"
    config = parse_rest("--explorer-env", str(path), "--network-label", "devnet")
    assert config.explorer_env is not None
    assert config.explorer_env()["router"] is None  # no file yet: the options alone
    path.write_bytes(orjson.dumps({"router": ROUTER, "wallets": [WALLET]}))
    got = config.explorer_env()
    assert got["router"] == ROUTER and got["wallets"] == [WALLET] and got["network"] == "devnet"
    path.write_bytes(orjson.dumps({"router": ROUTER, "broadcast": BROADCAST, "x": 1}))
    os.utime(path, ns=(1, 1))  # a change within the clock's resolution is still a change
    got = config.explorer_env()
    assert got["broadcast"] == BROADCAST and got["wallets"] == []  # the options' again
    path.write_bytes(b"{not json")
    os.utime(path, ns=(2, 2))
    assert config.explorer_env()["router"] is None  # a broken file: the options alone


def test_explorer_routes_take_no_database() -> None:
    paths = {getattr(r, "path", None) for r in explorer_routes()}
    assert {"/docs", "/explorer", "/explorer/swap", "/explorer/config.json"} <= paths


async def test_text_files_are_gzipped_for_clients_that_accept_it(client: httpx.AsyncClient) -> None:
    plain = await client.get("/explorer/static/common.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    zipped = await client.get("/explorer/static/common.js", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.text == plain.text  # httpx decodes it
    assert int(zipped.headers["content-length"]) < len(plain.content)


def parse_rest(*argv: str) -> RestConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_ladle_rest_configures_the_explorer_for_any_network() -> None:
    config = parse_rest(
        "--router-url",
        "wss://router.example/",
        "--broadcast-url",
        "https://broadcast.example",
        "--electrum-ws",
        "wss://electrum.example:50004",
        "--network-label",
        "mainnet",
    )
    assert config.explorer_env is not None
    env = config.explorer_env()
    assert env["router"] == "wss://router.example/" and env["network"] == "mainnet"
    assert env["broadcast"] == "https://broadcast.example" and env["wallets"] == []
    assert env["oracle_feeds"] == [config.usd_feed]
    bare = parse_rest()
    assert bare.explorer_env is not None and bare.explorer_env()["router"] is None


@pytest.mark.parametrize(
    "argv",
    [
        ("--router-url", "http://router"),
        ("--electrum-ws", "tcp://electrum:50001"),
        ("--broadcast-url", "ws://broadcast"),
    ],
)
def test_ladle_rest_refuses_urls_of_the_wrong_kind(argv: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match=argv[0]):
        parse_rest(*argv)
