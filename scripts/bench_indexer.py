"""Benchmark of the indexer's initial sync against the raw ceiling, in the same run.

A devnet runs in a child process (so its server works on the other core, like a real server
on another machine) and lays down a long scenario history: by default 90 days of the `large`
preset with 2,000 plain payments a day, about 227,000 transactions of which about 27,500 are
Cauldron trades. Then, over one Electrum connection and with the same prefetch window:

- **fetch + parse**: every block from the start height to the tip fetched
  (`blockchain.block.get`), hex-decoded and parsed as the follower does (`Block`: boundaries,
  txids, merkle check), and every transaction decoded (`Transaction`); nothing else;
- **fetch + parse (2 proc.)**: the same with the blocks fetched, checked and scanned by a fetch
  process, as the follower's initial sync does (`indexer.follow.fetch_process`), and decoded in
  this one: fetch + parse using both cores. **The ceiling is the faster of the two**;
- **fetch + scan**: the first without decoding the transactions;
- **indexing**: a fresh follower syncs the same blocks into a fresh SQLite file (WAL), as
  `ladle index` does (`--decoders` to choose the decoders; default: all registered).

Every measured run is made in a fresh Python process (`fresh_run`), as `ladle index` runs:
made one after another in one process, the later runs pay for the earlier ones' leftovers.
The machine's speed drifts (up to 2x within minutes on a shared VM), so the indexing runs
`--rounds` times (default 3), each between two runs of the ceilings: the report gives the
fastest run of each kind and their ratio, and each indexing against the faster of its two
adjacent ceilings (with the median of those). Each row also reports the CPU of the event-loop
thread, of the other processes and threads (the SQLite writer, `indexer.store.writer`, and
the fetch process) and of the devnet's server process, which say where the time goes.

    .venv/bin/python scripts/bench_indexer.py [--json out.json] [--days 90]
        [--payments-per-day 2000] [--trades-per-day 300] [--seed 1] [--window 32]
        [--cache DIR] [--decoders cauldron,…] [--rounds 3] [--offload-distance N]

`--cache DIR` stores the generated chain (its blocks, and what the generator reported) keyed by
the scenario settings, and later runs replay it into a fresh devnet instead of generating it
again (minutes → about a minute).
    .venv/bin/python scripts/bench_indexer.py --electrum tcp://host:port --start-height H

With `--electrum`, no devnet is started: the given server's chain from `--start-height` is
measured (a Rostrum server; on mainnet, mind the size of what you ask for).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from indexer.decoders import create_decoders, registered_decoders
from indexer.electrum import ElectrumClient
from indexer.follow import BlockPipeline, FetchedBlock, Follower, fetch_block
from indexer.follow.fetch import DEFAULT_WINDOW, Fetch
from indexer.follow.fetch_process import FetchProcess
from indexer.follow.settings import ClientSettings
from indexer.snapshot import PoolSnapshot
from indexer.store import Store


@dataclass(frozen=True, slots=True)
class Run:
    name: str
    seconds: float
    loop_cpu_s: float  # CPU of the event-loop thread (parsing, decoding, Python-side store)
    other_cpu_s: float  # CPU of the other threads and of the SQLite writer process
    blocks: int
    txs: int
    bytes: int
    server_cpu_s: float | None = None  # CPU of the devnet's server process (Linux only)

    @property
    def blocks_per_s(self) -> float:
        return self.blocks / self.seconds

    @property
    def txs_per_s(self) -> float:
        return self.txs / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6


class CpuClock:
    """Wall time and CPU time (this thread; the process's other threads) since creation."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.thread = time.thread_time()
        self.process = time.process_time()

    def read(self) -> tuple[float, float, float]:
        """(wall seconds, loop-thread CPU, other threads' CPU)"""
        thread = time.thread_time() - self.thread
        process = time.process_time() - self.process
        return time.perf_counter() - self.wall, thread, max(0.0, process - thread)


# --- the devnet (child process) -----------------------------------------------------------------


def _serve_devnet(settings: dict[str, Any], conn: Connection) -> None:
    asyncio.run(_devnet_main(settings, conn))


def _cache_paths(cache: Path, settings: dict[str, Any]) -> tuple[Path, Path]:
    """(blocks file, info file) of the cached history generated with `settings`."""
    key = "-".join(f"{k}{settings[k]}" for k in sorted(settings))
    return cache / f"chain-{key}.bin", cache / f"chain-{key}.json"


def _save_chain(blocks_file: Path, raws: Sequence[bytes]) -> None:
    """Every block after the genesis, each as a 4-byte little-endian length and its bytes."""
    tmp = blocks_file.with_suffix(".tmp")
    with tmp.open("wb") as f:
        for raw in raws:
            f.write(len(raw).to_bytes(4, "little"))
            f.write(raw)
    tmp.replace(blocks_file)


def _load_chain(blocks_file: Path) -> list[bytes]:
    data = blocks_file.read_bytes()
    raws, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos : pos + 4], "little")
        raws.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return raws


