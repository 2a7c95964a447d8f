"""Sync figures against real nodes: ladle's initial sync from BCHN against its ceiling, and
through Fulcrum, in the same run.

A regtest BCHN (`bitcoind`, with Fulcrum in front; both found as the real-node test tier finds
them, `LADLE_BITCOIND` / `LADLE_FULCRUM` or PATH) gets `--blocks` blocks each carrying
`--trades-per-block` Cauldron trades over `--pools` pools (and `--payments-per-block` plain
payments, default none: every transaction is Cauldron's), built and signed with our `bch`
wallet and sent with `sendrawtransaction` (tests/realnode/cauldron.py). Then, from the block
that creates the pools to the tip, with the same prefetch window:

- **ceiling**: every block fetched whole (`getblock <hash> 0`, at most 4 requests in flight,
  BCHN's default `-rpcthreads`) and parsed as the follower does (`Block`: boundaries, txids,
  merkle check against the linked header), every transaction decoded; nothing indexed;
- **ladle from BCHN**: a fresh `Follower` over `BitcoindSource` syncs into a fresh SQLite
  file, as `ladle index --bitcoind-rpc` does;
- **ladle through Fulcrum**: the same over Fulcrum (`ladle index --electrum`), which cannot hand
  out whole blocks: each block's transactions are enumerated by position and fetched;
- **store only**: the same blocks, fetched beforehand, applied to a fresh store from memory as
  the follower applies them: what indexing costs without any source, so that ladle's sync
  from BCHN over this says what reading from the node adds.

The four run `--rounds` times in turn; the report gives the fastest run of each, and the
ratios of ladle's BCHN sync to the ceiling and to the store alone (blocks/s over blocks/s, also
per round against the same round's runs). Requests per block are counted in separate, untimed
runs: HTTP requests and JSON-RPC calls to BCHN; round trips (lines) and calls to Fulcrum,
through a counting proxy.

    .venv/bin/python scripts/bench_sync_nodes.py [--blocks 300] [--trades-per-block 40]
        [--pools 20] [--payments-per-block 0] [--window 32] [--rounds 3] [--json FILE]

"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' real-node helpers

from bch.wallet import Wallet
from indexer.bitcoind import BitcoindClient, RpcAddress
from indexer.electrum import ElectrumClient
from indexer.follow import BitcoindSource, BlockPipeline, ChainSource, ElectrumSource, Follower
from indexer.follow.chain import HOLD_DISTANCE
from indexer.follow.fetch import DEFAULT_WINDOW
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from tests.indexer.electrum_servers import RecordingProxy
from tests.realnode.cauldron import Traffic
from tests.realnode.nodes import RealNodes, find_binaries, real_nodes

TRADER = Wallet.from_seed("ladle sync benchmark trader", prefix="bchreg")
PAYEE = Wallet.from_seed("ladle sync benchmark payee", prefix="bchreg").locking_bytecode


@dataclass(frozen=True, slots=True)
class Run:
    name: str
    seconds: float
    blocks: int
    txs: int

    @property
    def blocks_per_s(self) -> float:
        return self.blocks / self.seconds

    @property
    def txs_per_s(self) -> float:
        return self.txs / self.seconds


def build_chain(nodes: RealNodes, blocks: int, trades: int, pools: int, payments: int) -> int:
    """Pools, then `blocks` blocks of `trades` trades and `payments` plain payments each; the
    height of the pools' block."""
    node = nodes.bitcoind
    traffic = Traffic(node, TRADER)
    live, coin = traffic.open_pools(pools)
    node.mine(1)

    first = int(node.rpc("getblockcount"))
    for _ in range(blocks):
        for i in range(trades):
            k = i % len(live)
            live[k], coin = traffic.trade(live[k], coin, sats_in=1_000)
        for _ in range(payments):
            coin = traffic.pay(coin, PAYEE)
        traffic.send()
        node.mine(1)
    nodes.fulcrum.wait_synced(timeout=600)
    return first


def node_client(nodes: RealNodes) -> BitcoindClient:
    return BitcoindClient(RpcAddress.parse(nodes.bitcoind.rpc_url))


