"""`ladle up` serves everything its devnet produces: the oracle feed the scenario creates, the
lending deployment of its lending activity and the registries its tokens publish are decoded,
fetched and answered by the data API right after the ready line. Expected values come from the
scenario's ledger (served by the devnet), never from the code under test."""

from __future__ import annotations

import signal
from typing import Any

import httpx

from tests.ladle.test_up import start


def _latest_update(ledger: dict[str, Any]) -> dict[str, Any]:
    updates = ledger["oracle_updates"]
    assert updates, "the scenario publishes oracle updates"
    return max(updates, key=lambda u: u["sequence"])


def _active_borrowers(ledger: dict[str, Any], version: str) -> list[str]:
    part = ledger["extensions"]["lending"]
    last = {e["loan"]: e for e in part["records"] if "loan" in e}
    return sorted(
        last[name]["borrower_hash"] for name in part["active"] if last[name]["version"] == version
    )


async def test_up_decodes_fetches_and_serves_the_devnet_protocols() -> None:
    running = await start("up", "--ports", "0", "--preset", "small", "--no-verify")
    try:
        ready = await running.ready()
        async with httpx.AsyncClient(base_url=ready["rest"], timeout=30) as api:
            ledger = (await api.get(ready["devnet"]["ledger"])).json()

            # Oracle: the devnet's feed (not the mainnet one) is indexed; now = its last update.
            feed = ledger["oracle"]["category"]
            latest = _latest_update(ledger)
            r = await api.get("/oracle/feed/closest", params={"token_id": feed})
            assert r.status_code == 200, r.text
            closest = r.json()
            assert closest is not None
            assert (closest["oracle_price"], closest["txid"]) == (latest["price"], latest["txid"])
            assert closest["token_id"] == feed

            # Lending: both deployments of the lending activity, as the ledger leaves them.
            v1 = _active_borrowers(ledger, "v1")
            v11 = _active_borrowers(ledger, "v11")
            assert v1 or v11, "the lending activity leaves loans open"
            for path, want in (("/lending/loans/active", v1), ("/lending/v11/loans/active", v11)):
                r = await api.get(path)
                assert r.status_code == 200, r.text
                assert sorted(x["borrower_hash"] for x in r.json()) == want
            # Every action of each version as the ledger records it: `ladle up` indexes the
            # mainnet v1 deployment beside the devnet's, and a devnet loan re-created is one
            # action (add_collateral, refinance, …), never an ending plus a borrow.
            records = ledger["extensions"]["lending"]["records"]
            for path, version in (("/lending/history", "v1"), ("/lending/v11/history", "v11")):
                r = await api.get(path, params={"limit": 200})
                assert r.status_code == 200, r.text
                got = sorted((x["txid"], x["kind"], x["borrower_hash"]) for x in r.json())
                assert got == sorted(
                    (e["txid"], e["kind"], e["borrower_hash"])
                    for e in records
                    if e.get("version") == version and e["height"] is not None
                )

            # Registries: fetched from the devnet's HTTP server before the ready line.
            good = [t for t in ledger["tokens"] if t["bcmr"] and not t["bcmr"]["mismatch"]]
            assert good
            for token in good:
                r = await api.get(f"/registry/token/{token['category']}")
                assert r.status_code == 200, r.text
                entry = r.json()
                assert entry is not None, token["symbol"]
                assert entry["name"] == token["name"]
                assert entry["token"]["symbol"] == token["symbol"]
                assert entry["filemeta"]["actual_hash"] == token["bcmr"]["content_sha256"]

            # USD figures come from the devnet's feed: tokens with pools have a USD price.
            r = await api.get("/dex/tokens/list_cached")
            assert r.status_code == 200, r.text
            priced = [t for t in r.json() if t["price_now"] is not None]
            assert priced and all(t["price_now_usd"] is not None for t in priced)
        assert await running.stop(signal.SIGINT) == 0
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()