async def _devnet_main(settings: dict[str, Any], conn: Connection) -> None:
    from bch.block import Block
    from devnet.blocks import BlockRecord
    from devnet.scenario import PRESETS, ScenarioGenerator
    from devnet.service import Devnet, DevnetConfig

    cache = settings.pop("cache", None)
    params = PRESETS["large"].replace(**settings)
    began = time.perf_counter()
    cached = _cache_paths(Path(cache), settings) if cache else None
    if cached is not None and cached[0].exists() and cached[1].exists():
        # Replay the cached chain into a devnet without a premine (the same genesis).
        async with Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False, premine=0)) as net:
            node = net.nodes[0]
            for raw in _load_chain(cached[0]):
                block = Block(raw)
                node.chain.connect(
                    BlockRecord(block.header, tuple(block.iter_transactions()), raw, block.hash)
                )
            info = json.loads(cached[1].read_text())
            info |= {
                "port": net.servers[0].tcp_port,
                "loaded_from_cache_s": round(time.perf_counter() - began, 1),
            }
            conn.send(info)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        return
    async with Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False)) as net:
        result = await ScenarioGenerator(net, params).run()
        ledger = result.ledger
        kinds: dict[str, int] = {}
        for t in ledger.transactions:
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        node = net.nodes[0]
        info = {
            "height": node.height,
            "transactions": sum(len(b.txs) for b in node.chain.blocks),
            "scenario_transactions": len(ledger.transactions),
            "kinds": kinds,
            "trade_entries": len(ledger.trades),
            "pools": len(ledger.pools),
            "generation_s": round(time.perf_counter() - began, 1),
            "params": params.to_json(),
        }
        if cached is not None:
            cached[0].parent.mkdir(parents=True, exist_ok=True)
            _save_chain(cached[0], [b.raw for b in node.chain.blocks[1:]])
            cached[1].write_text(json.dumps(info, indent=2) + "\n")
        conn.send(info | {"port": net.servers[0].tcp_port})
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # until told to stop


# --- measurements -------------------------------------------------------------------------------


async def ceiling(
    client: ElectrumClient,
    start: int,
    tip: int,
    window: int,
    *,
    decode: bool,
    offload: bool = False,
) -> Run:
    """Fetch every block and parse it as the follower does (`Block`: transaction boundaries,
    txids, merkle check); with `decode`, also decode every transaction (`Transaction`). With
    `offload`, blocks are fetched and scanned by a fetch process, as the follower's initial
    sync does (`indexer.follow.fetch_process`), and decoded here: fetch + parse on two cores."""
    headers: list[tuple[int, bytes]] = []
    for first in range(start, tip + 1, 2016):
        raw = await client.get_headers(first, min(2016, tip + 1 - first))
        headers.extend((first + i, h) for i, h in enumerate(raw))

    async def in_loop(h: int, header: bytes) -> FetchedBlock:
        return await fetch_block(client, h, header)

    clock = CpuClock()
    children = _children_cpu()
    blocks = txs = size = 0
    async with contextlib.AsyncExitStack() as stack:
        fetch: Fetch = in_loop
        if offload:
            settings = ClientSettings.of(client)
            assert settings is not None
            fetch = (await stack.enter_async_context(FetchProcess(settings, in_loop))).fetch
        async with BlockPipeline(fetch, headers, window=window) as pipe:
            async for fetched in pipe:
                blocks += 1
                txs += fetched.tx_count
                size += fetched.size
                if decode and fetched.block is not None:
                    for i in range(fetched.block.tx_count):
                        fetched.block.transaction(i)
    wall, loop, other = clock.read()
    other += _children_cpu() - children  # the fetch process, once it exited
    name = ("fetch + parse" if decode else "fetch + scan") + (" (2 proc.)" if offload else "")
    return Run(name, wall, loop, other, blocks, txs, size)


