"""Property: whatever the parameters, no endpoint answers 5xx, and every answer has its
documented shape (the client hook validates each one against the OpenAPI document)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.rest.conftest import World
from tests.rest.schemas import document

JUNK_NAMES = ("bogus", "limit", "token", "_", "start")


def known_values(world: World) -> dict[str, list[str]]:
    o = world.oracle
    cats = o.categories()
    live = o.utxos_live_at()
    t0 = min(b.time for b in o.blocks.values() if b.height > 0)
    return {
        "token": [*cats[:3], "SPICE", "spice", "DRGN", "FURU"],
        "pkh": [live[0].owner, live[-1].owner],
        "pool_id": [live[0].lineage, f"{cats[0]}:0"],
        "time": [str(t0), str(world.now), str(t0 + 86_400)],
        "ids": [",".join(cats[:2]), cats[0]],
        "q": ["dr", "SPI", cats[0][:5]],
        "by": ["score", "tvl", "volume", "price_change", "apy", "trade_count", "name"],
        "order": ["asc", "desc"],
    }


VALID_INTS = {"limit": (1, 600), "offset": (0, 50), "stepsize": (60, 10**6)}


def value_strategy(world: World, name: str, valid: bool) -> st.SearchStrategy[str]:
    """A plausible value of the parameter (`valid`), or anything at all."""
    known = known_values(world)
    kind = {
        "start": "time",
        "end": "time",
        "timestamp": "time",
        "search_query": "q",
        "category": "token",
        "token_id": "token",
    }.get(name, name)
    if valid and kind in known:
        return st.sampled_from(known[kind])
    if valid and name in VALID_INTS:
        return st.integers(*VALID_INTS[name]).map(str)
    choices: list[st.SearchStrategy[str]] = [
        st.text(max_size=12),
        st.integers(-(10**12), 10**13).map(str),
        st.integers(0, 10**6).map(str),
        st.text("0123456789abcdefABCDEF:,", min_size=60, max_size=70),
        st.sampled_from(["0", "-0", "00", "1e3", "1.0", " 1", "0x10", "NaN", "∞", "%00"]),
    ]
    if kind in known:
        choices.append(st.sampled_from(known[kind]))
    return st.one_of(choices)


@st.composite
def requests(draw: st.DrawFn, world: World) -> str:
    doc = document()
    path: str = draw(st.sampled_from(sorted(doc["paths"])))
    valid = draw(st.booleans())
    params: list[dict[str, Any]] = doc["paths"][path]["get"].get("parameters", [])
    url = path
    query: list[tuple[str, str]] = []
    for p in params:
        if p["in"] == "path":
            value = draw(value_strategy(world, p["name"], valid))
            url = url.replace("{" + p["name"] + "}", quote(value, safe="") or "x")
        elif draw(st.booleans()):
            query.append((p["name"], draw(value_strategy(world, p["name"], valid))))
    if draw(st.integers(0, 9)) == 0:
        query.append((draw(st.sampled_from(JUNK_NAMES)), draw(st.text(max_size=5))))
    if query:
        url += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in query)
    return url


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_no_parameters_make_a_server_error(
    client: httpx.AsyncClient, world: World, data: st.DataObject
) -> None:
    url = data.draw(requests(world))
    r = await client.get(url)
    assert r.status_code in (200, 400, 404), (url, r.status_code, r.text)
    if r.status_code == 400:
        assert r.json()["error"]["code"] in (
            "invalid_parameter",
            "missing_parameter",
            "unknown_parameter",
            "ambiguous_symbol",
        )
