"""Every endpoint's numbers against the oracle derived from the scenario's ledger (and, for
owner addresses and token metadata, against the ledger's own entries)."""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.rest.conftest import World
from tests.rest.oracle import Trade, Utxo, apy

DAY = 86_400


def chain_order(u: Utxo) -> tuple[int, int, int]:
    return (u.height, u.position, u.vout)


def pool_json(u: Utxo, world: World) -> dict[str, Any]:
    entry = world.ledger.pool(u.lineage)
    return {
        "owner_p2pkh_addr": entry.owner_address,
        "owner_pkh": u.owner,
        "sats": u.sats,
        "token_id": u.category,
        "tokens": u.tokens,
        "tx_pos": u.vout,
        "txid": u.txid,
        "pool_id": u.lineage,
    }


async def get(client: httpx.AsyncClient, url: str) -> Any:
    r = await client.get(url)
    assert r.status_code == 200, (url, r.text)
    return r.json()


def times_to_probe(world: World) -> list[int]:
    o = world.oracle
    rng = random.Random(3)
    hs = sorted(o.blocks)
    first, last = o.blocks[hs[0]].time, world.now
    picks = [o.blocks[h].max_time for h in rng.sample(hs, 6)]
    picks += [rng.randrange(first, last) for _ in range(6)]
    return [0, first - 1, *picks, last]