async def indexing(
    client: ElectrumClient,
    start: int,
    window: int,
    db: Path,
    decoders: list[str] | None,
    offload_distance: int | None = None,
) -> Run:
    snapshot = PoolSnapshot()
    store = await Store.open(
        db, snapshot=snapshot, decoders=create_decoders(decoders, snapshot=snapshot)
    )
    counted = {"txs": 0, "bytes": 0}

    def on_block(_: object, fetched: Any) -> None:
        counted["txs"] += fetched.tx_count
        counted["bytes"] += fetched.size

    try:
        follower = Follower(
            client,
            store,
            start_height=start,
            window=window,
            mempool=False,
            on_block=on_block,
            offload_distance=offload_distance,
        )
        clock = CpuClock()
        writer_before = _children_cpu()
        result = await follower.sync()
        wall, loop, other = clock.read()
    finally:
        await store.close()  # waits for the writer process, so its CPU is counted below
    other += _children_cpu() - writer_before
    return Run("indexing", wall, loop, other, result.applied, counted["txs"], counted["bytes"])


def _process_cpu(pid: int | None) -> float | None:
    """CPU seconds a running process has used (from /proc; None where there is none): the
    devnet's server shares the two cores with the indexer's processes, unlike a real server."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _with_server_cpu(pid: int | None, run: Any) -> Run:
    """Await `run` (a coroutine giving a `Run`) and add the server's CPU during it."""
    before = _process_cpu(pid)
    result: Run = await run
    after = _process_cpu(pid)
    if before is None or after is None:
        return result
    return replace(result, server_cpu_s=round(after - before, 2))


def _children_cpu() -> float:
    """CPU of this process's children that have exited (the store's writer, once closed; the
    devnet's process is still running, so it is not counted)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_KINDS = ("parse", "scan", "parse2", "index")


async def one_run(
    url: str,
    kind: str,
    start: int,
    tip: int,
    window: int,
    db: Path | None = None,
    decoders: list[str] | None = None,
    offload_distance: int | None = None,
) -> Run:
    """One measurement in this process (`kind`: one of `_KINDS`)."""
    client = ElectrumClient([url], timeout=120.0)
    try:
        if kind == "index":
            assert db is not None
            return await indexing(client, start, window, db, decoders, offload_distance)
        decode, offload = {"parse": (True, False), "scan": (False, False)}.get(kind, (True, True))
        return await ceiling(client, start, tip, window, decode=decode, offload=offload)
    finally:
        await client.close()


async def fresh_run(
    url: str,
    kind: str,
    start: int,
    tip: int,
    window: int,
    db: Path | None = None,
    decoders: list[str] | None = None,
    offload_distance: int | None = None,
) -> Run:
    """`one_run` in a fresh Python process, as `ladle index` runs: a run made in this process
    after the others pays for their leftovers (the ceilings' 226,823 decoded transactions make
    the in-loop sync ~25 % slower here than in a process of its own)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--one", kind, "--electrum", url]
    argv += ["--start-height", str(start), "--tip", str(tip), "--window", str(window)]
    if db is not None:
        argv += ["--db", str(db)]
    if decoders:
        argv += ["--decoders", ",".join(decoders)]
    if offload_distance is not None:
        argv += ["--offload-distance", str(offload_distance)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"bench run {kind} failed: {err.decode()[-2000:]}")
    return Run(**json.loads(out.decode().strip().splitlines()[-1]))


