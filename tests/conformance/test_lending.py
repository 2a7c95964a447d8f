"""Lending, prefixes `/lending/v11` and `/lending`: every path of both tables answers for the
devnet's real loans and allowances; the stated limits (history 50 / 200, bar and pool history
100 / 1000) and defaults (offset 0, staking window 604800); the known facts (action kinds,
`mtp` on bar and pool rows, newest first, `since`, the delegate hash on v11 active loans,
`excludes_bch_pot`). Row field names beyond the spec's come from docs/api-lending.md (the spec
leaves them to the project: "not shown")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conformance.client import Ladle, has_type, is_hex64

# One `ladle up` on the package's loop; it checks broadcast scripts with libauth (Node).
pytestmark = [pytest.mark.asyncio(loop_scope="package"), pytest.mark.node]

# "Known: action kinds of a loan are borrow, repay, redeem, refinance, add_collateral."
ACTION_KINDS = {"borrow", "repay", "redeem", "refinance", "add_collateral"}
V11 = "/lending/v11"
V1 = "/lending"


def _live_allowance(ladle: Ladle) -> dict[str, Any]:
    records = ladle.ledger["extensions"]["lending"]["records"]
    claimed = {r["spent"] for r in records if r["kind"] == "claim"}
    live = [
        r for r in records if r["kind"] == "allowance" and f"{r['txid']}:{r['vout']}" not in claimed
    ]
    assert live, "the lending activity leaves an allowance"
    first: dict[str, Any] = live[0]
    return first


def _paths(ladle: Ladle) -> list[tuple[str, dict[str, str]]]:
    [v11_loan, *_] = ladle.loans("v11").values()
    [v1_loan, *_] = ladle.loans("v1").values()
    owner = _live_allowance(ladle)["owner_hash"]
    return [
        (f"{V11}/allowances/{owner}", {}),
        (f"{V11}/bar/history", {}),
        (f"{V11}/bar/history", {"since": "0", "limit": "5"}),
        (f"{V11}/crankable", {}),
        (f"{V11}/crankable", {"now": str(ladle.ledger["chain"]["end_time"])}),
        (f"{V11}/history", {}),
        (f"{V11}/history", {"offset": "1", "limit": "2", "nfth": v11_loan}),
        (f"{V11}/loan/{v11_loan}/history", {}),
        (f"{V11}/loans/active", {}),
        (f"{V11}/pool/history", {}),
        (f"{V11}/pool/history", {"since": "0", "limit": "5"}),
        (f"{V11}/staking/apr", {}),
        (f"{V11}/staking/apr", {"window": "86400"}),
        (f"{V11}/stats", {}),
        (f"{V1}/history", {}),
        (f"{V1}/history", {"offset": "0", "limit": "2", "nfth": v1_loan}),
        (f"{V1}/loan/{v1_loan}/history", {}),
        (f"{V1}/loans/active", {}),
        (f"{V1}/stats", {}),
    ]


async def _get(api: httpx.AsyncClient, path: str, **params: str | int) -> Any:
    r = await api.get(path, params=params)
    assert r.status_code == 200, f"{path} {params}: {r.status_code} {r.text}"
    return r.json()


async def test_every_path_answers(ladle: Ladle, api: httpx.AsyncClient) -> None:
    for path, params in _paths(ladle):
        body = await _get(api, path, **params)
        assert isinstance(body, (list, dict)), path


async def test_allowances_of_an_owner(ladle: Ladle, api: httpx.AsyncClient) -> None:
    allowance = _live_allowance(ladle)
    rows = await _get(api, f"{V11}/allowances/{allowance['owner_hash']}")
    assert allowance["txid"] in str(rows), "the live allowance output is listed"
    records = ladle.ledger["extensions"]["lending"]["records"]
    claimed = {r["spent"].split(":")[0] for r in records if r["kind"] == "claim"}
    spent = [r for r in records if r["kind"] == "allowance" and r["txid"] in claimed]
    for record in spent:
        rows = await _get(api, f"{V11}/allowances/{record['owner_hash']}")
        assert record["txid"] not in str(rows), "a claimed allowance is not live"


@pytest.mark.parametrize("prefix", [V11, V1])
async def test_active_loans(ladle: Ladle, api: httpx.AsyncClient, prefix: str) -> None:
    version = "v11" if prefix == V11 else "v1"
    rows = await _get(api, f"{prefix}/loans/active")
    assert isinstance(rows, list)
    want = ladle.active_loans(version)
    assert sorted(h for h in want if h in str(rows)) == want, "each active loan is listed"
    assert len(rows) == len(want)
    if prefix == V11:
        assert rows, "the devnet leaves a v11 loan open"
        for row in rows:
            assert "delegate_hash" in row, "active-loan rows of v11 include a delegate hash"
            assert row["delegate_hash"] is None or is_hex64(row["delegate_hash"])


@pytest.mark.parametrize("prefix", [V11, V1])
async def test_history_limits_and_defaults(api: httpx.AsyncClient, prefix: str) -> None:
    """limit default 50, max 200; offset default 0."""
    default = await _get(api, f"{prefix}/history")
    assert isinstance(default, list) and default
    assert len(default) <= 50
    assert await _get(api, f"{prefix}/history", limit=50) == default
    assert await _get(api, f"{prefix}/history", offset=0) == default
    everything = await _get(api, f"{prefix}/history", limit=200)
    assert everything[: len(default)] == default
    assert len(default) == min(50, len(everything))
    assert await _get(api, f"{prefix}/history", limit=1) == everything[:1]
    if len(everything) > 1:
        assert await _get(api, f"{prefix}/history", offset=1, limit=1) == everything[1:2]
    r = await api.get(f"{prefix}/history", params={"limit": 201})
    assert 400 <= r.status_code < 500, f"limit 201 is above the max: {r.status_code} {r.text}"


@pytest.mark.parametrize("prefix", [V11, V1])
async def test_history_nfth_filter(ladle: Ladle, api: httpx.AsyncClient, prefix: str) -> None:
    loans = list(ladle.loans("v11" if prefix == V11 else "v1").values())
    assert len(loans) >= 2
    one = await _get(api, f"{prefix}/history", nfth=loans[0])
    assert one and all(loans[0] in row.values() for row in one)
    two = await _get(api, f"{prefix}/history", nfth=",".join(loans[:2]))
    assert all(row["borrower_hash"] in loans[:2] for row in two)
    assert {row["borrower_hash"] for row in two} == set(loans[:2])


@pytest.mark.parametrize("prefix", [V11, V1])
async def test_action_kinds(ladle: Ladle, api: httpx.AsyncClient, prefix: str) -> None:
    """Loan actions are of the five known kinds, in the global and the per-loan history."""
    rows = await _get(api, f"{prefix}/history", limit=200)
    assert rows
    for hash_ in ladle.loans("v11" if prefix == V11 else "v1").values():
        rows += await _get(api, f"{prefix}/loan/{hash_}/history")
    kinds = {row["kind"] for row in rows}
    allowed = ACTION_KINDS | documented_extensions("v11" if prefix == V11 else "v1")
    assert kinds <= allowed, sorted(kinds - allowed)


def documented_extensions(version: str) -> set[str]:
    """Kinds beyond the spec's five, as docs/api-lending.md's kind table lists them for a
    version ("| `kind` | v1, v11 (extension) | …"): the issue allows only documented ones."""
    table = (Path(__file__).parents[2] / "docs" / "api-lending.md").read_text()
    found = set()
    for kind, versions in re.findall(r"^\| `(\w+)` \| ([^|]*\(extension\)[^|]*)\|", table, re.M):
        if version in re.findall(r"v1{1,2}\b", versions):
            found.add(kind)
    return found


@pytest.mark.parametrize("prefix", [V11, V1])
async def test_loan_history_is_ascending(ladle: Ladle, api: httpx.AsyncClient, prefix: str) -> None:
    for hash_ in ladle.loans("v11" if prefix == V11 else "v1").values():
        rows = await _get(api, f"{prefix}/loan/{hash_}/history")
        assert rows, f"loan {hash_} has actions"
        assert all(hash_ in row.values() for row in rows)
        times = [row["time"] for row in rows]
        assert times == sorted(times), "sorted by timestamp ascending"
        assert rows[0]["kind"] == "borrow"


@pytest.mark.parametrize("state", ["bar", "pool"])
async def test_state_history(ladle: Ladle, api: httpx.AsyncClient, state: str) -> None:
    """mtp on every row, newest first, only rows with mtp > since, limit 100 / 1000."""
    path = f"{V11}/{state}/history"
    rows = await _get(api, path)
    assert isinstance(rows, list) and len(rows) >= 2
    assert all(has_type(row["mtp"], "integer") for row in rows)
    mtps = [row["mtp"] for row in rows]
    assert mtps == sorted(mtps, reverse=True), "newest first"
    assert len(rows) <= 100
    assert await _get(api, path, limit=100) == rows
    assert await _get(api, path, limit=1000) == rows
    assert await _get(api, path, limit=1) == rows[:1]
    since = mtps[len(mtps) // 2]
    after = await _get(api, path, since=since)
    assert after == [row for row in rows if row["mtp"] > since]
    r = await api.get(path, params={"limit": 1001})
    assert 400 <= r.status_code < 500, f"limit 1001 is above the max: {r.status_code} {r.text}"


async def test_staking_yield(api: httpx.AsyncClient) -> None:
    """window default 604800; bar and pool each a number or null; excludes_bch_pot flags the
    pool figure."""
    default = await _get(api, f"{V11}/staking/apr")
    week = await _get(api, f"{V11}/staking/apr", window=604800)
    for body in (default, week):
        assert body["excludes_bch_pot"] is True
        for name in ("bar", "pool"):
            assert body[name] is None or has_type(body[name], "number"), body
    assert {k: default[k] for k in ("bar", "pool")} == {k: week[k] for k in ("bar", "pool")}


async def test_crankable_and_stats(ladle: Ladle, api: httpx.AsyncClient) -> None:
    now = ladle.ledger["chain"]["end_time"]
    assert isinstance(await _get(api, f"{V11}/crankable", now=now), (dict, list))
    for prefix in (V11, V1):
        assert isinstance(await _get(api, f"{prefix}/stats"), dict)
