"""Soak of router subscriptions: does memory come back when subscriptions close?

    .venv/bin/python scripts/soak_subscriptions.py [--cycles 8] [--connections 100]
                                                   [--per-connection 100] [--seconds 1800]

A router (`router.service.start_router`, as `ladle router` runs it) serves the 20,000-pool
snapshot of scripts/bench_router.py (`scripts/_snapshots.py`) in a child process on
127.0.0.1. Each cycle this process opens `--connections` WebSocket connections, subscribes
`--per-connection` distinct `tx.subscribe` orders on each (10,000 by default, each routed and
built: one group per order), lets one pool the routes use trade (every order is routed again
and pushed), unsubscribes half of them and closes the connections with the rest still live.
After every cycle, once the router holds no subscription or session and has had time to trim
its heap (`router.daemon.TRIM_DELAY`), it reads the router's resident set size (VmRSS in /proc).
Memory must be flat after the first cycles (the warm-up: allocator pools, lazily built route
models): `--max-growth-mb` bounds the growth from the end of the warm-up to the last cycle,
and `--max-above-start-mb` the resident size after a cycle above the router's at start; the
exit status says whether both held.

Bounded: `--cycles` cycles and at most `--seconds` in all; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _snapshots import BIG, make_snapshot  # noqa: E402

from bch.hashes import sha256  # noqa: E402
from bch.tx import OutPoint  # noqa: E402
from bch.wallet import Wallet  # noqa: E402
from indexer.snapshot import LivePool, PendingTx  # noqa: E402
from router.daemon import TRIM_DELAY, DaemonConfig  # noqa: E402
from router.params import RouterConfig  # noqa: E402
from router.service import start_router  # noqa: E402

USER = Wallet.from_seed("soak subscriptions: user")


def order(k: int) -> dict[str, Any]:
    """A distinct order per `k` (amount and funding differ): each is its own routing group."""
    return {
        "sell": "bch",
        "buy": BIG,
        "amount": str(200_000 + k),
        "receive_addr": USER.token_address,
        "change_addr": USER.address,
        "funding": [
            {
                "txid": sha256(f"soak funding {k}".encode()).hex(),
                "vout": 0,
                "value": str(10**14),
                "address": USER.address,
            }
        ],
    }


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# --- the router (child process) -------------------------------------------------------------


async def serve(pools: int) -> None:
    """Serve the snapshot; print the port; a line on stdin asks for the counts of live
    subscriptions and sessions ("subs sessions"), or "trade" lets a routed pool trade."""
    snap = make_snapshot(big_pools=pools)
    fee = Wallet.from_seed("soak subscriptions: fee")
    config = RouterConfig(fee_address=fee.token_address)
    limits = DaemonConfig(rate=1e6, burst=1_000_000)  # the load is one client, on purpose
    server = await start_router(snap, config, port=0, limits=limits)
    print(server.port, flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    traded = 0
    while line := (await reader.readline()).strip():
        if line == b"trade":  # the cheapest pool of the big token trades (routes use it)
            traded += 1
            old = max(snap.pools(BIG), key=lambda p: p.tokens / p.sats)
            txid = sha256(f"soak trade {traded}".encode())
            new = LivePool(OutPoint(txid, 0), old.lineage, old.owner_pkh, old.token_id,
                           old.sats + 50_000, old.tokens * 99 // 100, None)  # fmt: skip
            snap.add_pending(PendingTx(txid, (old.outpoint,), (new,)))
        daemon = server.daemon
        print(len(daemon.subscriptions), len(daemon.sessions), flush=True)
    await server.close()


# --- the load (this process) ----------------------------------------------------------------


class Router:
    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc = proc
        self.url = f"ws://127.0.0.1:{port}"

    async def ask(self, line: bytes = b"count") -> tuple[int, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + b"\n")
        await self.proc.stdin.drain()
        subs, sessions = (await self.proc.stdout.readline()).split()
        return int(subs), int(sessions)

    async def settled(self, deadline: float) -> None:
        """Until the router holds no subscription and no session."""
        while await self.ask() != (0, 0):
            if time.monotonic() > deadline:
                raise TimeoutError("the router still holds subscriptions")
            await asyncio.sleep(0.05)

    def rss_mb(self) -> float:
        assert self.proc.pid is not None
        return rss_kib(self.proc.pid) / 1024


async def start(pools: int) -> Router:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        str(pools),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    port = int(await proc.stdout.readline())
    return Router(proc, port)


async def stop(router: Router) -> None:
    assert router.proc.stdin is not None
    router.proc.stdin.write(b"\n")
    router.proc.stdin.close()
    try:
        await asyncio.wait_for(router.proc.wait(), 10)
    except TimeoutError:
        router.proc.kill()
        await router.proc.wait()


async def call(ws: ClientConnection, n: int, method: str, params: Any) -> Any:
    """Send a request and read frames until its reply (pushes in between are dropped)."""
    await ws.send(orjson.dumps({"id": n, "method": method, "params": params}).decode())
    while True:
        doc = orjson.loads(await ws.recv(decode=False))
        if doc.get("id") == n:
            if "error" in doc:
                raise RuntimeError(doc["error"])
            return doc["result"]


async def cycle(router: Router, cycle_no: int, connections: int, per_connection: int) -> None:
    """Subscribe, let the routes move, unsubscribe half, close every connection."""
    conns = [
        await connect(router.url, max_size=None, ping_interval=None, close_timeout=60)
        for _ in range(connections)
    ]
    subs: list[list[str]] = []
    for ci, ws in enumerate(conns):
        ids = []
        for j in range(per_connection):
            k = (cycle_no * connections + ci) * per_connection + j  # new orders every cycle
            ids.append((await call(ws, j, "tx.subscribe", order(k)))["subscription"])
        subs.append(ids)
    await router.ask(b"trade")
    for ws, ids in zip(conns, subs, strict=True):
        for j, sub_id in enumerate(ids[: len(ids) // 2]):
            await call(ws, per_connection + j, "tx.unsubscribe", {"subscription": sub_id})
    await asyncio.gather(*map(drain, conns))
    for ws in conns:
        await ws.close()


async def drain(ws: ClientConnection, idle: float = 0.2) -> None:
    """Read the pushes still on their way until none comes for `idle` seconds. Unread, they
    fill the client's queue, it stops reading, and the close handshake waits behind them
    for the whole `close_timeout`: the cycle would time the client, not the router."""
    with contextlib.suppress(TimeoutError):
        while True:
            await asyncio.wait_for(ws.recv(decode=False), idle)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.seconds
    router = await start(args.pools)
    try:
        await router.settled(deadline)
        report: dict[str, Any] = {"start_mb": round(router.rss_mb(), 1), "cycles": []}
        print(f"router started: RSS {report['start_mb']} MB", flush=True)
        for n in range(args.cycles):
            if time.monotonic() > deadline:
                print("time bound reached", flush=True)
                break
            began = time.monotonic()
            await cycle(router, n, args.connections, args.per_connection)
            await router.settled(deadline)
            await asyncio.sleep(TRIM_DELAY + 1)  # the router trims its heap after a pause
            rss = round(router.rss_mb(), 1)
            report["cycles"].append(rss)
            print(
                f"cycle {n + 1}: {args.connections * args.per_connection:,} subscriptions "
                f"opened and closed in {time.monotonic() - began:.1f} s, RSS {rss} MB",
                flush=True,
            )
    finally:
        await stop(router)
    rss = report["cycles"]
    warm = min(args.warmup, len(rss))
    report["growth_after_warmup_mb"] = round(rss[-1] - rss[warm - 1], 1) if warm else None
    report["max_above_start_mb"] = round(max(rss) - report["start_mb"], 1) if rss else None
    return report


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--serve":
        asyncio.run(serve(int(sys.argv[2])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2, help="cycles before memory must be flat")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--per-connection", type=int, default=100, help="at most 100")
    parser.add_argument("--pools", type=int, default=2000, help="pools of the traded token")
    parser.add_argument("--seconds", type=float, default=1800, help="bound on the whole soak")
    parser.add_argument("--max-growth-mb", type=float, default=10.0)
    parser.add_argument("--max-above-start-mb", type=float, default=60.0)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    report = asyncio.run(soak(args))
    print(json.dumps(report), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    growth, above = report["growth_after_warmup_mb"], report["max_above_start_mb"]
    if growth is not None and growth > args.max_growth_mb:
        print(f"RSS grew {growth} MB after the warm-up (bound {args.max_growth_mb})")
        sys.exit(1)
    if above is not None and above > args.max_above_start_mb:
        print(f"RSS stayed {above} MB above the start (bound {args.max_above_start_mb})")
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