async def measure(
    url: str,
    start: int,
    window: int,
    decoders: list[str] | None,
    server_pid: int | None = None,
    rounds: int = 1,
    offload_distance: int | None = None,
) -> dict[str, Any]:
    """Ceilings, then `rounds` × (indexing, ceilings again). The machine's speed drifts (up to
    2x within minutes on a shared VM), so each indexing is compared with the faster of the
    ceilings run right before and right after it, and the fastest runs are kept overall."""
    client = ElectrumClient([url], timeout=120.0)
    runs: dict[str, list[Run]] = {
        "fetch + parse": [],
        "fetch + scan": [],
        "fetch + parse (2 proc.)": [],
    }
    indexes: list[Run] = []
    per_round: list[float] = []
    db_mb = 0.0

    async def ceilings() -> Run:
        """The three ceilings; the faster fetch + parse of this turn (one process or two)."""
        for kind in ("parse", "scan", "parse2"):
            run = await _with_server_cpu(server_pid, fresh_run(url, kind, start, tip, window))
            runs[run.name].append(run)
        return max(runs["fetch + parse"][-1], runs["fetch + parse (2 proc.)"][-1], key=_speed)

    try:
        tip, _ = await client.get_tip()
        with tempfile.TemporaryDirectory(prefix="bench-indexer-") as tmp:
            before = await ceilings()
            for r in range(rounds):
                db = Path(tmp) / f"index-{r}.sqlite"
                index = await _with_server_cpu(
                    server_pid,
                    fresh_run(url, "index", start, tip, window, db, decoders, offload_distance),
                )
                indexes.append(index)
                db_mb = sum(p.stat().st_size for p in Path(tmp).glob(f"{db.name}*")) / 1e6
                for f in Path(tmp).glob(f"{db.name}*"):
                    f.unlink()
                after = await ceilings()
                adjacent = max(before.blocks_per_s, after.blocks_per_s)
                per_round.append(index.blocks_per_s / adjacent)
                before = after
    finally:
        await client.close()
    best = {name: max(rs, key=_speed) for name, rs in runs.items()}
    index = max(indexes, key=_speed)
    assert all(i.blocks == tip - start + 1 for i in indexes)
    assert all(r.blocks == index.blocks and r.txs == index.txs for r in best.values())
    one, two = best["fetch + parse"], best["fetch + parse (2 proc.)"]
    top = max(one, two, key=_speed)  # the ceiling: fetch + parse however it is faster
    return {
        "ceiling": asdict(top) | _rates(top),
        "ceiling_one_process": asdict(one) | _rates(one),
        "ceiling_two_processes": asdict(two) | _rates(two),
        "scan": asdict(best["fetch + scan"]) | _rates(best["fetch + scan"]),
        "indexing": asdict(index) | _rates(index) | {"db_mb": round(db_mb, 1)},
        "ratio": index.blocks_per_s / top.blocks_per_s,
        "ratio_to_one_process": index.blocks_per_s / one.blocks_per_s,
        "ratio_to_scan": index.blocks_per_s / best["fetch + scan"].blocks_per_s,
        "ratio_per_round": [round(x, 3) for x in per_round],
        "ratio_median": statistics.median(per_round),
        "all_runs": {name: [asdict(r) for r in rs] for name, rs in runs.items()}
        | {"indexing": [asdict(r) for r in indexes]},
    }


def _speed(run: Run) -> float:
    return run.blocks_per_s


def _rates(run: Run) -> dict[str, float]:
    return {
        "blocks_per_s": round(run.blocks_per_s, 1),
        "txs_per_s": round(run.txs_per_s, 1),
        "mb_per_s": round(run.mb_per_s, 2),
    }