async def test_active_pools_per_token_owner_and_both(
    client: httpx.AsyncClient, world: World
) -> None:
    o = world.oracle
    live = sorted(o.utxos_live_at(), key=chain_order)
    assert len(live) > 20
    for cat in o.categories():
        want = [pool_json(u, world) for u in live if u.category == cat]
        assert await get(client, f"/tokenpool/pool/active?token={cat}") == {"active": want}
        assert await get(client, f"/dex/pool/active?token={cat.upper()}") == {"active": want}
    owners = sorted({u.owner for u in live})
    for pkh in owners:
        want = [pool_json(u, world) for u in live if u.owner == pkh]
        assert await get(client, f"/dex/pool/active?pkh={pkh}") == {"active": want}
        # `user`: the specification's other name for pkh, on both paths.
        assert await get(client, f"/dex/pool/active?user={pkh}") == {"active": want}
        assert await get(client, f"/tokenpool/pool/active?user={pkh}") == {"active": want}
    u = live[len(live) // 2]
    both = [pool_json(v, world) for v in live if (v.owner, v.category) == (u.owner, u.category)]
    got = await get(client, f"/tokenpool/pool/active?token={u.category}&pkh={u.owner}")
    assert got == {"active": both}
    got = await get(client, f"/dex/pool/active?token={u.category}&user={u.owner.upper()}")
    assert got == {"active": both}


async def test_every_live_pool_in_pages(client: httpx.AsyncClient, world: World) -> None:
    live = sorted(world.oracle.utxos_live_at(), key=lambda u: (u.category, *chain_order(u)))
    seen: list[Any] = []
    offset = 0
    while True:
        page = await get(client, f"/tokenpool/pools?limit=7&offset={offset}")
        assert page["total"] == len(live)
        if not page["pools"]:
            break
        seen += page["pools"]
        offset += 7
    assert seen == [pool_json(u, world) for u in live]


async def test_tokens_first_pools_and_contract_counts(
    client: httpx.AsyncClient, world: World
) -> None:
    o = world.oracle
    everyone = sorted(o.first_pool.items(), key=lambda kv: kv[1][0])
    # Only tokens with at least one live pool.
    firsts = [(cat, first) for cat, first in everyone if o.tvl(cat)[2]]
    got = (await get(client, "/tokenpool/tokens"))["tokens"]
    assert [t["token_id"] for t in got] == [cat for cat, _ in firsts]
    for t, (cat, ((height, _, _), lineage)) in zip(got, firsts, strict=True):
        sats, tokens, n = o.tvl(cat)
        assert t == {
            "token_id": cat,
            "first_seen_height": height,
            "first_seen_time": o.blocks[height].time,
            "first_pool_id": lineage,
            "pools": n,
            "tvl_sats": sats,
            "tvl_tokens": tokens,
        }
        first_state = o.lineage_states(lineage)[0]
        body = await get(client, f"/dex/token/{cat}/first_pool")
        assert body == {
            **pool_json(first_state, world),
            "height": first_state.height,
            "timestamp": first_state.time,
        }
        count = await get(client, f"/dex/contract/count/{cat}")
        assert count == {
            "active": n,
            "ended": o.withdrawn(cat),
            "interactions": sum(1 for tr in o.trades if tr.category == cat),
        }
    total = await get(client, "/dex/contract/count")
    assert total == {
        "active": len(o.utxos_live_at()),
        "ended": o.withdrawn(),
        "interactions": len(o.trades),
    }
    assert total["ended"] > 0 and total["active"] > 0


async def test_pool_histories(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    lineages = sorted({u.lineage for u in o.utxos.values()})
    for lineage in lineages:
        states = o.lineage_states(lineage)
        body = await get(client, f"/dex/pool/history/{lineage}")
        assert body["pool_id"] == lineage
        assert body["owner_pkh"] == states[0].owner
        assert body["token_id"] == states[0].category
        assert body["history"] == [
            {
                "k": str(s.sats * s.tokens),
                "sats": s.sats,
                "tokens": s.tokens,
                "timestamp": s.time,
                "txid": s.txid,
                "height": s.height,
            }
            for s in states
        ]
    busiest = max(lineages, key=lambda lin: len(o.lineage_states(lin)))
    states = o.lineage_states(busiest)
    cut = states[len(states) // 2].time
    body = await get(client, f"/dex/pool/history/{busiest}?start={cut}")
    assert [h["txid"] for h in body["history"]] == [s.txid for s in states if s.time >= cut]
    late = await get(client, f"/dex/pool/history/{busiest}?start={world.now + 10**6}")
    assert late["history"] == [] and late["token_id"] == states[0].category


async def test_value_locked_now_and_in_the_past(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    cats = o.categories()
    assert (await get(client, "/dex/valuelocked"))["satoshis"] == o.tvl(None)[0]
    for t in times_to_probe(world):
        h = o.height_at(t)
        sats = 0 if h is None else o.tvl(None, h)[0]
        assert await get(client, f"/dex/valuelocked?time={t}") == {"satoshis": sats}
        for cat in cats[:3]:
            s, n, _ = (0, 0, 0) if h is None else o.tvl(cat, h)
            body = await get(client, f"/dex/valuelocked/{cat}?time={t}")
            assert body == {"satoshis": s, "token_amount": n, "token_id": cat}


def volume(trades: list[Trade]) -> tuple[int, int]:
    return sum(t.volume_sats for t in trades), sum(t.volume_tokens for t in trades)


async def test_volume_windows(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    rng = random.Random(5)
    probes = times_to_probe(world)
    windows = [(0, world.now), (world.now - DAY, world.now)]
    windows += [tuple(sorted(rng.sample(probes, 2))) for _ in range(6)]  # type: ignore[misc]
    default = await get(client, "/dex/volume")
    assert default == {
        "total_volume_sats": volume(o.trades_in(world.now - DAY, world.now))[0],
        "period_start": world.now - DAY,
        "period_end": world.now,
    }
    assert default["total_volume_sats"] > 0
    for start, end in windows:
        body = await get(client, f"/dex/volume?start={start}&end={end}")
        assert body["total_volume_sats"] == volume(o.trades_in(start, end))[0]
        for cat in o.categories():
            vs, vt = volume(o.trades_in(start, end, cat))
            body = await get(client, f"/dex/volume/{cat}?start={start}&end={end}")
            assert body == {
                "volume_sats": vs,
                "volume_tokens": vt,
                "token_id": cat,
                "period_start": start,
                "period_end": end,
            }


async def test_current_price_and_price_at(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    for cat in o.categories():
        sats, tokens, n = o.tvl(cat)
        want = sats / tokens if n else None
        assert await get(client, f"/dex/price/{cat}/current") == {"price": want}
        trades = sorted((t for t in o.trades if t.category == cat), key=lambda t: t.key)
        for t in times_to_probe(world):
            before = [tr for tr in trades if tr.time <= t]
            want_at: dict[str, Any] = {"price": None, "timestamp": None}
            if before:
                want_at = {"price": before[-1].price, "timestamp": before[-1].time}
            assert await get(client, f"/dex/price/{cat}/at/{t}") == want_at


def expected_buckets(trades: list[Trade], start: int, end: int, step: int) -> list[dict[str, Any]]:
    groups: dict[int, list[Trade]] = {}
    for t in sorted((t for t in trades if start <= t.time <= end), key=lambda t: t.key):
        groups.setdefault(t.time // step * step, []).append(t)
    out = []
    for at in sorted(groups):
        g = groups[at]
        prices = [t.price for t in g]
        out.append(
            {
                "time": at,
                "open": prices[0],
                "high": max(prices),
                "low": min(prices),
                "close": prices[-1],
                "volume_sats": sum(t.volume_sats for t in g),
                "volume_tokens": sum(t.volume_tokens for t in g),
                "transaction_count": len(g),
            }
        )
    return out


@pytest.mark.parametrize("step", [3600, 7200, 86_400, 1_800, 900])
async def test_candlesticks_and_history(client: httpx.AsyncClient, world: World, step: int) -> None:
    o = world.oracle
    rng = random.Random(step)
    first = min(b.time for b in o.blocks.values() if b.height > 0)
    windows = [(world.now - 30 * DAY, world.now), (first, world.now)]
    for _ in range(3):
        a, b = sorted(rng.randrange(first, world.now) for _ in range(2))
        windows.append((a, b))
    busiest = Counter(t.category for t in o.trades).most_common()
    for cat, _ in busiest[:3]:
        trades = [t for t in o.trades if t.category == cat]
        for start, end in windows:
            want = expected_buckets(trades, start, end, step)
            q = f"start={start}&end={end}&stepsize={step}"
            body = await get(client, f"/dex/price/{cat}/candlesticks?{q}")
            assert body == {"candlesticks": want}
            hist = await get(client, f"/dex/price/{cat}/history?{q}")
            assert hist == {
                "history": [
                    {
                        "time": c["time"],
                        "avg": c["volume_sats"] / c["volume_tokens"],
                        "max": c["high"],
                        "min": c["low"],
                    }
                    for c in want
                ]
            }
    cat = busiest[0][0]
    default = await get(client, f"/dex/price/{cat}/candlesticks")
    trades = [t for t in o.trades if t.category == cat]
    assert default["candlesticks"] == expected_buckets(
        trades, world.now - 30 * DAY, world.now, 3600
    )
    assert len(default["candlesticks"]) > 10


async def test_latest_trades(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    newest = sorted(o.trades, key=lambda t: (-t.height, -t.position, t.category))

    def item(t: Trade) -> dict[str, Any]:
        return {
            "txid": t.txid,
            "blockhash": t.block_hash,
            "height": t.height,
            "timestamp_guess": t.time,
            "token_id": t.category,
            "direction": t.direction,
            "sats": abs(t.sats),
            "tokens": abs(t.tokens),
            "volume_sats": t.volume_sats,
            "volume_tokens": t.volume_tokens,
            "price": t.price,
            "lp_fee": t.lp_fee,
            "pools": t.pools,
            "pools_touched": t.pools_touched,
        }

    assert await get(client, "/dex/tx/latest") == [item(t) for t in newest[:50]]
    assert await get(client, "/dex/tx/latest?limit=5&offset=3") == [item(t) for t in newest[3:8]]
    cat = newest[0].category
    mine = [item(t) for t in newest if t.category == cat]
    assert await get(client, f"/dex/tx/latest?token={cat}&limit=500") == mine
    assert {t["direction"] for t in await get(client, "/dex/tx/latest?limit=500")} == {
        "buy",
        "sell",
    }


async def test_unique_addresses(client: httpx.AsyncClient, world: World) -> None:
    months = Counter(m for m, _ in world.oracle.traders)
    want: list[list[Any]] = [[m, months[m]] for m in sorted(months)]
    assert await get(client, "/dex/user/unique_addresses") == want
    assert want and want[0][1] > 1


async def test_aggregated_apy(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    first = min(b.time for b in o.blocks.values() if b.height > 0)
    rng = random.Random(9)
    windows = [(world.now - 30 * DAY, world.now), (first + 3 * 3600, world.now - 5000)]
    windows.append((first + DAY // 2, first + 2 * DAY))
    owners = sorted({u.owner for u in o.utxos.values()})
    checked = 0
    for start, end in windows:
        q = f"start={start}&end={end}"
        cases: list[tuple[str, str | None, str | None]] = [(q, None, None)]
        cases += [(f"{q}&token={c}", c, None) for c in o.categories()]
        for owner in rng.sample(owners, 3):
            cases.append((f"{q}&pkh={owner}", None, owner))
            mine = next(u.category for u in o.utxos.values() if u.owner == owner)
            cases.append((f"{q}&pkh={owner}&token={mine}", mine, owner))
        for query, token, pkh in cases:
            body = await get(client, f"/dex/pool/aggregated_apy?{query}")
            want, pools = apy(o, start, end, token, pkh)
            assert body["pools"] == pools, query
            assert isinstance(body["apy"], str)
            assert float(Decimal(body["apy"])) == pytest.approx(want, rel=1e-9, abs=1e-9), query
            checked += want > 0
    assert checked > 10  # the scenario's trades really earned fees
    default = await get(client, "/dex/pool/aggregated_apy")
    want, pools = apy(o, world.now - 30 * DAY, world.now)
    assert default["pools"] == pools
    assert float(default["apy"]) == pytest.approx(want, rel=1e-9, abs=1e-9)


async def test_token_list_figures(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    tip = max(o.blocks)
    now = o.blocks[tip].max_time
    objs = await get(client, "/dex/tokens/list_cached?limit=1000")
    assert {t["token_id"] for t in objs} == set(o.categories())
    by_id = {t["token_id"]: t for t in objs}
    for cat in o.categories():
        t = by_id[cat]
        meta = world.ledger.token(cat)
        sats, tokens, n = o.tvl(cat)
        h24 = o.height_at(now - DAY)
        s24, t24, n24 = o.tvl(cat, h24) if h24 is not None else (0, 0, 0)
        p_now = sats / tokens if n else None
        p24 = s24 / t24 if n24 else None
        day = o.trades_in(now - DAY, now, cat)
        assert t["display_name"] == meta.name and t["display_symbol"] == meta.symbol
        assert t["bcmr"]["token"] == {
            "category": cat,
            "decimals": meta.decimals,
            "symbol": meta.symbol,
        }
        assert (t["tvl_sats"], t["tvl_tokens"], t["pools"]) == (sats, tokens, n)
        assert t["price_now"] == p_now and t["price_24h"] == p24
        if p_now is not None and p24 is not None:
            assert t["change_24h_bp"] == round((p_now / p24 - 1) * 10_000)
        assert t["trade_count"] == len(day)
        assert t["trade_volume"] == sum(x.volume_sats for x in day)
        assert t["score"] == sats + t["trade_volume"]
        want_apy, _ = apy(o, now - 30 * DAY, now, cat)
        assert abs(t["apy_30d_bp"] - want_apy * 100) <= 1
        assert t["price_now_usd"] is None
    ranks = sorted(objs, key=lambda t: t["score_rank"])
    assert [t["score_rank"] for t in ranks] == list(range(1, len(objs) + 1))
    assert [t["score"] for t in ranks] == sorted((t["score"] for t in objs), reverse=True)
    assert objs == ranks  # default: by score, descending


@pytest.mark.parametrize(
    ("by", "field"),
    [
        ("tvl", "tvl_sats"),
        ("volume", "trade_volume"),
        ("price_change", "change_24h_bp"),
        ("apy", "apy_30d_bp"),
        ("trade_count", "trade_count"),
        ("name", "display_name"),
    ],
)
async def test_token_list_sorting(
    client: httpx.AsyncClient, world: World, by: str, field: str
) -> None:
    for order in ("asc", "desc"):
        objs = await get(client, f"/dex/tokens/list_cached?by={by}&order={order}")
        values = [o[field] for o in objs if o[field] is not None]
        if by == "name":
            values = [v.casefold() for v in values]
        assert values == sorted(values, reverse=order == "desc")
        nulls = [i for i, o in enumerate(objs) if o[field] is None]
        assert nulls == list(range(len(objs) - len(nulls), len(objs)))  # nulls last
    page = await get(client, f"/dex/tokens/list_cached?by={by}&limit=2&offset=1")
    whole = await get(client, f"/dex/tokens/list_cached?by={by}")
    assert page == whole[1:3]


async def test_token_list_by_ids_and_searches(client: httpx.AsyncClient, world: World) -> None:
    o = world.oracle
    whole = {t["token_id"]: t for t in await get(client, "/dex/tokens/list_cached")}
    cats = o.categories()
    ids = ",".join([cats[0], cats[2], "ab" * 32])  # an unknown id is left out
    got = await get(client, f"/dex/tokens/list_cached_by_ids?ids={ids}&by=tvl&order=asc")
    assert [t["token_id"] for t in got] == sorted(
        [cats[0], cats[2]], key=lambda c: whole[c]["tvl_sats"]
    )
    drgn = {t.category for t in world.ledger.tokens_with_symbol("DRGN")}
    found = await get(client, "/dex/tokens/search_cached?q=drgn")
    assert {t["token_id"] for t in found} == drgn & set(cats)
    by_name = await get(client, "/dex/tokens/search_cached?q=Dragon%20G")
    assert [t["display_name"] for t in by_name] == ["Dragon Gold"]
    prefix = cats[1][:6]
    by_id = await get(client, f"/dex/tokens/search_cached?q={prefix}")
    assert cats[1] in {t["token_id"] for t in by_id}
    assert all(
        t["token_id"].startswith(prefix)
        or prefix in (t["display_symbol"] or "").lower()
        or prefix in (t["display_name"] or "").lower()
        for t in by_id
    )
    # by volume: the last 24 h by default, then any window
    vol = await get(client, "/dex/tokens/list_by_volume")
    day = {c: o.trades_in(world.now - DAY, world.now, c) for c in cats}
    assert vol["period_start"] == world.now - DAY and vol["period_end"] == world.now
    want: list[dict[str, Any]] = sorted(
        (
            {
                "token_id": c,
                "display_symbol": world.ledger.token(c).symbol,
                "display_name": world.ledger.token(c).name,
                "volume_sats": sum(t.volume_sats for t in day[c]),
                "volume_tokens": sum(t.volume_tokens for t in day[c]),
                "trade_count": len(day[c]),
            }
            for c in cats
        ),
        key=lambda i: (-i["volume_sats"], i["token_id"]),
    )
    assert vol["tokens"] == want
    start = min(b.time for b in o.blocks.values() if b.height > 0)
    full = await get(client, f"/dex/tokens/list_by_volume?start={start}&end={world.now}&limit=2")
    assert [i["volume_sats"] for i in full["tokens"]] == sorted(
        (sum(t.volume_sats for t in o.trades_in(start, world.now, c)) for c in cats),
        reverse=True,
    )[:2]
    spice = await get(client, "/dex/tokens/search_by_volume?search_query=spice")
    assert [i["display_symbol"] for i in spice["tokens"]] == ["SPICE"]


async def test_symbols_resolve_and_ambiguity_lists_candidates(
    client: httpx.AsyncClient, world: World
) -> None:
    spice = world.ledger.tokens_with_symbol("SPICE")[0].category
    by_symbol = await get(client, "/dex/contract/count/spice")
    assert by_symbol == await get(client, f"/dex/contract/count/{spice}")
    assert await get(client, "/dex/pool/active?token=SPICE") == await get(
        client, f"/dex/pool/active?token={spice}"
    )
    r = await client.get("/dex/contract/count/DRGN")
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "ambiguous_symbol"
    assert {c["token_id"] for c in err["candidates"]} == {
        t.category for t in world.ledger.tokens_with_symbol("DRGN")
    }
    assert all(c["token_id"] in err["message"] for c in err["candidates"])
    r = await client.get("/dex/contract/count/NOSUCH")
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_token"
