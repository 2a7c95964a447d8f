"""`/registry/token/<category>[/all]`, symbol resolution through the index-backed registry, and
the token list's registry and USD fields, against the scenario's ledger and the registry bytes
its HTTP server answered (parsed here, independently of the service)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import httpx
import pytest
from starlette.applications import Starlette

from indexer.registry_fetch import Download, FetchConfig, RegistryFetcher
from indexer.store import open_writer
from indexer.store.queries_registry import authchain
from indexer.store.writer import Writer
from protocols.ledger import TokenEntry
from rest.app import create_app
from rest.config import RestConfig
from rest.context import ApiContext
from rest.index_tokens import IndexRegistry, IndexUsdOracle
from rest.tokens import NoUsdOracle, StaticRegistry
from tests.rest.conftest import api_client, check_response
from tests.rest.protocol_world import (
    BURNED,
    OFFCHAIN,
    UNREACHABLE,
    ProtocolWorld,
    error,
    get,
    protocol_world,
)

DAY = 86_400


@pytest.fixture(scope="module")
def pworld(tmp_path_factory: pytest.TempPathFactory) -> ProtocolWorld:
    return protocol_world(tmp_path_factory.mktemp("protocol"))


@pytest.fixture
async def client(pworld: ProtocolWorld) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(pworld.config()) as c:
        yield c


def snapshot_of(body: bytes, category: str) -> dict[str, Any]:
    """The one snapshot the scenario's registry documents hold for the token."""
    (snap,) = json.loads(body)["identities"][category].values()
    assert isinstance(snap, dict)
    return snap


def expected_entry(
    world: ProtocolWorld, t: TokenEntry, body: bytes | None = None
) -> dict[str, Any] | None:
    """The entry of the registry bytes `body` (default: what the server answered)."""
    body = world.served(t) if body is None else body
    if body is None:
        return None
    assert t.bcmr is not None
    snap = snapshot_of(body, t.category)
    return {
        "name": t.name,
        "description": snap["description"],
        "token": {"category": t.category, "symbol": t.symbol, "decimals": t.decimals},
        "uris": {"icon": snap["uris"]["icon"], "web": snap["uris"]["web"]},
        "filemeta": {
            "expected_hash": t.bcmr.hash,
            "actual_hash": hashlib.sha256(body).hexdigest(),
            "source": "onchain",
        },
    }