def _print(report: dict[str, Any]) -> None:
    if "devnet" in report:
        d = report["devnet"]
        print(
            f"history: {d['transactions']:,} transactions in {d['height'] + 1:,} blocks, "
            f"{d['kinds'].get('trade', 0):,} pool trades, {d['pools']:,} pools "
            f"(generated in {d['generation_s']} s)"
        )
    print(f"decoders: {', '.join(report['decoders'])}; window {report['window']}")
    print(
        f"{'':24} {'seconds':>8} {'blocks/s':>10} {'tx/s':>10} {'MB/s':>7} "
        f"{'loop CPU s':>10} {'other CPU s':>12} {'server CPU s':>12}"
    )
    for key in ("ceiling_one_process", "ceiling_two_processes", "scan", "indexing"):
        r = report[key]
        print(
            f"{r['name']:24} {r['seconds']:8.1f} {r['blocks_per_s']:10,.1f} "
            f"{r['txs_per_s']:10,.1f} {r['mb_per_s']:7.2f} {r['loop_cpu_s']:10.1f} "
            f"{r['other_cpu_s']:12.1f} {_cpu(r.get('server_cpu_s')):>12}"
        )
    print(
        f"indexing / ceiling (the faster fetch + parse, {report['ceiling']['name']}): "
        f"{report['ratio']:.2f} (fastest of each; to the one-process ceiling: "
        f"{report['ratio_to_one_process']:.2f})"
    )
    rounds = ", ".join(f"{x:.2f}" for x in report["ratio_per_round"])
    print(f"  each indexing / its adjacent ceiling: {rounds} (median {report['ratio_median']:.2f})")
    print(f"indexing / fetch + scan:            {report['ratio_to_scan']:.2f}")


def _cpu(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--electrum", help="measure this server instead of a devnet")
    parser.add_argument("--start-height", type=int, default=0)
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    parser.add_argument(
        "--offload-distance",
        type=int,
        default=None,
        help="index with the fetch process from this far below the tip (default: off, as the "
        "follower's default)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="indexing runs, each followed by the ceilings again (default 3)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--trades-per-day", type=int, default=300)
    parser.add_argument("--payments-per-day", type=int, default=2000)
    parser.add_argument(
        "--cache",
        type=Path,
        help="keep the generated history in this directory and reuse it on later runs",
    )
    parser.add_argument(
        "--decoders",
        help=f"comma-separated decoders to index with (default: all registered, "
        f"{','.join(registered_decoders())})",
    )
    parser.add_argument("--one", choices=_KINDS, help=argparse.SUPPRESS)  # `fresh_run`'s
    parser.add_argument("--tip", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    decoders = args.decoders.split(",") if args.decoders else None
    if args.one is not None:
        run = asyncio.run(
            one_run(
                *(args.electrum, args.one, args.start_height, args.tip, args.window),
                *(args.db, decoders, args.offload_distance),
            )
        )
        print(json.dumps(asdict(run)))
        return 0
    report: dict[str, Any] = {
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{multiprocessing.cpu_count()} cores, CPython {platform.python_version()}",
        "window": args.window,
        "decoders": decoders or registered_decoders(),
    }
    child = None
    parent_conn = None
    url = args.electrum
    try:
        if url is None:
            settings = {
                "seed": args.seed,
                "days": args.days,
                "trades_per_day": args.trades_per_day,
                "payments_per_day": args.payments_per_day,
            }
            if args.cache is not None:
                settings["cache"] = str(args.cache)
            ctx = multiprocessing.get_context("spawn")
            parent_conn, child_conn = ctx.Pipe()
            child = ctx.Process(target=_serve_devnet, args=(settings, child_conn), daemon=True)
            child.start()
            print("generating the devnet history (a few minutes)…", flush=True)
            info = parent_conn.recv()
            report["devnet"] = info
            url = f"tcp://127.0.0.1:{info['port']}"
        pid = child.pid if child is not None else None
        report.update(
            asyncio.run(
                measure(
                    *(url, args.start_height, args.window, decoders, pid, max(1, args.rounds)),
                    offload_distance=args.offload_distance,
                )
            )
        )
    finally:
        if parent_conn is not None:
            parent_conn.send("stop")
        if child is not None:
            child.join(30)
            if child.is_alive():
                child.terminate()
    _print(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
