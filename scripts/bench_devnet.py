"""Benchmark the devnet: generate a Cauldron history, then measure its Electrum server.

    .venv/bin/python scripts/bench_devnet.py                 # 90 days, 2,000 pools (preset large)
    .venv/bin/python scripts/bench_devnet.py --preset small  # a quick smoke run

Reports the seconds the scenario takes, the blocks and transactions it produced, and the
requests per second the server answers for `blockchain.block.get` and
`blockchain.transaction.get` next to the baseline `server.ping` (an echo: the cost of the
socket, framing and dispatch alone), measured in the same run against the same server. The
client runs in a separate process (so it does not share the server's core) and keeps WINDOW
requests in flight on each of CONNECTIONS TCP connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONNECTIONS = 4
WINDOW = 64


# --- the client (a child process) ---------------------------------------------------------------


async def _connection(host: str, port: int, lines: list[bytes]) -> tuple[int, int, int]:
    """Send `lines` keeping WINDOW in flight; return (answers, errors, bytes received)."""
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 26)
    writer.write(b'{"jsonrpc":"2.0","id":0,"method":"server.version","params":["bench","1.4"]}\n')
    await reader.readline()
    answers = errors = received = 0
    for start in range(0, len(lines), WINDOW):
        chunk = lines[start : start + WINDOW]
        writer.write(b"".join(chunk))
        await writer.drain()
        for _ in chunk:
            reply = await reader.readline()
            received += len(reply)
            answers += 1
            if b'"error"' in reply[:40]:
                errors += 1
    writer.close()
    return answers, errors, received


async def _client(host: str, port: int, method: str, params: list[Any]) -> dict[str, float]:
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": method, "params": p}).encode() + b"\n"
        for i, p in enumerate(params)
    ]
    shares = [lines[k::CONNECTIONS] for k in range(CONNECTIONS)]
    began = time.perf_counter()
    results = await asyncio.gather(*(_connection(host, port, s) for s in shares))
    elapsed = time.perf_counter() - began
    return {
        "requests": sum(r[0] for r in results),
        "errors": sum(r[1] for r in results),
        "bytes": sum(r[2] for r in results),
        "seconds": elapsed,
    }


def client_main(host: str, port: int, path: str) -> None:
    job = json.loads(Path(path).read_text())
    out = asyncio.run(_client(host, port, job["method"], job["params"]))
    print(json.dumps(out))


# --- the benchmark ------------------------------------------------------------------------------


async def measure(host: str, port: int, method: str, params: list[Any]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"method": method, "params": params}, fh)
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--client",
            host,
            str(port),
            fh.name,
            stdout=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
    finally:
        os.unlink(fh.name)
    result: dict[str, float] = json.loads(out)
    if result["errors"]:
        raise SystemExit(f"{method}: {result['errors']} error answers")
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from devnet.scenario.generator import ScenarioGenerator
    from devnet.scenario.params import PRESETS
    from devnet.service import Devnet, DevnetConfig

    params = PRESETS[args.preset].replace(days=args.days, pools=args.pools, seed=args.seed)
    net = Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False))
    await net.start()
    try:
        result = await ScenarioGenerator(net, params).run()
        ledger = result.ledger
        kinds = Counter(t.kind for t in [*ledger.transactions, *ledger.mempool.transactions])
        node = net.nodes[0]
        chain_bytes = sum(len(b.raw) for b in node.chain.blocks)
        report: dict[str, Any] = {
            "params": params.to_json(),
            "generate_seconds": round(result.seconds, 2),
            "blocks": result.blocks,
            "transactions": result.transactions,
            "transactions_by_kind": dict(sorted(kinds.items())),
            "pools": len(ledger.pools),
            "pool_events": len(ledger.events),
            "trades": len(ledger.trades),
            "max_pools_in_a_trade": max(t.pools for t in ledger.trades),
            "chain_height": node.height,
            "chain_mb": round(chain_bytes / 1e6, 2),
        }
        server = net.servers[0]
        rng = random.Random(args.seed)
        heights = [rng.randrange(ledger.chain.start_height, node.height + 1) for _ in range(args.n)]
        txids = [t.txid for t in ledger.transactions]
        rows = {}
        for method, plist in (
            ("server.ping", [[] for _ in range(args.n)]),
            ("blockchain.block.get", [[h] for h in heights]),
            ("blockchain.transaction.get", [[rng.choice(txids)] for _ in range(args.n)]),
        ):
            best: dict[str, float] | None = None
            for _ in range(args.repeat):
                m = await measure(server.host, server.tcp_port, method, plist)
                if best is None or m["seconds"] < best["seconds"]:
                    best = m
            assert best is not None
            rows[method] = {
                "requests_per_s": round(best["requests"] / best["seconds"]),
                "mb_per_s": round(best["bytes"] / best["seconds"] / 1e6, 1),
                "requests": int(best["requests"]),
            }
        ping = rows["server.ping"]["requests_per_s"]
        for row in rows.values():
            row["ratio_to_ping"] = round(row["requests_per_s"] / ping, 2)
        report["electrum"] = rows
        return report
    finally:
        await net.stop()


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--client":
        client_main(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--preset", default="large", choices=("small", "default", "large"))
    parser.add_argument("--days", type=int)
    parser.add_argument("--pools", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-n", type=int, default=20_000, help="requests per method (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per method; the best counts")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()
