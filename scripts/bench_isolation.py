"""Isolation of the router from the data API: router latency with and without a REST flood.

    .venv/bin/python scripts/bench_isolation.py [--nice 0,10] [--rest-workers 2] [--rounds 4]
                                                [--seconds 3] [--json out.json]

For each `--nice` value, a real `ladle up --preset small --ports 0` on loopback (devnet, router +
indexer, `--rest-workers` data API processes, broadcast, each its own process) started with
`--http-nice` at that value. Swap clients (this process, `--probes` WebSockets)
each send `ping` and a `tx.build` (BCH → the token with the most pools, funded by devnet wallet
0) in turn, a pair every 50 ms (the router allows 50 requests a second per connection), and
time each until its reply has arrived. Every round has three
phases of `--seconds` each, in this order, against the same router:

- quiet: nothing else talks to the services;
- 429 flood: one client (127.0.0.1) floods the REST port over `--flood-connections`
  keep-alive connections with `/dex/contract/count`; past its burst the rate limit answers
  almost everything with 429;
- answered flood: the same, but each connection comes from its own loopback address
  (127.1.x.y) and moves to a fresh one every 500 requests, before the per-client limit
  (600 a minute) is reached, so every request is answered 200: the most a cheap endpoint can
  cost the workers.

The flood runs in a child process at niceness `--flood-nice` (19): a real abusive client is on
another machine, and on these 2 cores it would otherwise take CPU from the router itself; its
requests/s and CPU are reported. The bar: router p50 and p99 under each flood within 20 % of
quiet (ratio flood ÷ quiet ≤ 1.2), all phases of one run measured against the same router.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bch.script import electrum_scripthash  # noqa: E402
from bch.wallet import Wallet  # noqa: E402
from indexer.electrum.client import ElectrumClient  # noqa: E402

READY = "LADLE_READY "
FLOOD_PATH = "/dex/contract/count"
PHASES = ("quiet", "429 flood", "answered flood")
AMOUNT = 2_000_000  # sats sold in the probe's tx.build
PACE = 0.05  # seconds from one of a probe's request pairs to its next
ADDRESS_REQUESTS = 500  # requests per loopback address in the answered flood (limit: 600/min)


# --- the flood (a child process) ----------------------------------------------------------------


async def _http_get(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    """One keep-alive GET; its status."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return int(head[9:12])


async def flood(
    host: str, port: int, connections: int, seconds: float, rotate: bool, first_address: int
) -> None:
    """Requests as fast as the server answers them, for `seconds`; prints one JSON line with
    the requests, their statuses and this process's CPU seconds. Rotating, the loopback
    addresses are numbered from `first_address` (each round its own: a bucket the last round
    emptied refills at only 10 requests a second)."""
    request = f"GET {FLOOD_PATH} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\n\r\n".encode()
    statuses: dict[int, int] = {}
    stop_at = time.monotonic() + seconds
    next_address = [first_address]

    def local_address() -> tuple[str, int] | None:
        if not rotate:
            return None
        n = next_address[0] = next_address[0] + 1
        return (f"127.1.{n // 250 % 250}.{n % 250 + 1}", 0)

    async def connection() -> None:
        while time.monotonic() < stop_at:
            reader, writer = await asyncio.open_connection(host, port, local_addr=local_address())
            try:
                for _ in range(ADDRESS_REQUESTS if rotate else 1 << 62):
                    status = await _http_get(reader, writer, request)
                    statuses[status] = statuses.get(status, 0) + 1
                    if time.monotonic() >= stop_at:
                        break
            finally:
                writer.close()

    cpu = time.process_time()
    began = time.monotonic()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.monotonic() - began
    report = {
        "requests": sum(statuses.values()),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "seconds": round(elapsed, 2),
        "cpu_seconds": round(time.process_time() - cpu, 2),
    }
    print(json.dumps(report), flush=True)


async def run_flood(
    url: str, mode: str, args: argparse.Namespace, seconds: float, first_address: int
) -> asyncio.subprocess.Process:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--flood",
        host,
        port.rstrip("/"),
        str(args.flood_connections),
        str(seconds),
        mode,
        str(first_address),
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, args.flood_nice),
    )


# --- CPU of ladle up's components (from /proc) ---------------------------------------------------


