"""The lending endpoints against an index of a devnet scenario with full v1 and v11 lifecycles.

Every expected value is computed here from the scenario ledger (`extensions["lending"]`), the
chain's header times and the ledger's oracle updates, with the protocol's formulas written out
(docs/api-lending.md); every answer is validated against the OpenAPI document by the client.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.rest.conftest import api_client
from tests.rest.lending_world import ENDING, LOAN_KINDS, Index, LendingWorld, build_world
from tests.rest.schemas import document, template

YEAR = 365 * 86_400
DAY = 86_400
UNKNOWN = "ab" * 32


@pytest.fixture(scope="module")
def lw(tmp_path_factory: pytest.TempPathFactory) -> LendingWorld:
    return build_world(tmp_path_factory.mktemp("lending"))


@pytest.fixture
async def full(lw: LendingWorld) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(lw.config(lw.full)) as c:
        yield c


@pytest.fixture
async def mid(lw: LendingWorld) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(lw.config(lw.mid)) as c:
        yield c


async def get(client: httpx.AsyncClient, url: str) -> Any:
    r = await client.get(url)
    assert r.status_code == 200, (url, r.text)
    return r.json()


# --- the ledger, read independently ---------------------------------------------------------


def interest(principal: int, bp: int, now: int, ts: int) -> int:
    """`1 + principal × bp × ceil_days / 3_650_000` cents, ceil_days ≥ 0 (the reference)."""
    days = max(0, -(-(now - ts) // DAY))
    return 1 + principal * bp * days // 3_650_000


def loan_json(r: dict[str, Any], version: str) -> dict[str, Any]:
    out = {k: r[k] for k in ("txid", "vout", "height", "time", "borrower_hash")}
    if version == "v11":
        out["delegate_hash"] = r["delegate_hash"]
    return out | {k: r[k] for k in ("principal", "rate_bp", "loan_ts", "collateral")}


def active(lw: LendingWorld, index: Index, version: str) -> list[dict[str, Any]]:
    """Each loan's last record at the index tip, unless it ended; in chain order."""
    last: dict[str, dict[str, Any]] = {}
    for r in lw.records(index):
        if r["kind"] in LOAN_KINDS:
            last[r["loan"]] = r
    rows = [r for r in last.values() if r["kind"] not in ENDING and r["version"] == version]
    return [loan_json(r, version) for r in sorted(rows, key=lw.order)]


def action_json(lw: LendingWorld, r: dict[str, Any], version: str) -> dict[str, Any]:
    ends = r["kind"] in ENDING
    before = r.get("before", r if ends else None)
    after = None if ends else r
    out: dict[str, Any] = {
        "txid": r["txid"],
        "height": r["height"],
        "time": r["time"],
        "mtp": lw.mtp(r["height"]),
        "kind": r["kind"],
        "borrower_hash": r["borrower_hash"],
    }
    if version == "v11":
        out["delegate_hash"] = r["delegate_hash"]
    for field, key in (
        ("collateral", "collateral"),
        ("principal", "principal"),
        ("rate_bp", "rate_bp"),
        ("loan_ts", "loan_ts"),
    ):
        out[f"{field}_before"] = None if before is None else before[key]
        out[f"{field}_after"] = None if after is None else after[key]
    out["interest"] = r.get("interest")
    return out


def actions(lw: LendingWorld, index: Index, version: str) -> list[dict[str, Any]]:
    """Newest first."""
    rows = [r for r in lw.records(index) if r["kind"] in LOAN_KINDS and r["version"] == version]
    return [action_json(lw, r, version) for r in sorted(rows, key=lw.order, reverse=True)]


def states(lw: LendingWorld, index: Index, kind: str) -> list[dict[str, Any]]:
    """Newest first."""
    rows = [r for r in lw.records(index, "state") if r["state"] == kind]
    out = []
    for r in sorted(rows, key=lw.order, reverse=True):
        row = {k: r[k] for k in ("txid", "vout", "height", "time", "staked", "shares")}
        row |= {"mtp": lw.mtp(r["height"]), "share_price": r["staked"] / r["shares"]}
        if kind == "pool":
            row["bch_pot"] = r["bch_pot"]
        out.append(row)
    return out


