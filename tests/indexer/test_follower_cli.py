"""`ladle index` (run as `python -m indexer.cli`) and the `ladle up` component."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from devnet.bcmr_http import DocumentServer
from devnet.cli import LaunchedDevnet
from indexer.cli import add_commands, cmd_index, config_from_args, main
from indexer.service import IndexerConfig, UpConfig, start_indexer
from ladle.up import ready_line
from runtime.component import UpContext
from tests.indexer.test_follower_support import SMALL, generate, urls


class LogReader:
    """The JSON-lines log of an indexer process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.records: list[dict[str, Any]] = []

    async def until(self, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
        assert self.proc.stderr is not None
        while True:
            line = await asyncio.wait_for(self.proc.stderr.readline(), timeout)
            assert line, f"the indexer exited: {self.records[-3:]}"
            record: dict[str, Any] = json.loads(line)  # every line is one JSON object
            self.records.append(record)
            if predicate(record):
                return record


async def test_index_syncs_follows_and_stops_on_sigterm(tmp_path: Path) -> None:
    net, result = await generate(SMALL.replace(seed=8))
    try:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "indexer.cli", "--electrum", urls(net)[0]),
            *("--db", str(tmp_path / "index.sqlite"), "--mempool-interval", "0.1"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        log = LogReader(proc)
        ready = await log.until(lambda r: r.get("event") == "ready")
        assert ready["height"] == net.nodes[0].height
        assert ready["tip"] == net.nodes[0].chain.tip.hash_hex
        assert ready["pending"] == len({e.txid for e in result.ledger.mempool.events})
        assert {"sync_start", "sync_done"} <= {r.get("event") for r in log.records}
        net.nodes[0].mine(1)
        block = await log.until(lambda r: r.get("event") == "block")
        assert block["height"] == net.nodes[0].height
        assert block["hash"] == net.nodes[0].chain.tip.hash_hex
        proc.send_signal(signal.SIGTERM)
        await log.until(lambda r: r.get("event") == "stopped")
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        await net.stop()


@pytest.mark.parametrize(
    "argv",
    [
        ["--electrum", "ftp://example.com:1"],
        ["--start-height", "-1"],
        ["--window", "0"],
        ["--mempool-interval", "0"],
        ["--electrum", "tcp://"],
        ["--electrum", "tcp://a.example:1", "--bitcoind-rpc", "http://u:p@b.example:1"],
        ["--bitcoind-rpc", "http://b.example:1"],  # no login
        ["--bitcoind-rpc", "https://u:p@b.example:1"],
        ["--bitcoind-rpc", "http://u:p@b.example:1", "--rpc-cookie", "/cookie"],
        ["--bitcoind-rpc", "http://u:p@b.example:1", "--zmq", "b.example:2"],
        ["--bitcoind-rpc", "http://u:p@b.example:1", "--zmq", "tcp://b.example"],
        ["--zmq", "tcp://b.example:2"],  # an option of a node, without one
    ],
)
def test_bad_options_are_one_line_and_status_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ladle: error: ") and err.count("\n") == 1


def test_the_index_command_registers_on_ladle_subparsers() -> None:
    parser = argparse.ArgumentParser(prog="ladle")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        [
            *("index", "--electrum", "tcp://a.example:1", "ssl://b.example:2"),
            *("--electrum", "wss://c.example:3/rpc", "--db", "x.sqlite"),
            *("--start-height", "5", "--insecure-tls", "--no-mempool"),
        ]
    )
    assert args.func is cmd_index
    assert config_from_args(args) == IndexerConfig(
        electrum=("tcp://a.example:1", "ssl://b.example:2", "wss://c.example:3/rpc"),
        db="x.sqlite",
        start_height=5,
        insecure_tls=True,
        mempool=False,
    )
    node = parser.parse_args(
        [
            *("index", "--bitcoind-rpc", "http://127.0.0.1:8332", "--rpc-cookie", "/c"),
            *("--zmq", "tcp://127.0.0.1:28332", "tcp://127.0.0.1:28333"),
        ]
    )
    assert config_from_args(node) == IndexerConfig(
        bitcoind="http://127.0.0.1:8332",
        rpc_cookie="/c",
        zmq=("tcp://127.0.0.1:28332", "tcp://127.0.0.1:28333"),
    )
    defaults = config_from_args(parser.parse_args(["index"]))
    assert defaults == IndexerConfig()
    assert defaults.electrum == ("tcp://127.0.0.1:50001",) and defaults.start_height is None


async def test_ladle_up_component_syncs_before_it_is_ready() -> None:
    net, result = await generate(SMALL.replace(seed=9))
    http = DocumentServer("127.0.0.1", 0)
    await http.start()
    try:
        ctx = UpContext(argparse.Namespace())
        ctx.devnet = LaunchedDevnet(net, http, result)
        started = await start_indexer(ctx, UpConfig())
        assert started is not None
        try:
            info = started.ready["indexer"]
            assert isinstance(info, dict)
            assert info["height"] == net.nodes[0].height
            assert info["pools"] == sum(1 for p in result.ledger.pools if p.status == "active")
            assert Path(str(info["db"])).exists()
            line = ready_line([started])
            assert orjson.loads(line.split(" ", 1)[1])["indexer"] == info
            assert "indexer: synced to height" in started.lines[0]
        finally:
            await started.stop()
        assert not Path(str(info["db"])).exists()
    finally:
        await http.close()
        await net.stop()