def _stat(pid: int) -> tuple[int, float]:
    """(parent pid, CPU seconds) of a process."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def component_cpu(root: int) -> dict[str, float]:
    """CPU seconds used so far by each component of the `ladle up` process `root`: each of its
    children (named by its command) with all their descendants."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                parent[int(entry)], cpu[int(entry)] = _stat(int(entry))
    totals: dict[str, float] = {}
    for pid in parent:
        top = pid
        while parent.get(top, 0) not in (root, 0):
            top = parent[top]
        if parent.get(top) != root:
            continue
        with open(f"/proc/{top}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        name = argv[argv.index(b"ladle") + 1].decode() if b"ladle" in argv else "?"
        totals[name] = totals.get(name, 0.0) + cpu[pid]
    return totals


# --- ladle up and the swap client -----------------------------------------------------------------


@dataclass
class Up:
    proc: asyncio.subprocess.Process
    ready: dict[str, Any]
    drain: asyncio.Task[None]

    async def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        await self.proc.wait()
        self.drain.cancel()


async def start_up(rest_workers: int, nice: int) -> Up:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ladle",
        "up",
        "--ports",
        "0",
        "--preset",
        "small",
        "--no-verify",
        "--rest-workers",
        str(rest_workers),
        "--http-nice",
        str(nice),
        "--log-level",
        "warning",
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    while True:
        raw = await proc.stdout.readline()
        if not raw:
            raise RuntimeError(f"ladle up exited with status {await proc.wait()}")
        line = raw.decode().strip()
        if line.startswith(READY):
            ready: dict[str, Any] = json.loads(line[len(READY) :])
            break

    async def drain(stream: asyncio.StreamReader) -> None:
        while await stream.readline():
            pass

    return Up(proc, ready, asyncio.create_task(drain(proc.stdout)))


async def build_params(ready: dict[str, Any]) -> dict[str, Any]:
    """A BCH → token `tx.build` on the token with the most live pools, funded by the BCH coins
    of devnet wallet 0."""
    async with httpx.AsyncClient(timeout=30) as http:
        ledger = (await http.get(ready["devnet"]["ledger"])).json()
    counts: dict[str, int] = {}
    for pool in ledger["pools"]:
        if pool["live_utxo"] is not None:
            counts[pool["category"]] = counts.get(pool["category"], 0) + 1
    token = max(sorted(counts), key=lambda t: counts[t])
    wallet = Wallet.from_seed("ladle devnet wallet 0")
    electrum = ElectrumClient([ready["electrum"][0]["tcp"]], client_name="bench_isolation")
    try:
        coins = await electrum.listunspent(electrum_scripthash(wallet.locking_bytecode))
    finally:
        await electrum.close()
    funding = [
        {
            "txid": u.outpoint.txid_hex,
            "vout": u.outpoint.index,
            "value": str(u.value),
            "script_hex": wallet.locking_bytecode.hex(),
        }
        for u in coins
        if u.token is None
    ]
    return {
        "sell": "bch",
        "buy": token,
        "amount": str(AMOUNT),
        "receive_addr": wallet.token_address,
        "change_addr": wallet.address,
        "funding": funding,
    }


@dataclass
class Samples:
    ping: list[float] = field(default_factory=list)
    build: list[float] = field(default_factory=list)


async def _timed(ws: ClientConnection, n: int, method: str, params: Any) -> float:
    doc: dict[str, Any] = {"id": n, "method": method}
    if params is not None:
        doc["params"] = params
    began = time.perf_counter()
    await ws.send(orjson.dumps(doc).decode())
    raw = await ws.recv(decode=False)
    elapsed = time.perf_counter() - began
    if b'"error"' in raw[:200]:
        raise RuntimeError(f"{method}: {raw[:300]!r}")
    return elapsed * 1000


async def probe(
    conns: list[ClientConnection], params: dict[str, Any], seconds: float, into: Samples
) -> None:
    """Every connection a pair each PACE seconds (staggered) for `seconds`."""
    stop_at = time.monotonic() + seconds

    async def client(k: int, ws: ClientConnection) -> None:
        n = 0
        due = time.monotonic() + PACE * k / len(conns)
        while due < stop_at:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            n += 2
            into.ping.append(await _timed(ws, n, "ping", None))
            into.build.append(await _timed(ws, n + 1, "tx.build", params))
            due += PACE

    await asyncio.gather(*(client(k, ws) for k, ws in enumerate(conns)))


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return round(s[min(len(s) - 1, int(q * len(s)))], 3)


async def measure(args: argparse.Namespace, nice: int) -> dict[str, Any]:
    up = await start_up(args.rest_workers, nice)
    try:
        ready = up.ready
        params = await build_params(ready)
        samples = {phase: Samples() for phase in PHASES}
        cpu = {phase: {"seconds": 0.0} for phase in PHASES}

        async def timed_probe(ws: list[ClientConnection], phase: str) -> None:
            began, before = time.monotonic(), component_cpu(up.proc.pid)
            await probe(ws, params, args.seconds, samples[phase])
            after = component_cpu(up.proc.pid)
            cpu[phase]["seconds"] += time.monotonic() - began
            for name, used in after.items():
                cpu[phase][name] = cpu[phase].get(name, 0.0) + used - before.get(name, 0.0)

        floods: dict[str, list[dict[str, Any]]] = {phase: [] for phase in PHASES[1:]}
        async with contextlib.AsyncExitStack() as stack:
            ws = [
                await stack.enter_async_context(connect(ready["router"], max_size=None))
                for _ in range(args.probes)
            ]
            await probe(ws, params, 1.0, Samples())  # warm-up
            for round_ in range(args.rounds):
                await timed_probe(ws, "quiet")
                for phase, mode in (("429 flood", "one-client"), ("answered flood", "rotate")):
                    procs = [
                        await run_flood(
                            ready["rest"], mode, args, args.seconds + 1.5, 5000 * round_ + 500 * k
                        )
                        for k in range(args.flood_processes)
                    ]
                    await asyncio.sleep(1.0)  # the flood under way (its processes started)
                    await timed_probe(ws, phase)
                    for proc in procs:
                        out, _ = await proc.communicate()
                        floods[phase].append(json.loads(out))
        rows: dict[str, dict[str, Any]] = {}
        for phase, s in samples.items():
            rows[phase] = {
                "pairs": len(s.ping),
                "ping_p50_ms": pct(s.ping, 0.5),
                "ping_p99_ms": pct(s.ping, 0.99),
                "build_p50_ms": pct(s.build, 0.5),
                "build_p99_ms": pct(s.build, 0.99),
                "cpu_cores": {
                    name: round(used / cpu[phase]["seconds"], 2)
                    for name, used in sorted(cpu[phase].items())
                    if name != "seconds"
                },
            }
        quiet = rows["quiet"]
        for phase in PHASES[1:]:
            row = rows[phase]
            for key in ("ping_p50_ms", "ping_p99_ms", "build_p50_ms", "build_p99_ms"):
                row[key.replace("_ms", "_ratio")] = round(row[key] / quiet[key], 2)
            runs = floods[phase]
            seconds = sum(r["seconds"] for r in runs) / args.flood_processes  # side by side
            statuses: dict[str, int] = {}
            for r in runs:
                for k, v in r["statuses"].items():
                    statuses[k] = statuses.get(k, 0) + v
            row["flood_rps"] = round(sum(r["requests"] for r in runs) / seconds)
            row["flood_statuses"] = statuses
            row["flood_cpu_share"] = round(sum(r["cpu_seconds"] for r in runs) / seconds, 2)
        return {"http_nice": nice, "rest_workers": args.rest_workers, "phases": rows}
    finally:
        await up.stop()


def table(report: dict[str, Any]) -> str:
    lines = [
        "| --http-nice | phase | ping p50 / p99 ms | ÷ quiet | tx.build p50 / p99 ms | ÷ quiet "
        "| flood req/s (statuses) | flood CPU | REST / router CPU |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in report["runs"]:
        for phase, r in run["phases"].items():
            ratios = ("", "")
            flood_cells = ("", "")
            if phase != "quiet":
                ratios = (
                    f"{r['ping_p50_ratio']} / {r['ping_p99_ratio']}",
                    f"{r['build_p50_ratio']} / {r['build_p99_ratio']}",
                )
                st = ", ".join(f"{k}: {v:,}" for k, v in r["flood_statuses"].items())
                flood_cells = (f"{r['flood_rps']:,} ({st})", f"{r['flood_cpu_share']:.2f}")
            lines.append(
                f"| {run['http_nice']} | {phase} | {r['ping_p50_ms']} / {r['ping_p99_ms']} | "
                f"{ratios[0]} | {r['build_p50_ms']} / {r['build_p99_ms']} | {ratios[1]} | "
                f"{flood_cells[0]} | {flood_cells[1]} | "
                f"{r['cpu_cores'].get('rest', 0):.2f} / {r['cpu_cores'].get('router', 0):.2f} |"
            )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    runs = []
    for nice in (int(n) for n in args.nice.split(",")):
        print(f"ladle up --http-nice {nice} --rest-workers {args.rest_workers} …", flush=True)
        runs.append(await measure(args, nice))
        print(json.dumps(runs[-1]), flush=True)
    return {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load": os.getloadavg(),
        },
        "rounds": args.rounds,
        "seconds": args.seconds,
        "flood_connections": args.flood_connections,
        "flood_nice": args.flood_nice,
        "flood_processes": args.flood_processes,
        "probes": args.probes,
        "runs": runs,
    }


def main() -> None:
    if len(sys.argv) == 8 and sys.argv[1] == "--flood":
        host, port, conns, seconds, mode, first = sys.argv[2:]
        rotate = mode == "rotate"
        asyncio.run(flood(host, int(port), int(conns), float(seconds), rotate, int(first)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--nice", default="0,10", help="--http-nice values, one ladle up each")
    parser.add_argument("--rest-workers", type=int, default=2)
    parser.add_argument("--probes", type=int, default=4, help="swap client connections")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0, help="per phase")
    parser.add_argument("--flood-connections", type=int, default=16)
    parser.add_argument(
        "--flood-nice", type=int, default=19, help="the flood's niceness (19; 0: as the router)"
    )
    parser.add_argument("--flood-processes", type=int, default=1)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    print(table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