def bucket(collateral: int, price: int, owed: int) -> str:
    ratio = Fraction(100 * collateral * price, 100_000_000 * owed)
    for bound, name in ((120, "<120"), (150, "120-150"), (200, "150-200"), (300, "200-300")):
        if ratio < bound:
            return name
    return ">=300"


def crankable(
    lw: LendingWorld, index: Index, now: int, price: int | None, rate: int | None
) -> list[dict[str, Any]]:
    out = []
    for x in active(lw, index, "v11"):
        owed = interest(x["principal"], x["rate_bp"], now, x["loan_ts"])
        debt = x["principal"] + owed
        reason = None
        if price is not None and x["collateral"] * 10 * price <= 12 * 100_000_000 * debt:
            reason = "liquidate"
        elif rate is not None and rate >= x["rate_bp"]:
            reason = "redeem"
        elif now - x["loan_ts"] >= 30 * DAY:
            reason = "accrue"
        if reason is not None and x["collateral"] >= 12_000:
            out.append(x | {"reason": reason, "interest": owed, "debt": debt})
    return out


# --- loans and actions ----------------------------------------------------------------------


async def test_active_loans_equal_the_ledger(
    lw: LendingWorld, mid: httpx.AsyncClient, full: httpx.AsyncClient
) -> None:
    for client, index in ((mid, lw.mid), (full, lw.full)):
        for path, version in (("/lending/v11", "v11"), ("/lending", "v1")):
            want = active(lw, index, version)
            assert await get(client, f"{path}/loans/active") == want
    # The cut has every kind of loan: v1 and v11, with and without a delegate.
    mid_v11 = active(lw, lw.mid, "v11")
    assert len(mid_v11) == 3 and len(active(lw, lw.mid, "v1")) == 3
    assert {x["delegate_hash"] is None for x in mid_v11} == {True, False}
    assert active(lw, lw.full, "v1") == [] and len(active(lw, lw.full, "v11")) == 1


