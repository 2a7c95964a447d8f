"""Benchmark of the broadcast service against a 16-node devnet: time to `accepted` versus the
slowest node's own response time, and sustained broadcasts per second.

    .venv/bin/python scripts/bench_broadcast.py [--nodes 16] [--txs 1000] [--concurrency 32]
                                                [--hetero-txs 100] [--json out.json]

Three processes, as deployed: the devnet (reached only over its Electrum sockets), the broadcast
service (`ladle broadcast`: uvicorn on a loopback port, SQLite records in a temporary file), and
this one, the load: an httpx client. Per-node response times are read back from each
transaction's status record. Every transaction is a real signed P2PKH spend of its own coin.

Runs:
1. latency: `--txs` transactions one at a time. Per transaction, the client's time from POST to
   the `accepted` answer, next to the slowest node's own response time to that broadcast (what
   a broadcaster waiting for every node would take: the ceiling), read from the verdicts.
2. throughput: `--txs` more transactions, `--concurrency` in flight: broadcasts per second.
3. heterogeneous latency: the nodes' answers are delayed by 0-250 ms (devnet `slow` faults, a
   spread like public Electrum servers'); each transaction waits for every node before the next
   (a devnet node answers one connection's requests in order, so overlapping them would measure
   its queue, not its latency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from indexer.electrum import ElectrumClient

ROOT = Path(__file__).resolve().parents[1]

COIN = 10_000  # sats per coin; each transaction spends one
FEE = 500
SPLIT = 1_000  # outputs per splitting transaction (about 34 kB, under the 100 kB standard)
# Reply delays (seconds) for the heterogeneous run, node by node.
HETERO = (
    0,
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.06,
    0.08,
    0.1,
    0.12,
    0.15,
    0.25,
)

DEVNET = """
import asyncio, json, sys
from devnet.service import Devnet, DevnetConfig

