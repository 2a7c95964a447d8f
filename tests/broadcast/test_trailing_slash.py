"""A trailing-slash path is a JSON 404, never a redirect built from the client's Host header
(Starlette's default 307 keeps method and body: a redirect-following client would re-POST its
signed transaction to whatever host the request named)."""

from __future__ import annotations

from pathlib import Path

import httpx

from broadcast.cli import start_server
from devnet.service import Devnet
from tests.broadcast.helpers import ALICE, BOB, config_for, fund, pay

HOSTILE = {"Host": "attacker.example"}


async def test_trailing_slash_is_a_json_404_not_a_redirect(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    running = await start_server(config_for(net, tmp_path / "r.sqlite"), port=0)
    try:
        async with httpx.AsyncClient(base_url=running.url, follow_redirects=False) as http:
            posted = await http.post("/broadcast/", json={"tx": tx.hex()}, headers=HOSTILE)
            assert posted.status_code == 404, posted.text
            assert "location" not in posted.headers
            assert posted.json()["error"]["code"] == "NOT_FOUND"
            status = await http.get(f"/broadcast/status/{tx.txid_hex}/", headers=HOSTILE)
            assert status.status_code == 404 and "location" not in status.headers
            assert status.json()["error"]["code"] == "NOT_FOUND"
            # Nothing was sent: the service never saw the transaction.
            record = await http.get(f"/broadcast/status/{tx.txid_hex}")
            assert record.json()["error"]["code"] == "TRANSACTION_NOT_FOUND", record.text
    finally:
        await running.stop()