async def test_onchain_entries_equal_the_ledger(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    seen = {"match": 0, "mismatch": 0, "ascii": 0, "none": 0, "unreachable": 0}
    for t in pworld.ledger.tokens:
        want = expected_entry(pworld, t)
        got = await get(client, f"/registry/token/{t.category}")
        assert got == want, t.symbol
        assert await get(client, f"/registry/token/{t.category.upper()}") == want
        if t.bcmr is None:
            seen["none"] += 1
        elif t.symbol == UNREACHABLE:
            seen["unreachable"] += 1
        else:
            assert got is not None
            meta = got["filemeta"]
            # The deliberate mismatch: the served copy is shown, and says it does not match.
            assert (meta["expected_hash"] != meta["actual_hash"]) == t.bcmr.mismatch
            seen["mismatch" if t.bcmr.mismatch else "match"] += 1
            seen["ascii"] += t.bcmr.hash_encoding == "ascii-hex"
    assert all(seen.values()), seen
    lumen = pworld.token("LUMEN")
    entry = await get(client, f"/registry/token/{lumen.category}")
    assert entry["description"].endswith("(edited).")


async def test_all_entries_add_the_offchain_source(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    spice = pworld.token("SPICE")
    onchain = expected_entry(pworld, spice)
    assert onchain is not None
    listed = snapshot_of(pworld.offchain, spice.category)
    offchain = {
        **onchain,
        "name": "Spice (well-known list)",
        "description": listed["description"],
        # Nothing publishes a hash for an off-chain list: both are the stored copy's.
        "filemeta": {
            "expected_hash": hashlib.sha256(pworld.offchain).hexdigest(),
            "actual_hash": hashlib.sha256(pworld.offchain).hexdigest(),
            "source": OFFCHAIN,
        },
    }
    assert all(isinstance(v, str) for v in offchain["uris"].values())
    assert await get(client, f"/registry/token/{spice.category}/all") == [onchain, offchain]
    assert await get(client, "/registry/token/spice/all") == [onchain, offchain]
    for t in pworld.ledger.tokens:
        if t is not spice:
            want = expected_entry(pworld, t)
            got = await get(client, f"/registry/token/{t.category}/all")
            assert got == ([] if want is None else [want]), t.symbol
    assert await get(client, f"/registry/token/{'ab' * 32}") is None
    assert await get(client, f"/registry/token/{'ab' * 32}/all") == []


async def test_a_burned_identity_keeps_its_last_registry(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    """Dragon Gold published its registry in a later authchain link, then burned its identity
    (a link whose output 0 is OP_RETURN). The index ends its authchain there, and the API keeps
    serving the registry published before the burn (burning freezes an identity's metadata,
    it does not retract it); its shared symbol still counts."""
    (gold,) = [t for t in pworld.ledger.tokens if t.name == BURNED]
    assert gold.bcmr is not None and gold.identity_burned_txid is not None
    assert gold.bcmr.txid != gold.genesis_txid  # genesis → publication → burn
    assert [t.name for t in pworld.ledger.tokens if t.identity_burned_txid] == [BURNED]
    burn = next(x for x in pworld.ledger.transactions if x.txid == gold.identity_burned_txid)
    publication = next(x for x in pworld.ledger.transactions if x.txid == gold.bcmr.txid)
    assert burn.kind == "identity_burn" and burn.height is not None
    assert publication.height is not None and publication.height < burn.height
    conn = await aiosqlite.connect(pworld.db)
    try:
        chain = await authchain(conn, gold.category)
    finally:
        await conn.close()
    assert chain is not None
    assert (chain.head_txid, chain.links, chain.burned) == (gold.identity_burned_txid, 3, True)
    want = expected_entry(pworld, gold)
    assert want is not None and want["token"]["symbol"] == "DRGN"
    assert await get(client, f"/registry/token/{gold.category}") == want
    assert await get(client, f"/registry/token/{gold.category}/all") == [want]
    e = await error(client, "/registry/token/DRGN", 400)
    assert gold.category in {c["token_id"] for c in e["candidates"]}
    # Every other token's authchain is live.
    conn = await aiosqlite.connect(pworld.db)
    try:
        for t in pworld.ledger.tokens:
            if t is not gold:
                other = await authchain(conn, t.category)
                assert other is not None and not other.burned, t.name
    finally:
        await conn.close()


async def test_symbols_resolve_through_the_index(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    spice, furu = pworld.token("SPICE"), pworld.token("FURU")
    for text in ("SPICE", "spice", "Spice"):
        assert await get(client, f"/registry/token/{text}") == expected_entry(pworld, spice)
    assert await get(client, "/registry/token/FURU") == expected_entry(pworld, furu)
    # The shared symbol: 400 listing both tokens.
    drgn = sorted(pworld.ledger.tokens_with_symbol("DRGN"), key=lambda t: t.category)
    assert len(drgn) == 2
    for url in ("/registry/token/DRGN", "/registry/token/drgn/all", "/dex/price/DRGN/current"):
        e = await error(client, url, 400)
        assert e["code"] == "ambiguous_symbol"
        assert e["candidates"] == [
            {"token_id": t.category, "symbol": "DRGN", "name": t.name} for t in drgn
        ]
    # No registry, an unreachable one, or no such symbol: no entry, as for an unknown id
    # (null / []), on the registry endpoints; a 404 where a token must exist.
    for symbol in ("QUIET", UNREACHABLE, "NOPE"):
        assert await get(client, f"/registry/token/{symbol}") is None
        assert await get(client, f"/registry/token/{symbol}/all") == []
        e = await error(client, f"/dex/price/{symbol}/current", 404)
        assert e["code"] == "unknown_token"
    e = await error(client, f"/registry/token/{spice.category[:-1]}", 400)
    assert e["parameter"] == "category"
    e = await error(client, "/registry/token/SPICE?x=1", 400)
    assert e["code"] == "unknown_parameter"
    # Everywhere else a token is named: the same resolution.
    by_id = await get(client, f"/dex/price/{spice.category}/current")
    assert by_id["price"] is not None
    assert await get(client, "/dex/price/spice/current") == by_id
    got = await get(client, "/dex/tx/latest?token=FURU&limit=5")
    assert got == await get(client, f"/dex/tx/latest?token={furu.category}&limit=5")


def cents_at(world: ProtocolWorld, t: int) -> int | None:
    """The feed's price standing at t: the latest confirmed update at or before it."""
    ups = [u for u in world.ledger.oracle_updates if u.height is not None and u.timestamp <= t]
    if not ups:
        return None
    return max(ups, key=lambda u: (u.timestamp, u.sequence)).price


def price_then(world: ProtocolWorld, category: str, t: int) -> float | None:
    o = world.oracle
    h = o.height_at(t)
    if h is None:
        return None
    sats, tokens, pools = o.tvl(category, h)
    return sats / tokens if pools and tokens else None


async def test_token_list_has_registry_and_usd_fields(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    objs = await get(client, "/dex/tokens/list_cached?limit=1000")
    by_id = {o["token_id"]: o for o in objs}
    assert set(by_id) == set(pworld.oracle.categories())
    now = pworld.tip_time
    usd = {span: cents_at(pworld, now - span) for span in (0, DAY, 7 * DAY)}
    assert usd[0] is not None and usd[DAY] is not None and usd[7 * DAY] is None
    filled = 0
    for t in pworld.ledger.tokens:
        o = by_id.get(t.category)
        if o is None:
            continue
        want = expected_entry(pworld, t)
        if want is None:
            assert (o["bcmr"], o["display_symbol"], o["display_name"]) == (None, None, None)
        else:
            filled += 1
            assert o["display_symbol"] == t.symbol and o["display_name"] == t.name
            assert o["bcmr"] == {k: want[k] for k in ("name", "description", "token", "uris")}
        for span, field in ((0, "price_now"), (DAY, "price_24h"), (7 * DAY, "price_7d")):
            p = price_then(pworld, t.category, now - span)
            assert o[field] == pytest.approx(p), (t.symbol, field)
            cents = usd[span]
            want_usd = None if p is None or cents is None else p * cents / 100 / 100_000_000
            assert o[f"{field}_usd"] == pytest.approx(want_usd), (t.symbol, field)
        if o["price_now_usd"] is not None and o["price_24h_usd"] is not None:
            ratio = o["price_now_usd"] / o["price_24h_usd"]
            assert o["change_24h_usd_bp"] == round((ratio - 1) * 10_000)
    assert filled >= 4
    # Search finds tokens by their registry names and symbols.
    found = await get(client, "/dex/tokens/search_cached?q=dragon")
    assert sorted(o["token_id"] for o in found) == sorted(
        t.category for t in pworld.ledger.tokens_with_symbol("DRGN")
    )


async def test_usd_off_and_static_registry(pworld: ProtocolWorld) -> None:
    config = pworld.config(usd_feed=None, registry=StaticRegistry(()))
    assert isinstance(config.usd, NoUsdOracle)
    async with api_client(config) as c:
        objs = await get(c, "/dex/tokens/list_cached")
        assert objs and all(o["price_now_usd"] is None for o in objs)
        assert all(o["bcmr"] is None for o in objs)
        # Symbols: the configured registry's, which knows none (no entry, as for any unknown).
        assert await get(c, "/registry/token/SPICE") is None
        e = await error(c, "/dex/price/SPICE/current", 404)
        assert e["code"] == "unknown_token"
        # The registry endpoints still read the index.
        spice = pworld.token("SPICE")
        assert await get(c, f"/registry/token/{spice.category}") == expected_entry(pworld, spice)


def test_config_defaults(tmp_path: Path) -> None:
    config = RestConfig(db_path=tmp_path / "x.sqlite")
    assert isinstance(config.registry, IndexRegistry)
    assert config.registry.db_path == tmp_path / "x.sqlite"
    assert isinstance(config.usd, IndexUsdOracle)
    assert config.usd.category == "d0d46f5cbd82188acede0d3e49c75700c19cb8331a30101f0bb6a260066ac972"
    assert isinstance(RestConfig(usd_feed=None).usd, NoUsdOracle)
    with pytest.raises(ValueError, match="usd_feed"):
        RestConfig(usd_feed="xyz")


@asynccontextmanager
async def app_over(config: RestConfig) -> AsyncIterator[tuple[httpx.AsyncClient, ApiContext]]:
    app: Starlette = create_app(config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://rest.test",
            event_hooks={"response": [check_response]},
        ) as c:
            yield c, app.state.ctx


def _serving(conn: Writer, body: bytes, clock: Callable[[], float]) -> RegistryFetcher:
    """A fetch job over `conn` whose every download answers `body`."""

    async def fetch(url: str, cfg: FetchConfig) -> Download:
        return Download(url, 200, body, None)

    return RegistryFetcher(conn, FetchConfig(), clock=clock, fetch=fetch)


async def test_an_answer_read_after_a_copy_arrived_is_not_under_the_old_etag(
    pworld: ProtocolWorld, tmp_path: Path
) -> None:
    """Two workers (or replicas) over one index: one answered before a registry copy arrived,
    the other answers after it, before its poller has seen the change (or, at start, before
    its first poll). Their ETags may only be equal if their bodies are."""
    db = tmp_path / "copy.sqlite"
    shutil.copy(pworld.db, db)
    hidden = pworld.token(UNREACHABLE)
    assert hidden.bcmr is not None
    body = pworld.documents[hidden.bcmr.uri.replace("ipfs://", "/ipfs/")]
    url = f"/registry/token/{hidden.category}"
    early_config = pworld.config(db_path=db, poll_interval=3600)
    late_config = pworld.config(db_path=db, poll_interval=3600)
    async with (
        app_over(early_config) as (early, early_ctx),
        app_over(late_config) as (late, ctx),
    ):
        await early_ctx.watcher.refresh()
        await ctx.watcher.refresh()
        before = await early.get(url)
        assert before.status_code == 200 and before.json() is None
        conn = await open_writer(db)
        try:
            assert await _serving(conn, body, lambda: 2_100_000_000.0).run_once() >= 1
        finally:
            await conn.close()
        revision = ctx.registry_tables.revision  # what its last poll saw
        after = await late.get(url)
        assert after.status_code == 200
        assert after.json() == expected_entry(pworld, hidden, body)
        assert after.headers["etag"] != before.headers["etag"]
        assert ctx.registry_tables.revision != revision
        again = await late.get(url, headers={"If-None-Match": after.headers["etag"]})
        assert again.status_code == 304


async def test_a_registry_fetched_between_blocks_shows_up(
    pworld: ProtocolWorld, tmp_path: Path
) -> None:
    db = tmp_path / "copy.sqlite"
    shutil.copy(pworld.db, db)
    hidden = pworld.token(UNREACHABLE)
    assert hidden.bcmr is not None
    body = pworld.documents[hidden.bcmr.uri.replace("ipfs://", "/ipfs/")]
    config = pworld.config(db_path=db)
    assert isinstance(config.registry, IndexRegistry)
    async with app_over(config) as (client, ctx):
        await ctx.watcher.refresh()
        assert await get(client, f"/registry/token/{hidden.category}") is None
        assert await get(client, f"/registry/token/{UNREACHABLE}") is None  # no symbol yet
        assert hidden.category in pworld.oracle.categories()  # it has pools
        listed = await get(client, f"/dex/tokens/list_cached_by_ids?ids={hidden.category}")
        assert [o["display_symbol"] for o in listed] == [None]
        revision, tables = config.registry.revision, ctx.registry_tables.revision

        # The fetch job finally gets the document: no new block.
        conn = await open_writer(db)
        try:
            clock = float(2_100_000_000)
            fetcher = _serving(conn, body, lambda: clock)
            assert await fetcher.run_once() >= 1
            await ctx.watcher.refresh()
            assert config.registry.revision != revision
            changed = config.registry.revision
            assert ctx.registry_tables.revision != tables
            want = expected_entry(pworld, hidden, body)
            assert want is not None and want["filemeta"]["actual_hash"] == hidden.bcmr.hash
            assert await get(client, f"/registry/token/{hidden.category}") == want
            assert await get(client, f"/registry/token/{UNREACHABLE}") == want
            listed = await get(client, f"/dex/tokens/list_cached_by_ids?ids={hidden.category}")
            assert [o["display_symbol"] for o in listed] == [UNREACHABLE]
            # The same copy fetched again: the tables change, the entries do not.
            clock += 10 * DAY
            assert await fetcher.run_once() >= 1
            await ctx.watcher.refresh()
            assert config.registry.revision == changed
        finally:
            await conn.close()