async def main() -> None:
    net = Devnet(DevnetConfig(nodes=int(sys.argv[1]), tcp_base=0, ws_base=None, verify=False))
    await net.start()
    print(json.dumps([s.tcp_port for s in net.servers]), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await net.stop()

asyncio.run(main())
"""

SERVICE = """
import argparse, sys
from broadcast.cli import add_commands
parser = argparse.ArgumentParser(prog="ladle")
add_commands(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""

ALICE = Wallet.from_seed("bench broadcast alice")
BOB = Wallet.from_seed("bench broadcast bob")


@dataclass
class Row:
    run: str
    txs: int
    concurrency: int
    accepted: int
    seconds: float
    per_second: float
    to_accepted_p50_ms: float
    to_accepted_p99_ms: float
    majority_node_p50_ms: float  # the verdict that completed the majority
    slowest_node_p50_ms: float  # the ceiling
    slowest_node_p99_ms: float


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def coins(control: ElectrumClient, count: int) -> list[tuple[OutPoint, TxOutput]]:
    """`count` coins of COIN sats for ALICE: faucet payments split by 1000-output spends."""
    out: list[tuple[OutPoint, TxOutput]] = []
    while len(out) < count:
        n = min(SPLIT, count - len(out))
        fee = 40 * n + 1_000
        txid = await control.request("devnet.faucet", ALICE.address, n * COIN + fee, True)
        funding = TxOutput(n * COIN + fee, ALICE.locking_bytecode)
        unsigned = Transaction.build(
            [TxInput(OutPoint.from_hex(txid, 0))], [TxOutput(COIN, ALICE.locking_bytecode)] * n
        )
        split = ALICE.sign_transaction(unsigned, [funding])
        await control.broadcast(split.hex())
        await control.request("devnet.mine", 1)
        split_txid = split.txid
        out += [(OutPoint(split_txid, i), o) for i, o in enumerate(split.outputs)]
    return out


def spends(pool: list[tuple[OutPoint, TxOutput]], n: int) -> list[Transaction]:
    txs = []
    for _ in range(n):
        outpoint, output = pool.pop()
        unsigned = Transaction.build(
            [TxInput(outpoint)], [TxOutput(output.value - FEE, BOB.locking_bytecode)]
        )
        txs.append(ALICE.sign_transaction(unsigned, [output]))
    return txs


RETRIES: list[str] = []  # transport errors retried (the POST is idempotent)


async def request(http: httpx.AsyncClient, method: str, url: str, **kw: Any) -> httpx.Response:
    """One request, retried once on a transport error: a keep-alive connection the server
    closed just as the client reused it (uvicorn drops idle ones after 5 s)."""
    try:
        return await http.request(method, url, **kw)
    except httpx.TransportError as exc:
        RETRIES.append(f"{method} {url}: {exc!r}")
        return await http.request(method, url, **kw)


async def post(http: httpx.AsyncClient, tx: Transaction) -> tuple[float, bool]:
    started = time.perf_counter()
    response = await request(http, "POST", "/broadcast", json={"tx": tx.hex()})
    elapsed = time.perf_counter() - started
    return elapsed, response.status_code == 200 and response.json()["status"] == "accepted"


async def complete(http: httpx.AsyncClient, txid: str, timeout: float = 60) -> list[float]:
    """Every node's response time (s) to the broadcast of `txid`, once all have answered."""
    deadline = time.monotonic() + timeout
    while True:
        record = (await request(http, "GET", f"/broadcast/status/{txid}")).json()
        nodes = record["nodes"]
        if all(n["state"] != "outstanding" for n in nodes):
            return sorted(n["elapsed_ms"] / 1000 for n in nodes)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{txid}: some nodes never answered")
        await asyncio.sleep(0.005)


async def run(
    name: str,
    url: str,
    nodes: int,
    txs: list[Transaction],
    concurrency: int,
    *,
    wait_all: bool,
) -> Row:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    accepted = 0
    majority = nodes // 2 + 1
    node_times: list[list[float]] = []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        queue = list(reversed(txs))

        async def worker() -> None:
            nonlocal accepted
            while queue:
                tx = queue.pop()
                elapsed, ok = await post(http, tx)
                latencies.append(elapsed)
                accepted += ok
                if wait_all:
                    node_times.append(await complete(http, tx.txid_hex))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        if not wait_all:
            node_times = [await complete(http, tx.txid_hex) for tx in txs]
    return Row(
        name,
        len(txs),
        concurrency,
        accepted,
        round(seconds, 2),
        round(len(txs) / seconds, 1),
        round(pct(latencies, 0.5) * 1000, 2),
        round(pct(latencies, 0.99) * 1000, 2),
        round(pct([t[majority - 1] for t in node_times], 0.5) * 1000, 2),
        round(pct([t[-1] for t in node_times], 0.5) * 1000, 2),
        round(pct([t[-1] for t in node_times], 0.99) * 1000, 2),
    )


async def spawn(code: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        *args,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def main(args: argparse.Namespace) -> list[Row]:
    devnet = await spawn(DEVNET, str(args.nodes))
    assert devnet.stdout is not None and devnet.stdin is not None
    ports = json.loads(await devnet.stdout.readline())
    urls = [f"tcp://127.0.0.1:{p}" for p in ports]
    control = ElectrumClient([urls[0]], extensions=False)
    rows: list[Row] = []
    service: asyncio.subprocess.Process | None = None
    try:
        pool = await coins(control, 2 * args.txs + args.hetero_txs + 2)
        with tempfile.TemporaryDirectory() as tmp:
            nodes = [arg for u in urls for arg in ("--node", u)]
            service = await spawn(
                SERVICE,
                "broadcast",
                "--port",
                "0",
                "--db",
                str(Path(tmp) / "records.sqlite"),
                "--timeout",
                "30",
                "--recheck-interval",
                "3600",
                "--no-verify",
                *nodes,
            )
            assert service.stdout is not None
            url = json.loads(await service.stdout.readline())["broadcast"]
            n = args.nodes
            await run("warm-up", url, n, spends(pool, 1), 1, wait_all=True)
            rows.append(await run("latency", url, n, spends(pool, args.txs), 1, wait_all=False))
            rows.append(
                await run(
                    "throughput", url, n, spends(pool, args.txs), args.concurrency, wait_all=False
                )
            )
            if args.hetero_txs:
                for k in range(n):
                    delay = HETERO[k * len(HETERO) // n]
                    await control.request("devnet.fault", "slow", delay, k)
                await run("warm-up", url, n, spends(pool, 1), 1, wait_all=True)
                rows.append(
                    await run(
                        "heterogeneous", url, n, spends(pool, args.hetero_txs), 1, wait_all=True
                    )
                )
            service.send_signal(signal.SIGINT)
            await service.wait()
    finally:
        if service is not None and service.returncode is None:
            service.kill()
            await service.wait()
        await control.close()
        devnet.stdin.close()
        await devnet.wait()
    return rows


def report(rows: list[Row], args: argparse.Namespace) -> None:
    print(f"# {args.nodes} devnet nodes; Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        "| run | txs | in flight | accepted | s | tx/s | to accepted p50 | p99 | "
        "majority node p50 | slowest node p50 | p99 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.run} | {r.txs} | {r.concurrency} | {r.accepted} | {r.seconds} | "
            f"{r.per_second} | {r.to_accepted_p50_ms} ms | {r.to_accepted_p99_ms} ms | "
            f"{r.majority_node_p50_ms} ms | {r.slowest_node_p50_ms} ms | "
            f"{r.slowest_node_p99_ms} ms |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--txs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--hetero-txs", type=int, default=100)
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments))
    report(result, arguments)
    if RETRIES:
        print(f"{len(RETRIES)} request(s) retried after a transport error: {RETRIES[:3]}")
    if arguments.json:
        Path(arguments.json).write_text(json.dumps([asdict(r) for r in result], indent=2))
    if statistics.fmean(r.accepted / r.txs for r in result) < 1:
        sys.exit("some broadcasts were not accepted")