async def linked_headers(source: ChainSource, start: int, tip: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    while (height := start + len(out)) <= tip:
        got = await source.headers(height, min(2016, tip + 1 - height))
        out.extend((height + i, h) for i, h in enumerate(got))
    return out


async def ceiling(nodes: RealNodes, start: int, tip: int, window: int) -> Run:
    source = BitcoindSource(node_client(nodes))
    try:
        headers = await linked_headers(source, start, tip)
        began = time.perf_counter()
        blocks = txs = 0
        async with BlockPipeline(source.block, headers, window=window) as pipe:
            async for fetched in pipe:
                assert fetched.block is not None
                blocks += 1
                txs += fetched.tx_count
                for i in range(fetched.block.tx_count):
                    fetched.block.transaction(i)
        return Run("ceiling: getblock + parse", time.perf_counter() - began, blocks, txs)
    finally:
        await source.close()


async def store_only(nodes: RealNodes, start: int, tip: int) -> Run:
    source = BitcoindSource(node_client(nodes))
    try:
        blocks = [
            await source.block(h, header) for h, header in await linked_headers(source, start, tip)
        ]
    finally:
        await source.close()
    with tempfile.TemporaryDirectory(prefix="ladle-bench-sync-") as scratch:
        store = await open_store(Path(scratch) / "index.sqlite", snapshot=PoolSnapshot())
        try:
            began = time.perf_counter()
            for i, fetched in enumerate(blocks):
                await fetched.apply(store, hold=len(blocks) - i > HOLD_DISTANCE)
            await store.commit()
            seconds = time.perf_counter() - began
        finally:
            await store.close()
    return Run(
        "store only: apply from memory", seconds, len(blocks), sum(b.tx_count for b in blocks)
    )


async def sync(name: str, source: ChainSource, start: int, window: int) -> Run:
    with tempfile.TemporaryDirectory(prefix="ladle-bench-sync-") as scratch:
        store = await open_store(Path(scratch) / "index.sqlite", snapshot=PoolSnapshot())
        txs = 0

        def on_block(_: object, fetched: Any) -> None:
            nonlocal txs
            txs += fetched.tx_count

        try:
            follower = Follower(
                source, store, start_height=start, window=window, mempool=False, on_block=on_block
            )
            began = time.perf_counter()
            result = await follower.sync()
            seconds = time.perf_counter() - began
        finally:
            await store.close()
            await source.close()
    return Run(name, seconds, result.applied, txs)


def from_node(nodes: RealNodes, start: int, window: int) -> Awaitable[Run]:
    return sync("ladle from BCHN", BitcoindSource(node_client(nodes)), start, window)


def through_fulcrum(nodes: RealNodes, start: int, window: int) -> Awaitable[Run]:
    source = ElectrumSource(ElectrumClient([nodes.electrum_url]))
    return sync("ladle through Fulcrum", source, start, window)


async def requests_per_block(nodes: RealNodes, start: int, window: int) -> dict[str, Any]:
    """Untimed syncs that count what each source was asked."""
    client = node_client(nodes)
    run = await sync("count", BitcoindSource(client), start, window)
    counts: dict[str, Any] = {
        "bchn_http_requests_per_block": client.requests / run.blocks,
        "bchn_calls_per_block": client.calls / run.blocks,
    }
    port = nodes.fulcrum.tcp_port
    async with RecordingProxy.running("127.0.0.1", port) as proxy:
        source = ElectrumSource(ElectrumClient([proxy.url]))
        run = await sync("count", source, start, window)
        messages = [m for session in proxy.sessions for m in session]
    calls = sum(len(m) if isinstance(m, list) else 1 for m in messages)
    counts["fulcrum_round_trips_per_block"] = len(messages) / run.blocks
    counts["fulcrum_calls_per_block"] = calls / run.blocks
    counts["txs_per_block"] = run.txs / run.blocks
    return counts


async def measure(nodes: RealNodes, start: int, window: int, rounds: int) -> dict[str, Any]:
    tip = int(nodes.bitcoind.rpc("getblockcount"))
    kinds: list[Callable[[], Awaitable[Run]]] = [
        lambda: ceiling(nodes, start, tip, window),
        lambda: from_node(nodes, start, window),
        lambda: through_fulcrum(nodes, start, window),
        lambda: store_only(nodes, start, tip),
    ]
    runs: list[list[Run]] = []
    for i in range(rounds):
        runs.append([await kind() for kind in kinds])
        print(
            f"round {i + 1}: "
            + ", ".join(f"{r.name} {r.blocks_per_s:,.0f} blocks/s" for r in runs[-1])
        )
    best = [max((r[k] for r in runs), key=lambda run: run.blocks_per_s) for k in range(4)]
    per_round = [r[1].blocks_per_s / r[0].blocks_per_s for r in runs]
    over_store = [r[1].blocks_per_s / r[3].blocks_per_s for r in runs]
    return {
        "blocks": best[0].blocks,
        "txs": best[0].txs,
        "best": [asdict(run) | {"blocks_per_s": run.blocks_per_s} for run in best],
        "bchn_over_ceiling": best[1].blocks_per_s / best[0].blocks_per_s,
        "bchn_over_ceiling_per_round": per_round,
        "bchn_over_ceiling_median": statistics.median(per_round),
        "bchn_over_store": best[1].blocks_per_s / best[3].blocks_per_s,
        "bchn_over_store_per_round": over_store,
        "fulcrum_over_ceiling": best[2].blocks_per_s / best[0].blocks_per_s,
        "fulcrum_over_bchn": best[2].blocks_per_s / best[1].blocks_per_s,
        **await requests_per_block(nodes, start, window),
    }


def _print(report: dict[str, Any]) -> None:
    print(f"\n{report['blocks']:,} blocks, {report['txs']:,} transactions ({report['versions']})")
    print("| run | seconds | blocks/s | tx/s |\n|---|---:|---:|---:|")
    for run in report["best"]:
        rate = run["txs"] / run["seconds"]
        print(
            f"| {run['name']} | {run['seconds']:.2f} | {run['blocks_per_s']:,.0f} | {rate:,.0f} |"
        )
    rounds = ", ".join(f"{r:.2f}" for r in report["bchn_over_ceiling_per_round"])
    print(f"ladle from BCHN ÷ ceiling: {report['bchn_over_ceiling']:.2f} (per round: {rounds})")
    rounds = ", ".join(f"{r:.2f}" for r in report["bchn_over_store_per_round"])
    print(f"ladle from BCHN ÷ store only: {report['bchn_over_store']:.2f} (per round: {rounds})")
    print(
        f"ladle through Fulcrum ÷ ceiling: {report['fulcrum_over_ceiling']:.2f}; "
        f"÷ ladle from BCHN: {report['fulcrum_over_bchn']:.2f}"
    )
    print(
        f"per block ({report['txs_per_block']:.1f} txs): BCHN "
        f"{report['bchn_http_requests_per_block']:.2f} HTTP requests, "
        f"{report['bchn_calls_per_block']:.2f} calls; Fulcrum "
        f"{report['fulcrum_round_trips_per_block']:.2f} round trips, "
        f"{report['fulcrum_calls_per_block']:.2f} calls"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=300)
    parser.add_argument("--trades-per-block", type=int, default=40)
    parser.add_argument("--pools", type=int, default=20)
    parser.add_argument(
        "--payments-per-block", type=int, default=0, help="plain payments beside the trades"
    )
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    binaries, reason = find_binaries()
    if binaries is None:
        print(f"bench_sync_nodes: {reason}", file=sys.stderr)
        return 2
    # A SIGTERM unwinds like an exception, so the nodes are stopped and their directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    with real_nodes(binaries) as nodes:
        began = time.perf_counter()
        start = build_chain(
            nodes, args.blocks, args.trades_per_block, args.pools, args.payments_per_block
        )
        print(f"chain built in {time.perf_counter() - began:.0f}s; measuring from height {start}")
        report = asyncio.run(measure(nodes, start, args.window, args.rounds))
        report["versions"] = nodes.versions
    report["settings"] = vars(args)
    _print(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
