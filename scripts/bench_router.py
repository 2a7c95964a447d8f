"""Benchmark of the router daemon over a 20,000-pool snapshot.

    .venv/bin/python scripts/bench_router.py [--requests 200] [--seconds 3] [--json out.json]
    .venv/bin/python scripts/bench_router.py --inprocess-only      # in-process tx.build p50s
    .venv/bin/python scripts/bench_router.py --repeat-build LEGS N  # N builds, for valgrind

The snapshot (built directly as a `PoolSnapshot`, deterministic): 200 tokens, one with 2,000
pools, the others 90–91 each (20,000 pools), reserves and prices spread ±10 %. The router serves it
on 127.0.0.1 (one process, one event loop); this process's clients talk to it over real
WebSockets, so every latency includes JSON framing and the loopback round trip.

1. Latency p50/p99 of `quote` and `tx.build` (BCH→token on the 2,000-pool token) for orders
   whose routes touch about 1, 10, 100 and 350 pools, until the client has parsed the reply;
   for `tx.build` also until its frame has arrived (the service's latency, without the
   client's JSON parse), and its p50 in-process (the
   daemon's parse + build + JSON without the socket); quality: the output against the
   continuous optimum (water-filling, tests/router/helpers.py) on the pools, for the same net
   input; ceiling: a no-op `ping` round trip.
2. `tx.build` requests/s over 1 and 100 concurrent connections (the 10-pool order).
3. From a snapshot change (a pending trade on one pool of the 2,000-pool token) to 1,000
   `tx.subscribe` subscribers (10 connections × 100) being up to date: identical orders
   (routed once, shared) with a pool of the route traded; 1,000 distinct orders with a pool
   no route uses traded (the common case: no order can move, none is routed again, no push);
   1,000 distinct orders with a pool every route uses traded (the worst case: 1,000 builds
   and 1,000 pushes).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import platform
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _snapshots import BIG, make_snapshot

from bch.hashes import sha256
from bch.tx import OutPoint
from bch.wallet import Wallet
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot
from router import wire
from router.book import LiveBook
from router.build import build
from router.daemon import DaemonConfig
from router.errors import RouterError
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.pools import PoolBook
from router.quotes import quote
from router.service import RouterServer, compiled_parts, settle_memory, start_router

USER = Wallet.from_seed("bench router: user")
FEE = Wallet.from_seed("bench router: fee")


def order(amount: int, tag: str = "0") -> dict[str, Any]:
    return {
        "sell": "bch",
        "buy": BIG,
        "amount": str(amount),
        "receive_addr": USER.token_address,
        "change_addr": USER.address,
        "funding": [
            {
                "txid": sha256(f"funding {tag}".encode()).hex(),
                "vout": 0,
                "value": str(10**14),
                "address": USER.address,
            }
        ],
    }


class Rpc:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.n = 0

    async def call(self, method: str, params: Any = None) -> Any:
        return self.result(await self.call_raw(method, params))

    async def call_raw(self, method: str, params: Any = None) -> bytes:
        """The reply frame as it arrives (not parsed)."""
        self.n += 1
        doc: dict[str, Any] = {"id": self.n, "method": method}
        if params is not None:
            doc["params"] = params
        await self.ws.send(orjson.dumps(doc).decode())
        return await self.ws.recv(decode=False)

    @staticmethod
    def result(raw: bytes) -> Any:
        reply = orjson.loads(raw)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["result"]


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


async def timed(rpc: Rpc, method: str, params: Any, n: int) -> tuple[list[float], Any]:
    """Round trips until the reply is parsed (ms), and the last result."""
    out, _, result = await timed_parts(rpc, method, params, n)
    return out, result


async def timed_parts(
    rpc: Rpc, method: str, params: Any, n: int
) -> tuple[list[float], list[float], Any]:
    """Round trips until the reply is parsed, and until its frame has arrived (ms): the
    second is the service's latency, the difference the client's JSON parse (~1 ms for the
    350 kB reply of a 352-pool build, whatever the service does)."""
    parsed, received, result = [], [], None
    for _ in range(n):
        t0 = time.perf_counter()
        raw = await rpc.call_raw(method, params)
        t1 = time.perf_counter()
        result = rpc.result(raw)
        t2 = time.perf_counter()
        parsed.append((t2 - t0) * 1000)
        received.append((t1 - t0) * 1000)
    return parsed, received, result


async def amount_for(rpc: Rpc, legs: int) -> int:
    """A BCH amount whose route touches about `legs` pools (bisection on the quote)."""
    lo, hi = 1_000, 10**12
    while hi / lo > 1.02:
        mid = int((lo * hi) ** 0.5)
        try:
            q = await rpc.call("quote", {"sell": "bch", "buy": BIG, "amount": str(mid)})
            n = q["pools"]
        except RuntimeError:
            n = 10**9
        if n < legs:
            lo = mid
        else:
            hi = mid
    return hi


def inprocess_build_ms(server: RouterServer, params: Any, n: int) -> list[float]:
    """The same `tx.build` without the socket: parse, build, JSON, as the daemon runs it, so
    the framing and round trip can be told apart from the work (and from the machine's load,
    which hits both)."""
    daemon = server.daemon
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        request = parse_build_params(params, daemon.config)
        wire.build_bytes(build(daemon.live.current(), request, daemon.config))
        out.append((time.perf_counter() - t0) * 1000)
    return out


def optimum_output(snap: PoolSnapshot, net_in: int) -> float:
    from tests.router.helpers import Curve, optimum

    curves = [Curve(p.sats, p.tokens, True) for p in snap.pools(BIG)]
    xs = optimum(curves, float(net_in), True)
    return sum(c.out(x) for c, x in zip(curves, xs, strict=True))


async def throughput(server: RouterServer, params: Any, conns: int, seconds: float) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        async with connect(server.url, max_size=None) as ws:
            rpc = Rpc(ws)
            while time.perf_counter() < stop:
                await rpc.call("tx.build", params)
                done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conns)))
    return done / (time.perf_counter() - t0)


async def push_latency(
    server: RouterServer, snap: PoolSnapshot, distinct: bool, in_route: bool = True
) -> dict[str, float]:
    """Subscribe 1,000 orders (10 connections × 100), then let one pool of the 2,000-pool token
    trade. `in_route`: a pool every route uses (each order must be routed again and pushed);
    else a pool no route uses (the realistic case: most trades touch other pools), where the
    time is until every subscription is settled, pushed or shown unchanged."""
    subs = server.daemon.subscriptions
    conns = []
    for _ in range(10):
        conns.append(await connect(server.url, max_size=None))
    amount = 200_000
    first: dict[str, Any] = {}
    used: set[tuple[str, int]] = set()
    for ci, ws in enumerate(conns):
        for j in range(100):
            k = ci * 100 + j
            params = order(amount + (k if distinct else 0), f"{k}" if distinct else "0")
            await ws.send(orjson.dumps({"id": k, "method": "tx.subscribe", "params": params}))
            await ws.recv()  # the reply
            push = orjson.loads(await ws.recv())
            first = push["params"]["result"]
            used.update((leg["txid"], leg["tx_pos"]) for leg in first["route"]["legs"])
    if in_route:
        leg = first["route"]["legs"][0]
        old = snap.pool(OutPoint.from_hex(leg["txid"], leg["tx_pos"]))
    else:
        others = sorted(
            (p for p in snap.pools(BIG) if (p.txid, p.vout) not in used), key=lambda p: p.txid
        )
        old = others[len(others) // 2]
    assert old is not None
    txid = sha256(f"bench: a competing trade {distinct} {in_route}".encode())
    new = LivePool(OutPoint(txid, 0), old.lineage, old.owner_pkh, old.token_id,
                   old.sats + 200_000, old.tokens * 95 // 100, None)  # fmt: skip
    pushes = 0

    async def drain(ws: ClientConnection) -> None:
        nonlocal pushes
        for _ in range(100):
            await ws.recv()
            pushes += 1

    settled0 = subs.routed + subs.skipped
    routed0 = subs.routed
    groups = 1000 if distinct else 1
    t0 = time.perf_counter()
    readers = [asyncio.create_task(drain(ws)) for ws in conns]
    snap.add_pending(PendingTx(txid, (old.outpoint,), (new,)))
    if in_route:
        await asyncio.gather(*readers)
    else:
        while subs.routed + subs.skipped - settled0 < groups:
            await asyncio.sleep(0)
    elapsed = (time.perf_counter() - t0) * 1000
    await asyncio.sleep(0.05)
    for r in readers:
        r.cancel()
    result = {"ms": elapsed, "routed": subs.routed - routed0, "pushes": pushes}
    snap.evict([txid])
    await asyncio.sleep(0.2)
    for ws in conns:
        await ws.close()
    await asyncio.sleep(0.2)
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    snap = make_snapshot()
    print(f"snapshot: {len(snap)} pools, {len(snap.tokens())} tokens "
          f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
    limits = DaemonConfig(
        max_connections=5000, rate=1e9, burst=10**9, max_subscriptions=1000, ping_interval=None
    )
    config = RouterConfig(fee_bps=10, fee_address=FEE.token_address)
    t0 = time.perf_counter()
    server = await start_router(snap, config, "127.0.0.1", 0, limits)
    print(f"router up (book + models built) in {time.perf_counter() - t0:.2f} s")
    report: dict[str, Any] = {
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "compiled": compiled_parts(),
    }
    async with connect(server.url, max_size=None) as ws:
        rpc = Rpc(ws)
        ping, _ = await timed(rpc, "ping", None, args.requests)
        report["ping_ms"] = {"p50": pct(ping, 0.5), "p99": pct(ping, 0.99)}
        print(f"ping round trip: p50 {pct(ping, 0.5):.3f} ms  p99 {pct(ping, 0.99):.3f} ms")
        rows = []
        for legs in (1, 10, 100, 350):
            amount = await amount_for(rpc, legs)
            qparams = {"sell": "bch", "buy": BIG, "amount": str(amount)}
            q_ms, q = await timed(rpc, "quote", qparams, args.requests)
            b_ms, b_recv, b = await timed_parts(
                rpc, "tx.build", order(amount), max(20, args.requests // 2)
            )
            local = inprocess_build_ms(server, order(amount), max(20, args.requests // 2))
            net_in = int(q["input_amount"]) - int(q["router_fee"]["amount"])
            best = optimum_output(snap, net_in)
            out = int(q["output_amount"])
            row = {
                "legs": q["pools"],
                "amount_sats": amount,
                "quote_p50": pct(q_ms, 0.5),
                "quote_p99": pct(q_ms, 0.99),
                "build_p50": pct(b_ms, 0.5),
                "build_p99": pct(b_ms, 0.99),
                "build_received_p50": pct(b_recv, 0.5),
                "build_received_p99": pct(b_recv, 0.99),
                "build_inprocess_p50": pct(local, 0.5),
                "tx_bytes": len(b["unsigned_tx_hex"]) // 2,
                "output": out,
                "continuous_optimum": best,
                "quality": out / best,
            }
            rows.append(row)
            print(
                f"{row['legs']:4d} pools: quote p50 {row['quote_p50']:.2f} p99 "
                f"{row['quote_p99']:.2f} ms | tx.build p50 {row['build_p50']:.2f} p99 "
                f"{row['build_p99']:.2f} ms (received p50 {row['build_received_p50']:.2f}; "
                f"in-process p50 {row['build_inprocess_p50']:.2f} ms) | "
                f"{row['tx_bytes']} B | output/optimum "
                f"{row['quality']:.6f}"
            )
        report["latency"] = rows
    ten = order(int(rows[1]["amount_sats"]))
    for conns in (1, 100):
        rate = await throughput(server, ten, conns, args.seconds)
        report[f"build_rps_{conns}"] = rate
        print(f"tx.build ({rows[1]['legs']} pools) over {conns} connection(s): {rate:,.0f} req/s")
    cases = (
        ("identical", False, True, "identical orders, a pool of the route traded"),
        ("distinct_elsewhere", True, False, "1,000 distinct orders, a pool no route uses traded"),
        ("distinct_in_route", True, True, "1,000 distinct orders, a pool every route uses traded"),
    )
    for key, distinct, in_route, label in cases:
        settled = await push_latency(server, snap, distinct, in_route)
        report[f"push_1000_{key}"] = settled
        print(
            f"snapshot change → 1,000 subscribers settled ({label}): {settled['ms']:.1f} ms "
            f"({settled['routed']} orders routed again, {settled['pushes']} pushes)"
        )
    await server.close()
    return report


def _inprocess_setup(snap: PoolSnapshot) -> tuple[PoolBook, RouterConfig, Callable[[int], int]]:
    """The book of `snap`, the bench's config, and the pool count of a BCH amount's route; the
    process's memory set up as the router's (`settle_memory`)."""
    book = LiveBook(snap).current()
    settle_memory()
    config = RouterConfig(fee_bps=10, fee_address=FEE.token_address)

    def pools_for(amount: int) -> int:
        params = {"sell": "bch", "buy": BIG, "amount": str(amount)}
        try:
            return quote(book, parse_quote_params(params), config).pool_count
        except RouterError:
            return 10**9

    return book, config, pools_for


def _amount_touching(pools_for: Callable[[int], int], legs: int) -> int:
    """A BCH amount whose route touches about `legs` pools (bisection, in process)."""
    lo, hi = 1_000, 10**12
    while hi / lo > 1.02:
        mid = int((lo * hi) ** 0.5)
        lo, hi = (mid, hi) if pools_for(mid) < legs else (lo, mid)
    return hi


def inprocess_only(args: argparse.Namespace) -> dict[str, Any]:
    """Only the in-process `tx.build` p50 at about 1, 10, 100 and 350 pools (no socket, no
    daemon): seconds per run, so two trees can be alternated within a minute."""
    book, config, pools_for = _inprocess_setup(make_snapshot())
    rows = []
    for legs in (1, 10, 100, 350):
        hi = _amount_touching(pools_for, legs)
        params = order(hi)
        for _ in range(20):  # warm the book's per-token caches
            wire.build_bytes(build(book, parse_build_params(params, config), config))
        samples = []
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(max(20, args.requests)):
            t0 = time.perf_counter()
            wire.build_bytes(build(book, parse_build_params(params, config), config))
            samples.append((time.perf_counter() - t0) * 1000)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        rows.append({
            "legs": pools_for(hi),
            "build_inprocess_p50": pct(samples, 0.5),
            "page_faults_per_build": faults / len(samples),
        })  # fmt: skip
    print("tx.build in-process p50: " + ", ".join(
        f"{r['legs']} pools {r['build_inprocess_p50']:.3f} ms" for r in rows))  # fmt: skip
    print("page faults per build: " + ", ".join(
        f"{r['legs']} pools {r['page_faults_per_build']:.1f}" for r in rows))  # fmt: skip
    print(f"compiled: {compiled_parts()}")
    return {"machine": platform.platform(), "compiled": compiled_parts(), "inprocess": rows}


def repeat_build(legs: int, times: int) -> None:
    """The in-process `tx.build` of the order touching about `legs` pools, `times` times after
    20 warm-up builds, on the 2,000-pool token alone (the orders touch no other), printing
    nothing: for a counter outside the process, such as valgrind's instruction count. The
    `times` builds run inside one call of a C function pointer (`ffi_call`), so callgrind's
    `--collect-atstart=no --toggle-collect=ffi_call` counts them and nothing else."""
    book, config, pools_for = _inprocess_setup(make_snapshot(2000, 0))
    params = order(_amount_touching(pools_for, legs))

    def builds(n: int) -> None:
        for _ in range(n):
            wire.build_bytes(build(book, parse_build_params(params, config), config))

    builds(20)
    ctypes.CFUNCTYPE(None)(lambda: builds(times))()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--inprocess-only",
        action="store_true",
        help="only the in-process tx.build p50s (seconds; for A/B runs of two trees)",
    )
    parser.add_argument(
        "--repeat-build",
        nargs=2,
        type=int,
        metavar=("LEGS", "TIMES"),
        help="only build the LEGS-pool order TIMES times, printing nothing (for valgrind)",
    )
    ns = parser.parse_args()
    if ns.repeat_build:
        repeat_build(*ns.repeat_build)
        sys.exit(0)
    result = inprocess_only(ns) if ns.inprocess_only else asyncio.run(main(ns))
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2))
