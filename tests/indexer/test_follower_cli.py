"""`ladle index` (run as `python -m indexer.cli`) and what the indexer announces once synced."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from indexer.cli import add_commands, cmd_index, config_from_args, main
from indexer.service import IndexerConfig, ready_info, ready_lines, run_indexer
from indexer.snapshot import PoolSnapshot
from protocols.oracle import mainnet_feeds
from runtime.supervise import ready_line
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


async def test_ready_info_is_the_synced_index(tmp_path: Path) -> None:
    net, result = await generate(SMALL.replace(seed=9))
    try:
        db = str(tmp_path / "index.sqlite")
        config = IndexerConfig(
            electrum=tuple(urls(net)), db=db, start_height=0, progress=False, registry_fetch=False
        )
        snapshot = PoolSnapshot()
        synced = asyncio.Event()
        task = asyncio.create_task(run_indexer(config, ready=synced, snapshot=snapshot))
        try:
            await asyncio.wait_for(synced.wait(), 60)
            info = ready_info(config, snapshot)
            assert info["height"] == net.nodes[0].height
            assert info["pools"] == sum(1 for p in result.ledger.pools if p.status == "active")
            assert info["db"] == db and Path(db).exists()
            assert info["feeds"] == [f.category for f in mainnet_feeds().feeds]
            line = ready_line({"indexer": info})
            assert orjson.loads(line.split(" ", 1)[1])["indexer"] == info
            assert "indexer: synced to height" in ready_lines(config, snapshot)[0]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        await net.stop()
