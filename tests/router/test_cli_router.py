"""`ladle router` standalone, as an operator runs it: a `python -m ladle router` subprocess
indexing a devnet (started in this process on loopback) into a fresh database, serving the
WebSocket protocol on a free port, following new blocks, stopping cleanly on SIGTERM.

What the router answers is checked against the scenario ledger (the devnet's own record of
every pool), never against the router's or the indexer's code."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from devnet.scenario import ScenarioResult
from devnet.service import Devnet
from protocols.cauldron.formulas import PoolState, is_valid_pool_transition
from router.pools import BCH
from runtime.supervise import READY
from tests.conftest import ROOT
from tests.indexer.test_follower_support import SMALL, generate, urls, wait_until
from tests.router.helpers import FEE_WALLET
from tests.router.schemas import validator
from tests.router.test_cli import parser
from tests.router.test_daemon_support import RESULTS, Client


@dataclass
class Standalone:
    net: Devnet
    scenario: ScenarioResult
    proc: asyncio.subprocess.Process
    ready: dict[str, Any]
    stderr: Path


async def _ready_line(proc: asyncio.subprocess.Process) -> tuple[list[str], dict[str, Any]]:
    assert proc.stdout is not None
    lines: list[str] = []
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not raw:
            raise AssertionError(f"ladle router exited before it was ready: {lines}")
        line = raw.decode().rstrip("\n")
        lines.append(line)
        if line.startswith(READY + " "):
            doc: dict[str, Any] = orjson.loads(line.split(" ", 1)[1])
            return lines, doc


@asynccontextmanager
async def standalone(tmp_path: Path, *extra: str) -> AsyncIterator[Standalone]:
    net, scenario = await generate(SMALL)
    stderr = tmp_path / "router.log"
    proc: asyncio.subprocess.Process | None = None
    try:
        with stderr.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "ladle", "router", "--port", "0"),
                *("--electrum", *urls(net), "--db", str(tmp_path / "index.sqlite")),
                *("--start-height", "0", "--mempool-interval", "0.05", "--no-progress"),
                *("--log-format", "json", *extra),
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=ROOT,
            )
        lines, ready = await _ready_line(proc)
        assert lines[0].startswith(f"indexer: synced to height {ready['height']}, ")
        assert any(line.startswith(f"router: {ready['router']} (") for line in lines)
        assert ready["indexer"]["height"] == ready["height"]
        yield Standalone(net, scenario, proc, ready, stderr)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await net.stop()


def live_pools(scenario: ScenarioResult) -> dict[tuple[str, int], Any]:
    """(txid, vout) → the ledger's pool entry, for every pool alive counting the mempool."""
    out = {}
    for p in scenario.ledger.pools:
        if p.live_utxo is not None:
            txid, vout = p.live_utxo.split(":")
            out[(txid, int(vout))] = p
    return out


async def test_ladle_router_serves_a_live_index(tmp_path: Path) -> None:
    async with standalone(tmp_path, "--fee-address", FEE_WALLET.token_address) as s:
        assert s.ready["router"].startswith("ws://127.0.0.1:")
        assert s.ready["height"] == s.net.nodes[0].height
        live = live_pools(s.scenario)
        assert 0 < s.ready["pools"] <= len(live)
        # The token with the most live pools, by the ledger.
        counts: dict[str, int] = {}
        for p in live.values():
            counts[p.category] = counts.get(p.category, 0) + 1
        token = max(counts, key=lambda t: (counts[t], t))
        async with connect(s.ready["router"]) as ws:
            c = Client(ws)
            order = {"sell": BCH, "buy": token, "amount": "2000000"}
            q = await c.call("quote", order)
            RESULTS["quote"].validate(q)
            assert q["input_amount"] == "2000000"
            assert q["router_fee"] == {"asset": BCH, "amount": "2000", "sats": "2000", "bps": 10}
            assert q["index_height"] == s.net.nodes[0].height
            got = 0
            for leg in q["legs"]:
                entry = live[(leg["txid"], leg["tx_pos"])]  # a pool the ledger says is alive …
                assert entry.category == token and entry.owner_pkh == leg["owner_pkh"]
                assert entry.live_state is not None  # … in exactly the state it has
                assert (int(leg["sats_before"]), int(leg["tokens_before"])) == (
                    entry.live_state.sats,
                    entry.live_state.tokens,
                )
                before = PoolState(int(leg["sats_before"]), int(leg["tokens_before"]))
                after = PoolState(int(leg["sats_after"]), int(leg["tokens_after"]))
                assert is_valid_pool_transition(before, after)
                got += int(leg["amount_out"])
            assert got == int(q["output_amount"])

            # It follows the chain: a new block shows up in the next answers.
            s.net.nodes[0].mine()
            height = s.net.nodes[0].height

            async def moved() -> bool:
                doc = await c.call("quote", order)
                return bool(doc["index_height"] == height)

            await wait_until(moved, what="the router to see the new block")
            await c.close()
        s.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(s.proc.wait(), 30) == 0
    log = s.stderr.read_text()
    assert '"router listening on' in log  # logs are JSON lines on stderr (--log-format json)


async def test_ladle_router_limits_from_the_command_line(tmp_path: Path) -> None:
    # `--fee-bps 0`: running fee-less is allowed when asked for explicitly.
    limits = ("--max-connections", "1", "--rate", "0.01", "--fee-bps", "0")
    async with standalone(tmp_path, *limits) as s:
        async with connect(s.ready["router"]) as ws:
            await ws.send('{"id": "first", "method": "ping"}')
            assert orjson.loads(await ws.recv()) == {"id": "first", "result": "pong"}
            # the second connection is refused while the first is open
            with pytest.raises(InvalidStatus) as refused:
                async with connect(s.ready["router"]):
                    pass
            assert refused.value.response.status_code == 503
            # the rest of the burst (100 requests) at once, one more, then one per 100 s
            for i in range(100):
                await ws.send(orjson.dumps({"id": i, "method": "ping"}).decode())
            replies = [orjson.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(100)]
        assert replies[:99] == [{"id": i, "result": "pong"} for i in range(99)]
        validator("error.reply.json").validate(replies[99])
        assert replies[99]["id"] == 99 and replies[99]["error"]["code"] == "rate_limited"
        s.proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(s.proc.wait(), 30) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--fee-bps", "0", "--max-connections", "0"],
        ["--fee-bps", "0", "--rate", "0"],
        ["--fee-bps", "0", "--port", "70000"],
        ["--fee-bps", "5000", "--fee-address", FEE_WALLET.token_address],
        ["--fee-address", "bitcoincash:qqqq"],
        ["--fee-bps", "0", "--exit-at-tip"],
        [],  # no fee address and no explicit --fee-bps 0: the fee would silently be off
        ["--fee-bps", "10"],
    ],
)
def test_ladle_router_bad_options_are_one_line_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(["router", *argv])
    assert args.func(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ladle: error: ") and err.count("\n") == 1, err
    if argv in ([], ["--fee-bps", "10"]):
        assert "--fee-address" in err and "--fee-bps 0" in err, err
