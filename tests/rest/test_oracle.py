"""`/oracle/feed/<token>/history` and `/oracle/feed/closest` against the scenario's oracle
updates in the ledger (time, price, txid, sequence; the block hash from the chain)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from protocols.ledger import OracleUpdate
from tests.rest.conftest import api_client
from tests.rest.protocol_world import ProtocolWorld, error, get, protocol_world

EMPTY_FEED = "ab" * 32


@pytest.fixture(scope="module")
def pworld(tmp_path_factory: pytest.TempPathFactory) -> ProtocolWorld:
    return protocol_world(tmp_path_factory.mktemp("protocol"))


@pytest.fixture
async def client(pworld: ProtocolWorld) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(pworld.config()) as c:
        yield c


def updates(world: ProtocolWorld) -> list[OracleUpdate]:
    """The confirmed updates in time order (ties by sequence)."""
    ups = [u for u in world.ledger.oracle_updates if u.height is not None]
    return sorted(ups, key=lambda u: (u.timestamp, u.sequence))


def entry(world: ProtocolWorld, u: OracleUpdate) -> dict[str, Any]:
    assert u.height is not None
    return {
        "time": u.timestamp,
        "price": u.price,
        "txid": u.txid,
        "blockhash": world.blockhash[u.height],
        "sequence": u.sequence,
    }


def closest_entry(world: ProtocolWorld, u: OracleUpdate) -> dict[str, Any]:
    """The specification's closest-price object (not the history entry's shape)."""
    assert u.height is not None
    return {
        "oracle_timestamp": u.timestamp,
        "oracle_price": u.price,
        "oracle_sequence": u.sequence,
        "token_id": world.ledger.oracle.category,
        "txid": u.txid,
        "blockhash": world.blockhash[u.height],
    }


async def test_history_is_every_update_in_the_window(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    cat = pworld.ledger.oracle.category
    ups = updates(pworld)
    assert len(ups) >= 10 and len({u.height for u in ups}) > 5
    got = await get(client, f"/oracle/feed/{cat}/history?start=0")
    assert got == [entry(pworld, u) for u in ups]
    assert await get(client, f"/oracle/feed/{cat.upper()}/history?start=0") == got
    # A window whose both ends are updates includes them; one second inside excludes them.
    a, b = ups[2], ups[-3]
    inside = [entry(pworld, u) for u in ups if a.timestamp <= u.timestamp <= b.timestamp]
    url = f"/oracle/feed/{cat}/history?start={a.timestamp}&end={b.timestamp}"
    assert await get(client, url) == inside
    url = f"/oracle/feed/{cat}/history?start={a.timestamp + 1}&end={b.timestamp - 1}"
    assert await get(client, url) == inside[1:-1]
    # Before the first update: nothing.
    url = f"/oracle/feed/{cat}/history?start=0&end={ups[0].timestamp - 1}"
    assert await get(client, url) == []


@pytest.mark.parametrize("step", [60, 3_600, 4 * 3_600 + 7, 86_400, 10 * 86_400])
async def test_history_with_stepsize_is_the_last_update_per_interval(
    client: httpx.AsyncClient, pworld: ProtocolWorld, step: int
) -> None:
    cat = pworld.ledger.oracle.category
    ups = updates(pworld)
    start = ups[1].timestamp - 1_000
    end = ups[-2].timestamp
    last: dict[int, OracleUpdate] = {}
    for u in ups:
        if start <= u.timestamp <= end:
            last[(u.timestamp - start) // step] = u
    want = [entry(pworld, last[k]) for k in sorted(last)]
    url = f"/oracle/feed/{cat}/history?start={start}&end={end}&stepsize={step}"
    assert await get(client, url) == want
    if step <= 3_600:  # updates are hours apart: every one is alone in its interval
        assert len(want) == sum(start <= u.timestamp <= end for u in ups)


async def test_closest_update(client: httpx.AsyncClient, pworld: ProtocolWorld) -> None:
    cat = pworld.ledger.oracle.category
    ups = updates(pworld)

    def closest(t: int) -> OracleUpdate:
        # The nearest by time; a tie goes to the earlier update (then the higher sequence).
        return min(ups, key=lambda u: (abs(u.timestamp - t), u.timestamp, -u.sequence))

    probes = [0, ups[0].timestamp - 1, ups[-1].timestamp + 10**6]
    for a, b in itertools.pairwise(ups):
        probes += [a.timestamp, a.timestamp + 1, b.timestamp - 1]
        gap = b.timestamp - a.timestamp
        probes.append(a.timestamp + gap // 2)  # a tie when the gap is even
        probes.append(a.timestamp + gap // 2 + 1)
    assert any((b.timestamp - a.timestamp) % 2 == 0 for a, b in itertools.pairwise(ups))
    for t in probes:
        if t > pworld.now:
            continue  # the index is complete only up to now
        got = await get(client, f"/oracle/feed/closest?token_id={cat}&timestamp={t}")
        assert got == closest_entry(pworld, closest(t)), t
    # A tie: exactly midway between two updates → the earlier one.
    a, b = next((a, b) for a, b in itertools.pairwise(ups) if (b.timestamp - a.timestamp) % 2 == 0)
    mid = (a.timestamp + b.timestamp) // 2
    got = await get(client, f"/oracle/feed/closest?token_id={cat}&timestamp={mid}")
    assert got == closest_entry(pworld, a)
    # Default: now (after the last update).
    got = await get(client, f"/oracle/feed/closest?token_id={cat.upper()}")
    assert got == closest_entry(pworld, closest(pworld.now)) == closest_entry(pworld, ups[-1])
    assert got["token_id"] == cat  # lower case, whatever case was asked


async def test_a_feed_without_data(client: httpx.AsyncClient) -> None:
    assert await get(client, f"/oracle/feed/{EMPTY_FEED}/history?start=0") == []
    assert await get(client, f"/oracle/feed/closest?token_id={EMPTY_FEED}") is None
    assert await get(client, f"/oracle/feed/closest?token_id={EMPTY_FEED}&timestamp=5") is None


async def test_bad_requests(client: httpx.AsyncClient, pworld: ProtocolWorld) -> None:
    cat = pworld.ledger.oracle.category
    # Malformed ids: 400 on the history, 404 on closest (the contract).
    for bad in ("zz", cat[:-1], cat + "0", "SPICE"):
        e = await error(client, f"/oracle/feed/{bad}/history?start=0", 400)
        assert (e["code"], e["parameter"]) == ("invalid_parameter", "token")
        e = await error(client, f"/oracle/feed/closest?token_id={bad}", 404)
        assert e["code"] == "unknown_token"
    e = await error(client, f"/oracle/feed/{cat}/history", 400)
    assert (e["code"], e["parameter"]) == ("missing_parameter", "start")
    e = await error(client, f"/oracle/feed/{cat}/history?end=5", 400)
    assert (e["code"], e["parameter"]) == ("missing_parameter", "start")
    assert await get(client, f"/oracle/feed/{cat}/history?start=10&end=9") == []
    e = await error(client, f"/oracle/feed/{cat}/history?start=0&end=100&stepsize=59", 400)
    assert e["parameter"] == "stepsize"
    e = await error(client, f"/oracle/feed/{cat}/history?start=0&token={cat}", 400)
    assert e["code"] == "unknown_parameter"
    e = await error(client, "/oracle/feed/closest", 400)
    assert (e["code"], e["parameter"]) == ("missing_parameter", "token_id")
    e = await error(client, f"/oracle/feed/closest?token_id={cat}&timestamp=-1", 400)
    assert e["parameter"] == "timestamp"


async def test_answers_are_cached_per_version(
    client: httpx.AsyncClient, pworld: ProtocolWorld
) -> None:
    cat = pworld.ledger.oracle.category
    r = await client.get(f"/oracle/feed/{cat}/history?start=0")
    assert r.status_code == 200 and r.headers["etag"]
    again = await client.get(
        f"/oracle/feed/{cat}/history?start=0", headers={"If-None-Match": r.headers["etag"]}
    )
    assert again.status_code == 304
    other = await client.get(f"/oracle/feed/{cat}/history?start=1")
    assert other.headers["etag"] != r.headers["etag"]
