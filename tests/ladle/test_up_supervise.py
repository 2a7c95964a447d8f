"""`ladle up`'s supervisor under load: every component is its own process; each one killed with
SIGKILL comes back on the address LADLE_READY announced (the devnet with the same tip), the
data API keeps answering from the index meanwhile, the index stays readable and consistent
(SQLite's integrity check, the tip the API reports, the router's pools), and a SIGTERM then
stops everything (exit 0, no process left). The HTTP services run at `--http-nice` (default
10), the router and the devnet at the supervisor's own niceness."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import sqlite3
import time
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import connect

from indexer.electrum import ElectrumClient
from tests.ladle.test_up import Running, start
from tests.runtime.procs import alive, child_running, descendants


async def drain(stream: asyncio.StreamReader | None) -> None:
    while stream is not None and await stream.read(65536):
        pass


async def wait_until(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            if await check():
                return
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.2)


async def load(url: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """REST requests back to back (one client), counting answers (the rate limit answers
    most of them with 429: an answer all the same)."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while not stop.is_set():
            try:
                r = await client.get("/dex/contract/count")
                key = "ok" if r.status_code in (200, 429) else str(r.status_code)  # 429: alive
                counts[key] = counts.get(key, 0) + 1
            except httpx.TransportError:
                counts["transport"] += 1
                await asyncio.sleep(0.05)


async def router_answers(url: str) -> bool:
    async with connect(url) as ws:
        await ws.send(orjson.dumps({"id": 1, "method": "ping", "params": {}}).decode())
        reply = orjson.loads(await ws.recv())
    return bool(reply.get("result") == "pong")


def header_hash(header: bytes) -> str:
    return hashlib.sha256(hashlib.sha256(header).digest()).digest()[::-1].hex()


def integrity(db: str) -> tuple[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        (height,) = conn.execute("SELECT max(height) FROM blocks").fetchone()
        return str(check), int(height)
    finally:
        conn.close()


async def test_every_component_killed_under_load_comes_back() -> None:
    running: Running = await start(
        "up", "--ports", "0", "--preset", "small", "--no-verify", "--rest-workers", "2"
    )
    drains: list[asyncio.Task[None]] = []
    try:
        ready = await running.ready()
        drains = [asyncio.create_task(drain(running.proc.stdout))]
        errors = asyncio.create_task(running.proc.stderr.read())  # type: ignore[union-attr]
        db = ready["indexer"]["db"]
        height = ready["devnet"]["height"]
        api = httpx.AsyncClient(base_url=ready["rest"], timeout=10)
        stop = asyncio.Event()
        counts: dict[str, int] = {"ok": 0, "transport": 0}
        loader = asyncio.create_task(load(ready["rest"], stop, counts))
        sup = running.proc.pid
        base = os.getpriority(os.PRIO_PROCESS, 0)  # a niceness is never lowered: the floor
        for name, nice in (("router", base), ("devnet", base), ("rest", 10), ("broadcast", 10)):
            top = child_running(sup, "ladle", name)
            for pid in (top, *descendants(top)):
                assert os.getpriority(os.PRIO_PROCESS, pid) == max(base, nice), (name, pid)
        try:
            for name in ("router", "rest", "broadcast", "devnet"):
                victim = child_running(sup, "ladle", name)
                before = counts["ok"]
                os.kill(victim, signal.SIGKILL)
                await wait_until(lambda v=victim, n=name: _restarted(sup, n, v), timeout=120)
                # Back on the announced addresses, and the index is what it was.
                if name != "rest":
                    assert counts["ok"] > before, f"REST answered while {name} was down"
                await wait_until(lambda: _devnet_at(ready))  # the same history again
                await wait_until(lambda: _health_at(api, height))
                await wait_until(lambda: router_answers(ready["router"]))
                async with httpx.AsyncClient(base_url=ready["broadcast"]) as b:
                    await wait_until(lambda b=b: _status_404(b))
                check, indexed = integrity(db)
                assert (check, indexed) == ("ok", height), name
        finally:
            stop.set()
            await loader
            await api.aclose()
        assert counts["ok"] > 100, counts
        tree = descendants(sup)
        assert await running.stop(signal.SIGTERM) == 0
        log = (await errors).decode()
        for name in ("router", "rest", "broadcast", "devnet"):
            assert f"{name} exited with status -9; restarting in" in log, name
            assert f"{name} restarted" in log, name
        # The restarted router resumed from its index: the same live pools at the same height.
        records = [orjson.loads(line) for line in log.splitlines() if line.startswith("{")]
        [again] = [
            r["ready"]
            for r in records
            if r.get("event") == "child_restarted" and r["component"] == "router"
        ]
        assert again["router"] == ready["router"]
        assert (again["height"], again["pools"]) == (height, ready["indexer"]["pools"])
        await wait_until(lambda: _none_alive(tree), timeout=30)
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()
        for task in drains:
            task.cancel()


async def _restarted(sup: int, name: str, old: int) -> bool:
    pid = child_running(sup, "ladle", name)
    return pid != old and not alive(old)


async def _devnet_at(ready: dict[str, Any]) -> bool:
    client = ElectrumClient([ready["electrum"][0]["tcp"]], give_up_after=2.0)
    try:
        tip, header = await client.get_tip()
    finally:
        await client.close()
    return bool(tip == ready["devnet"]["height"] and header_hash(header) == ready["devnet"]["tip"])


async def _health_at(api: httpx.AsyncClient, height: int) -> bool:
    health = (await api.get("/health")).json()
    return bool(health["index_height"] == height)


async def _status_404(client: httpx.AsyncClient) -> bool:
    r = await client.get("/broadcast/status/" + "00" * 32)
    return r.status_code == 404


async def _none_alive(pids: list[int]) -> bool:
    return not any(alive(pid) for pid in pids)
