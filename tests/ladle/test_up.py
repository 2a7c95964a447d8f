"""`ladle up` and `ladle devnet` as real processes: wait for the ready line, talk to what it
announces over TCP and HTTP, then stop them with a signal and expect a clean exit."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bch.cashaddr import Address
from tests.devnet.client import TcpClient
from tests.devnet.helpers import double_sha, scripthash

READY = "LADLE_READY "
START_TIMEOUT = 60


class Running:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []

    async def ready(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), START_TIMEOUT)
            if not raw:
                err = await self.proc.stderr.read() if self.proc.stderr else b""
                raise AssertionError(f"exited before LADLE_READY: {err.decode()}")
            line = raw.decode().rstrip("\n")
            self.lines.append(line)
            if line.startswith(READY):
                return json.loads(line[len(READY) :])  # type: ignore[no-any-return]

    async def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return await asyncio.wait_for(self.proc.wait(), 20)


async def start(*args: str) -> Running:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ladle",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Running(proc)


@pytest.fixture
async def up() -> AsyncIterator[Running]:
    running = await start("up", "--ports", "0", "--preset", "small", "--no-verify")
    yield running
    if running.proc.returncode is None:
        running.proc.kill()
        await running.proc.wait()


async def test_up_announces_a_working_devnet_and_stops_cleanly(up: Running) -> None:
    ready = await up.ready()
    assert set(ready) >= {"electrum", "wallets"}
    assert sum(line.startswith(READY) for line in up.lines) == 1
    [endpoint] = ready["electrum"]
    client = await TcpClient.open(endpoint["host"], endpoint["tcp_port"])
    try:
        await client.call("server.version", "test_up", ["1.4", "1.6"])
        tip = await client.call("blockchain.headers.get_tip")
        assert tip["height"] == ready["devnet"]["height"] > 110  # the premine, then the history
        wallet = ready["wallets"][0]
        locking = Address.decode(wallet["address"]).locking_bytecode()
        utxos = await client.call("blockchain.scripthash.listunspent", scripthash(locking))
        assert utxos and any(u["height"] > 0 for u in utxos)
        assert any("token_data" in u for u in utxos), "test wallets hold tokens too"
        assert Address.decode(wallet["token_address"]).locking_bytecode() == locking
    finally:
        await client.close()
    async with httpx.AsyncClient() as web:
        ledger = (await web.get(ready["devnet"]["ledger"])).json()
    assert ledger["chain"]["tip_height"] == tip["height"]
    tip_hash = double_sha(bytes.fromhex(tip["hex"]))[::-1].hex()
    assert ledger["chain"]["tip_hash"] == ready["devnet"]["tip"] == tip_hash
    assert await up.stop(signal.SIGINT) == 0


async def test_devnet_writes_its_ledger_and_stops_on_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    running = await start(
        "devnet",
        "--ports",
        "0",
        "--preset",
        "small",
        "--no-verify",
        "--days",
        "1",
        "--seed",
        "7",
        "--ledger",
        str(path),
    )
    try:
        ready = await running.ready()
        ledger = json.loads(path.read_text())
        assert ledger["params"]["seed"] == 7 and ledger["params"]["days"] == 1
        assert ledger["wallets"][0]["wif"] == ready["wallets"][0]["wif"]
        assert any("wallet0: WIF" in line for line in running.lines)
        assert await running.stop(signal.SIGTERM) == 0
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()


def test_bad_option_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ladle", "devnet", "--ports", "0", "--tokens", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "LADLE_READY" not in proc.stdout
    assert proc.stderr.strip().startswith("ladle: error:")