async def test_history_is_newest_first_and_pages(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    for path, version in (("/lending/v11", "v11"), ("/lending", "v1")):
        want = actions(lw, lw.full, version)
        assert len(want) >= 5
        assert await get(full, f"{path}/history") == want
        for offset, limit in ((0, 1), (1, 2), (3, 200), (len(want), 5), (len(want) + 7, 1)):
            page = await get(full, f"{path}/history?offset={offset}&limit={limit}")
            assert page == want[offset : offset + limit]
    kinds = {a["kind"] for v in ("v1", "v11") for a in actions(lw, lw.full, v)}
    assert kinds == LOAN_KINDS


async def test_history_filters_by_nfth(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    want = actions(lw, lw.full, "v11")
    hashes = sorted({a["borrower_hash"] for a in want})
    assert len(hashes) == 4
    one, two = hashes[0], hashes[1]
    assert await get(full, f"/lending/v11/history?nfth={one}") == [
        a for a in want if a["borrower_hash"] == one
    ]
    both = await get(full, f"/lending/v11/history?nfth={one},{two.upper()},{one}&limit=3")
    assert both == [a for a in want if a["borrower_hash"] in (one, two)][:3]
    assert await get(full, f"/lending/v11/history?nfth={UNKNOWN}") == []
    v1_hash = actions(lw, lw.full, "v1")[0]["borrower_hash"]
    assert await get(full, f"/lending/v11/history?nfth={v1_hash}") == []  # another version's


SPEC_KINDS = {"borrow", "repay", "redeem", "refinance", "add_collateral"}
VERSION_KINDS = {"v1": SPEC_KINDS | {"liquidation"}, "v11": LOAN_KINDS}


async def test_every_action_kind_on_every_deployment(
    lw: LendingWorld, full: httpx.AsyncClient
) -> None:
    """Issue 18 item 6. Indexed as `ladle up` indexes (the mainnet v1 deployment beside the
    devnet's v1 and v11), each version's history, global and per loan, equals the ledger action
    by action, and holds every kind the version has: the spec's five on both, `liquidation` on
    both, `delegate` and `accrue` on v11 (docs/api-lending.md)."""
    for path, version in (("/lending", "v1"), ("/lending/v11", "v11")):
        want = actions(lw, lw.full, version)
        assert len(want) < 200
        got = await get(full, f"{path}/history?limit=200")
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g == w
        kinds = {a["kind"] for a in got}
        assert kinds == VERSION_KINDS[version], version
        for h in {a["borrower_hash"] for a in want}:
            chain_order = [a for a in reversed(want) if a["borrower_hash"] == h]
            assert await get(full, f"{path}/loan/{h}/history") == chain_order
            assert await get(full, f"{path}/history?nfth={h}") == chain_order[::-1]


async def test_loan_history_is_in_chain_order(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    names: dict[str, tuple[str, str]] = {}
    for r in lw.records(lw.full):
        if r["kind"] in LOAN_KINDS:
            names[r["loan"]] = (r["borrower_hash"], r["version"])
    assert len(names) == 7
    for name, (h, version) in names.items():
        path = "/lending/v11" if version == "v11" else "/lending"
        want = [
            action_json(lw, r, version)
            for r in sorted(lw.records(lw.full), key=lw.order)
            if r.get("loan") == name and r["kind"] in LOAN_KINDS
        ]
        assert await get(full, f"{path}/loan/{h}/history") == want
        assert await get(full, f"{path}/loan/{h.upper()}/history") == want
        other = "/lending" if version == "v11" else "/lending/v11"
        assert await get(full, f"{other}/loan/{h}/history") == []
    a = next(h for n, (h, _) in names.items() if n == "A")
    kinds = [x["kind"] for x in await get(full, f"/lending/loan/{a}/history")]
    assert kinds == ["borrow", "add_collateral", "refinance", "repay"]
    assert await get(full, f"/lending/v11/loan/{UNKNOWN}/history") == []


# --- allowances, bar and pool ---------------------------------------------------------------


async def test_allowances_are_the_unspent_ones(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    claimed = {r["spent"] for r in lw.records(lw.full, "claim")}
    made = list(lw.records(lw.full, "allowance"))
    assert len(made) == 3 and len(claimed) == 1
    for r in made:
        got = await get(full, f"/lending/v11/allowances/{r['owner_hash']}")
        if f"{r['txid']}:{r['vout']}" in claimed:
            assert got == []
            continue
        assert got == [
            {
                "txid": r["txid"],
                "vout": r["vout"],
                "height": r["height"],
                "time": r["time"],
                "owner_hash": r["owner_hash"],
                "sats": r["sats"],
                "category": None,
                "token_amount": 0,
            }
        ]
    assert await get(full, f"/lending/v11/allowances/{UNKNOWN}") == []


async def test_bar_and_pool_history(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    for kind in ("bar", "pool"):
        url = f"/lending/v11/{kind}/history"
        want = states(lw, lw.full, kind)
        assert len(want) == 4
        assert await get(full, url) == want
        assert await get(full, f"{url}?limit=1") == want[:1]
        for row in want:
            since = row["mtp"]
            assert await get(full, f"{url}?since={since}") == [s for s in want if s["mtp"] > since]
            assert (
                await get(full, f"{url}?since={since - 1}&limit=2")
                == [s for s in want if s["mtp"] > since - 1][:2]
            )
        assert await get(full, f"{url}?since={lw.full.now}") == []
    pool = states(lw, lw.full, "pool")
    assert pool[0]["bch_pot"] > 0 and pool[-1]["bch_pot"] == 0


async def test_staking_apr(lw: LendingWorld, full: httpx.AsyncClient) -> None:
    now = lw.full.now

    def apr(kind: str, window: int) -> float | None:
        asc = states(lw, lw.full, kind)[::-1]

        def price(t: int) -> float | None:
            seen = [s["share_price"] for s in asc if s["mtp"] <= t]
            return seen[-1] if seen else None

        p0, p1 = price(now - window), price(now)
        return None if p0 is None or p1 is None else (p1 / p0 - 1) * YEAR / window

    first = min(s["mtp"] for s in states(lw, lw.full, "bar"))
    got = await get(full, "/lending/v11/staking/apr")
    assert got == {
        "now": now,
        "window": 604_800,
        "bar": None,  # the scenario is younger than a week: no coverage
        "pool": None,
        "excludes_bch_pot": True,
    }
    for window in (now - first, now - first + 3_600, now - first - 1, 1, 2 * DAY):
        got = await get(full, f"/lending/v11/staking/apr?window={window}")
        assert got["window"] == window and got["now"] == now and got["excludes_bch_pot"]
        for kind in ("bar", "pool"):
            want = apr(kind, window)
            assert (got[kind] is None) == (want is None), (kind, window)
            if want is not None:
                assert got[kind] == pytest.approx(want, rel=1e-12)
    covered = await get(full, f"/lending/v11/staking/apr?window={now - first}")
    assert covered["bar"] > 0 and covered["pool"] < 0  # interest in; the pool paid a debt


# --- stats and crankable --------------------------------------------------------------------


def expected_stats(
    lw: LendingWorld, index: Index, version: str, extra: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    now = index.now
    found = lw.price_at(index, now)
    assert found is not None
    price, price_time = found
    loans = active(lw, index, version) + (extra or [])
    owed = [
        x["principal"] + interest(x["principal"], x["rate_bp"], now, x["loan_ts"]) for x in loans
    ]
    buckets = dict.fromkeys(("<120", "120-150", "150-200", "200-300", ">=300"), 0)
    for x, debt in zip(loans, owed, strict=True):
        buckets[bucket(x["collateral"], price, debt)] += 1
    principal = sum(x["principal"] for x in loans)
    rate = lw.rate_at(index, now)
    return {
        "now": now,
        "loans": len(loans),
        "collateral": sum(x["collateral"] for x in loans),
        "principal": principal,
        "debt": sum(owed),
        "average_rate": sum(x["principal"] * x["rate_bp"] for x in loans) / principal
        if principal
        else None,
        "oracle_price": price,
        "oracle_time": price_time,
        "collateral_ratio": buckets,
        "redeemable": None if rate is None else sum(x["rate_bp"] <= rate[0] for x in loans),
        "rate_bp": None if rate is None else rate[0],
        "rate_time": None if rate is None else rate[1],
    }


async def test_stats(lw: LendingWorld, mid: httpx.AsyncClient, full: httpx.AsyncClient) -> None:
    for client, index in ((mid, lw.mid), (full, lw.full)):
        for path, version in (("/lending/v11", "v11"), ("/lending", "v1")):
            got = await get(client, f"{path}/stats")
            want = expected_stats(lw, index, version)
            assert got == want | {"average_rate": pytest.approx(want["average_rate"])}
    got = await get(full, "/lending/stats")  # v1 has no active loan left
    assert got["loans"] == 0 and got["average_rate"] is None and got["debt"] == 0
    assert sum((await get(mid, "/lending/stats"))["collateral_ratio"].values()) == 3


async def test_stats_and_crankable_without_a_price_feed(lw: LendingWorld) -> None:
    rate = lw.rate_at(lw.mid, lw.mid.now)
    assert rate is not None
    async with api_client(lw.config(lw.mid, usd_feed=None)) as c:
        got = await get(c, "/lending/v11/stats")
        assert got["oracle_price"] is None and got["collateral_ratio"] is None
        assert got["loans"] == 3 and got["rate_bp"] == rate[0]
        crank = await get(c, "/lending/v11/crankable")
        assert crank["price"] is None and crank["rate_bp"] == rate[0]
        assert crank["loans"] == crankable(lw, lw.mid, lw.mid.now, None, rate[0])
        assert {x["reason"] for x in crank["loans"]} == {"redeem"}  # no price: no liquidation
        crank = await get(c, "/lending/v11/crankable?price=1&rate_bp=0")
        assert crank["price"] == 1
        assert crank["loans"] == crankable(lw, lw.mid, lw.mid.now, 1, 0)


async def test_crankable_redeems_by_the_indexed_rate_oracle(
    lw: LendingWorld, mid: httpx.AsyncClient, full: httpx.AsyncClient
) -> None:
    """Without `rate_bp`, the rate is the rate oracle's at `now`: at the cut it stands at 360
    bp, so the 350 bp loan is listed as `redeem` and the 400 and 450 bp ones are not; at the
    end it is back at 200 bp and no loan is redeemable."""
    now = lw.mid.now
    found, rate = lw.price_at(lw.mid, now), lw.rate_at(lw.mid, now)
    assert found is not None and rate is not None
    price, bp = found[0], rate[0]
    assert bp == 360
    got = await get(mid, "/lending/v11/crankable")
    want = crankable(lw, lw.mid, now, price, bp)
    assert got == {"now": now, "price": price, "rate_bp": bp, "loans": want}
    loans = active(lw, lw.mid, "v11")
    assert sorted(x["rate_bp"] for x in loans) == [350, 400, 450]
    assert [(x["rate_bp"], x["reason"]) for x in got["loans"]] == [(350, "redeem")]
    # Before the oracle rose (the rate at a time before its update) nothing is redeemable.
    before = list(lw.records(lw.mid, "rate"))[-1]["timestamp"] - 1
    earlier, then = lw.rate_at(lw.mid, before), lw.price_at(lw.mid, before)
    assert earlier is not None and earlier[0] < 350 and then is not None
    got = await get(mid, f"/lending/v11/crankable?now={before}")
    assert got["rate_bp"] == earlier[0]
    assert got["loans"] == crankable(lw, lw.mid, before, then[0], earlier[0])
    assert "redeem" not in {x["reason"] for x in got["loans"]}
    # The end of the history: 200 bp, the remaining 350 bp loan is not redeemable.
    end = lw.rate_at(lw.full, lw.full.now)
    assert end is not None and end[0] == 200
    got = await get(full, "/lending/v11/crankable")
    assert got["rate_bp"] == 200
    assert "redeem" not in {x["reason"] for x in got["loans"]}


async def test_crankable(lw: LendingWorld, mid: httpx.AsyncClient) -> None:
    now = lw.mid.now
    found = lw.price_at(lw.mid, now)
    assert found is not None
    price = found[0]
    loans = active(lw, lw.mid, "v11")
    month = max(x["loan_ts"] for x in loans) + 30 * DAY  # every loan 30 days old
    first = min(x["loan_ts"] for x in loans) + 30 * DAY  # the oldest loan 30 days old
    cases: list[tuple[str, int, int | None, int | None, set[str]]] = [
        (f"now={month}&rate_bp=0", month, None, 0, {"accrue"}),
        (f"now={first}&rate_bp=0", first, None, 0, {"accrue"}),
        (f"now={first - 1}&rate_bp=0", first - 1, None, 0, set()),
        ("price=1", now, 1, None, {"liquidate"}),
        ("rate_bp=400", now, None, 400, {"redeem"}),
        (f"rate_bp=400&now={month}", month, None, 400, {"redeem", "accrue"}),
        (f"price=1&rate_bp=65535&now={month}", month, 1, 65_535, {"liquidate"}),
    ]
    for query, at, given_price, given_rate, reasons in cases:
        got = await get(mid, f"/lending/v11/crankable?{query}")
        used = price if given_price is None else given_price
        oracle = lw.rate_at(lw.mid, at)
        rate = given_rate if given_rate is not None else None if oracle is None else oracle[0]
        want = crankable(lw, lw.mid, at, used, rate)
        assert got == {"now": at, "price": used, "rate_bp": rate, "loans": want}, query
        assert {x["reason"] for x in want} == reasons, query
    redeemable = await get(mid, "/lending/v11/crankable?rate_bp=400")
    assert {x["rate_bp"] for x in redeemable["loans"]} == {x["rate_bp"] for x in loans} - {450}


def _add_loans(src: Path, dst: Path, height: int, loans: list[dict[str, Any]]) -> None:
    """A copy of the index with extra v11 loan rows (cases the scenario does not reach)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
        for n, x in enumerate(loans, start=1):
            b.execute(
                "INSERT INTO lending_loans VALUES (?,0,'v11',?,NULL,?,?,?,?,?,?,0,?,"
                "NULL,NULL,NULL,NULL)",
                (
                    *(bytes.fromhex(x["txid"]), bytes.fromhex(x["borrower_hash"])),
                    *(x["principal"], x["rate_bp"], x["loan_ts"], x["collateral"]),
                    *(height, x["time"], 10_000 + n),
                ),
            )


def _extra(n: int, principal: int, loan_ts: int, collateral: int, time: int) -> dict[str, Any]:
    return {
        "txid": f"{n:02x}" * 32,
        "vout": 0,
        "height": 0,
        "time": time,
        "borrower_hash": f"{n + 10:02x}" * 32,
        "delegate_hash": None,
        "principal": principal,
        "rate_bp": 100,
        "loan_ts": loan_ts,
        "collateral": collateral,
    }


async def test_edges_fee_funding_and_ratio_bounds(lw: LendingWorld, tmp_path: Path) -> None:
    """Liquidatable loans at the fee boundary (10,000 + 2,000 sats): only the one that can pay
    is crankable. Loans at exactly 150 % and one sat below: the 150 % bucket includes its
    lower bound, compared without rounding."""
    index = lw.mid
    found = lw.price_at(index, index.now)
    assert found is not None
    price = found[0]
    # debt = principal + 1 (no day has passed); collateral × price / 1e8 = 1.5 × debt exactly.
    principal, at_150 = 2 * price - 1, 3 * 100_000_000
    t = index.now - 60
    extra = [
        _extra(1, 100, 0, 11_999, t),
        _extra(2, 100, 0, 12_000, t),
        _extra(3, principal, index.now, at_150, t),
        _extra(4, principal, index.now, at_150 - 1, t),
    ]
    db = tmp_path / "edge.sqlite"
    _add_loans(index.db, db, index.height, extra)
    async with api_client(lw.config(Index(db, index.height, index.now))) as c:
        got = await get(c, "/lending/v11/crankable?rate_bp=0")  # none redeemable
        stats = await get(c, "/lending/v11/stats")
    listed = [x for x in got["loans"] if x["borrower_hash"] in {e["borrower_hash"] for e in extra}]
    assert [(x["collateral"], x["reason"]) for x in listed] == [(12_000, "liquidate")]
    assert bucket(at_150, price, principal + 1) == "150-200"
    assert bucket(at_150 - 1, price, principal + 1) == "120-150"
    want = expected_stats(lw, index, "v11", extra)
    assert stats == want | {"average_rate": pytest.approx(want["average_rate"])}


async def test_active_loans_page(lw: LendingWorld, mid: httpx.AsyncClient, tmp_path: Path) -> None:
    """`offset`/`limit` slice the chain-ordered list; without them the list is whole (up to the
    default limit, 1,000) — checked past the default on a copy of the index with extra loans."""
    for path, version in (("/lending/v11", "v11"), ("/lending", "v1")):
        want = active(lw, lw.mid, version)
        for offset, limit in ((0, 1), (1, 1), (1, 5), (2, 10_000), (len(want), 3), (50, 1)):
            page = await get(mid, f"{path}/loans/active?offset={offset}&limit={limit}")
            assert page == want[offset : offset + limit], (path, offset, limit)
    index = lw.mid
    t = index.now - 60
    extra = []
    for n in range(1, 1_006):
        x = _extra(1, 100, index.now, 1_000_000, t)
        x["txid"] = (0xEE00 + n).to_bytes(32, "big").hex()
        x["borrower_hash"] = (0xBB00 + n).to_bytes(32, "big").hex()
        extra.append(x)
    db = tmp_path / "many.sqlite"
    _add_loans(index.db, db, index.height, extra)
    want = active(lw, index, "v11") + [x | {"height": index.height} for x in extra]
    async with api_client(lw.config(Index(db, index.height, index.now))) as c:
        first = await get(c, "/lending/v11/loans/active")
        rest = await get(c, "/lending/v11/loans/active?offset=1000")
    assert len(first) == 1_000 and first + rest == want


_ACTION_COPY = (
    "INSERT INTO lending_actions SELECT ?, 0, height, time, mtp, ?, version, kind, "
    "borrower_hash, delegate_hash, input_index, output_index, collateral_before, "
    "collateral_after, principal_before, principal_after, rate_before, rate_after, "
    "loan_ts_before, loan_ts_after, interest FROM lending_actions WHERE version = 'v1' "
    "ORDER BY height DESC, position DESC, seq DESC LIMIT 1"
)
_STATE_COPY = (
    "INSERT INTO lending_states SELECT ?, vout, kind, height, time, ?, ?, staked, "
    "shares, bch_pot, sats, token_amount FROM lending_states WHERE kind = 'bar' "
    "ORDER BY mtp DESC, height DESC, position DESC LIMIT 1"
)


async def test_limit_defaults_past_the_scenario(lw: LendingWorld, tmp_path: Path) -> None:
    """The spec's limits where the scenario is too short to reach them, on a copy of the index
    with 250 more v1 actions and 1,100 more bar states (each copied from the newest, placed
    after it): history 50 by default and at most 200; bar history 100 by default and at most
    1,000, newest first, `mtp > since`."""
    db = tmp_path / "long.sqlite"
    with sqlite3.connect(lw.full.db) as a, sqlite3.connect(db) as b:
        a.backup(b)
        newest_mtp = b.execute("SELECT max(mtp) FROM lending_states WHERE kind = 'bar'")
        top = int(newest_mtp.fetchone()[0])
        for n in range(1, 251):
            b.execute(_ACTION_COPY, ((0xAC00 + n).to_bytes(32, "big"), 10_000 + n))
        for n in range(1, 1_101):
            b.execute(_STATE_COPY, ((0x5700 + n).to_bytes(32, "big"), top + n, 10_000 + n))
    copies = [(0xAC00 + n).to_bytes(32, "big").hex() for n in range(250, 0, -1)]
    states_ = [(0x5700 + n).to_bytes(32, "big").hex() for n in range(1_100, 0, -1)]
    async with api_client(lw.config(Index(db, lw.full.height, lw.full.now))) as c:
        assert [x["txid"] for x in await get(c, "/lending/history")] == copies[:50]
        got = await get(c, "/lending/history?limit=200&offset=100")
        assert [x["txid"] for x in got] == copies[100:250] + [
            x["txid"] for x in actions(lw, lw.full, "v1")[:50]
        ]
        assert [x["txid"] for x in await get(c, "/lending/v11/bar/history")] == states_[:100]
        most = await get(c, "/lending/v11/bar/history?limit=1000")
        assert [x["txid"] for x in most] == states_[:1000]
        mtps = [x["mtp"] for x in most]
        assert mtps == sorted(mtps, reverse=True) and mtps[0] == top + 1_100
        recent = await get(c, f"/lending/v11/bar/history?since={top + 1_095}")
        assert [x["txid"] for x in recent] == states_[:5]


# --- HTTP conventions -----------------------------------------------------------------------


async def test_every_lending_path_answers(
    lw: LendingWorld, mid: httpx.AsyncClient, full: httpx.AsyncClient
) -> None:
    """One non-empty answer from every documented lending path (the client validates each
    against its schema)."""
    b = active(lw, lw.mid, "v11")[0]["borrower_hash"]
    a = active(lw, lw.mid, "v1")[0]["borrower_hash"]
    claimed = {r["spent"] for r in lw.records(lw.full, "claim")}
    owner = next(
        r["owner_hash"]
        for r in lw.records(lw.full, "allowance")
        if f"{r['txid']}:{r['vout']}" not in claimed
    )
    urls = [
        (full, f"/lending/v11/allowances/{owner}"),
        (mid, "/lending/v11/bar/history"),
        (mid, "/lending/v11/crankable?price=1"),
        (mid, "/lending/v11/history"),
        (mid, f"/lending/v11/loan/{b}/history"),
        (mid, "/lending/v11/loans/active"),
        (mid, "/lending/v11/pool/history"),
        (mid, "/lending/v11/staking/apr"),
        (mid, "/lending/v11/stats"),
        (mid, "/lending/history"),
        (mid, f"/lending/loan/{a}/history"),
        (mid, "/lending/loans/active"),
        (mid, "/lending/stats"),
    ]
    seen = set()
    for client, url in urls:
        assert await get(client, url), url
        seen.add(template(url.split("?")[0]))
    assert seen == {p for p in document()["paths"] if p.startswith("/lending/")}


async def test_index_height_and_revalidation(lw: LendingWorld, mid: httpx.AsyncClient) -> None:
    for url in ("/lending/v11/loans/active", "/lending/stats", "/lending/v11/bar/history"):
        r = await mid.get(url)
        assert r.status_code == 200 and r.headers["x-index-height"] == str(lw.mid.height)
        again = await mid.get(url, headers={"if-none-match": r.headers["etag"]})
        assert again.status_code == 304


def _bad_cases() -> list[tuple[str, str]]:
    h = "ab" * 32
    many = ",".join([h] * 101)
    return [
        ("/lending/v11/allowances/abc", "owner_hash"),
        (f"/lending/v11/allowances/{h[:-1]}", "owner_hash"),
        (f"/lending/v11/allowances/{h}0", "owner_hash"),
        (f"/lending/v11/allowances/{'g' * 64}", "owner_hash"),
        (f"/lending/v11/loan/{h[:62]}/history", "borrower_hash"),
        ("/lending/loan/zz/history", "borrower_hash"),
        ("/lending/v11/history?limit=201", "limit"),
        ("/lending/history?limit=0", "limit"),
        ("/lending/v11/history?limit=-1", "limit"),
        ("/lending/v11/history?offset=-1", "offset"),
        ("/lending/history?offset=x", "offset"),
        ("/lending/v11/history?nfth=abc", "nfth"),
        (f"/lending/v11/history?nfth={h},", "nfth"),
        (f"/lending/history?nfth={h},,{h}", "nfth"),
        (f"/lending/v11/history?nfth={many}", "nfth"),
        ("/lending/v11/bar/history?limit=1001", "limit"),
        ("/lending/v11/pool/history?since=-5", "since"),
        ("/lending/v11/bar/history?since=1.5", "since"),
        ("/lending/v11/staking/apr?window=-1", "window"),
        ("/lending/v11/staking/apr?window=0", "window"),
        ("/lending/v11/staking/apr?window=week", "window"),
        ("/lending/v11/crankable?now=-1", "now"),
        ("/lending/v11/crankable?price=0", "price"),
        (f"/lending/v11/crankable?price={2**32}", "price"),
        ("/lending/v11/crankable?rate_bp=65536", "rate_bp"),
        ("/lending/v11/crankable?rate_bp=-3", "rate_bp"),
        ("/lending/v11/stats?now=1", "now"),
        ("/lending/loans/active?limit=0", "limit"),
        ("/lending/v11/loans/active?limit=10001", "limit"),
        ("/lending/v11/loans/active?offset=-1", "offset"),
        ("/lending/loans/active?offset=1.5", "offset"),
        ("/lending/loans/active?page=2", "page"),
        ("/lending/v11/history?limit=1&limit=2", "limit"),
    ]


@pytest.mark.parametrize(("url", "parameter"), _bad_cases())
async def test_bad_parameters_are_400s_naming_the_parameter(
    mid: httpx.AsyncClient, url: str, parameter: str
) -> None:
    r = await mid.get(url)
    assert r.status_code == 400, (url, r.text)
    error = r.json()["error"]
    assert error["parameter"] == parameter and parameter in error["message"], error
