"""Issue 20, item 1: a fresh index reaches the tip through a real Fulcrum, as a new user runs it
(no `--start-height`), and so does the standalone router."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexer.electrum import ElectrumClient
from indexer.follow import Follower
from indexer.store import Store
from tests.realnode.nodes import RealNodes

LADLE = [sys.executable, "-m", "ladle"]
TIMEOUT = 60.0


def _ladle(*args: str) -> list[str]:
    return [*LADLE, *args, "--log-format", "json", "--no-progress"]


def test_ladle_index_reaches_the_tip(nodes: RealNodes, tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    args = _ladle("index", "--electrum", nodes.electrum_url, "--db", str(db), "--exit-at-tip")
    done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    ready = [e for e in events if e.get("event") == "ready"]
    assert ready and ready[0]["height"] == nodes.bitcoind.rpc("getblockcount")
    assert ready[0]["tip"] == nodes.bitcoind.rpc("getbestblockhash")
    assert not [e for e in events if e.get("event") == "restart"], "no walk should restart"
    assert not [e for e in events if e.get("level") == "warning"], done.stderr[-2000:]


async def test_follower_indexes_the_genesis_block_and_follows(
    nodes: RealNodes, tmp_path: Path
) -> None:
    """The genesis coinbase cannot be fetched from a node, yet block 0 is part of the index
    (it anchors the index to the network), applied without transactions."""
    client = ElectrumClient([nodes.electrum_url], retries=0)
    store = await Store.open(tmp_path / "index.sqlite")
    try:
        follower = Follower(client, store, mempool=False)
        result = await follower.sync()
        assert follower.start_height == 0
        tip = await store.tip()
        assert tip is not None and tip.height == result.height
        genesis = await store.block_hash(0)
        assert genesis is not None
        assert genesis[::-1].hex() == nodes.bitcoind.rpc("getblockhash", 0)
        nodes.mine(2)
        again = await follower.sync()
        assert again.applied == 2 and again.height == tip.height + 2
    finally:
        await store.close()
        await client.close()


@pytest.mark.slow
def test_ladle_router_gets_ready_without_a_start_height(nodes: RealNodes, tmp_path: Path) -> None:
    args = [
        *_ladle("router", "--electrum", nodes.electrum_url, "--db", str(tmp_path / "r.sqlite")),
        "--port",
        "0",
        "--fee-bps",
        "0",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        line = ""
        while time.monotonic() < deadline and not line.startswith("LADLE_READY"):
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert line.startswith("LADLE_READY"), proc.stderr.read() if proc.stderr else ""
        ready = json.loads(line.split(" ", 1)[1])
        assert ready["height"] == nodes.bitcoind.rpc("getblockcount")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
