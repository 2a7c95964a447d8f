"""Issue 20: `ladle devnet --bitcoind … --fulcrum …` lays the scenario down on a real regtest
BCHN with a real Fulcrum in front, and `ladle up` on top serves it as on the embedded devnet.

Everything expected comes from the scenario's ledger; what is checked comes from the real node
(RPC) and the real Fulcrum, or from the data API over their chain. The processes are real
`ladle` subprocesses, stopped with signals: the node and Fulcrum must go with them.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from devnet.network import MINER_SEED
from devnet.realnode.rpc import BitcoindRpc
from tests.realnode.nodes import Binaries, find_binaries

READY = "LADLE_READY "
START_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0


class Ladle:
    """A `ladle` subprocess whose stdout is read on a thread (the ready line has a deadline)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ladle", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode().rstrip("\n"))
        self.lines.put(None)

    def ready(self) -> dict[str, Any]:
        while True:
            try:
                line = self.lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise AssertionError("no LADLE_READY in time") from None
            if line is None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"exited before LADLE_READY: {err[-3000:]}")
            if line.startswith(READY):
                ready: dict[str, Any] = json.loads(line[len(READY) :])
                return ready

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=STOP_TIMEOUT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def children_in(root: str) -> list[int]:
    """Processes whose command line names `root` (the devnet's node and Fulcrum)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if root.encode() in cmdline:
            found.append(int(entry.name))
    return found


def electrum(entry: dict[str, Any], method: str, *params: Any) -> Any:
    with socket.create_connection((entry["host"], entry["tcp_port"]), timeout=10) as sock:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        sock.sendall(orjson.dumps(message) + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed the connection"
            buf += chunk
    reply: dict[str, Any] = orjson.loads(buf)
    assert "error" not in reply or reply["error"] is None, reply
    return reply["result"]


def rpc_of(ready: dict[str, Any]) -> BitcoindRpc:
    b = ready["bitcoind"]
    return BitcoindRpc(b["host"], b["rpc_port"], b["user"], b["password"])


@pytest.fixture(scope="module")
def binaries() -> Binaries:
    found, reason = find_binaries()
    if found is None:
        pytest.skip(f"real-node tier: bitcoind/Fulcrum not found: {reason}")
    return found


SCENARIO = ("--ports", "0", "--preset", "small", "--no-verify")


@dataclass
class DevnetRun:
    ladle: Ladle
    ready: dict[str, Any]
    ledger: dict[str, Any]


@pytest.fixture(scope="module")
def devnet(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevnetRun]:
    path = tmp_path_factory.mktemp("devnet") / "ledger.json"
    running = Ladle(
        "devnet",
        *SCENARIO,
        *("--bitcoind", binaries.bitcoind, "--fulcrum", binaries.fulcrum),
        *("--ledger", str(path)),
    )
    try:
        ready = running.ready()
        yield DevnetRun(running, ready, json.loads(path.read_text()))
    finally:
        running.kill()


def test_ready_line_announces_fulcrum_and_the_node(devnet: DevnetRun) -> None:
    ready = devnet.ready
    assert set(ready) == {"electrum", "wallets", "devnet", "bitcoind"}
    [entry] = ready["electrum"]
    assert set(entry) == {"node", "host", "tcp_port", "tcp", "ws_port", "ws"}
    version = electrum(entry, "server.version", "ladle-tests", "1.5")
    assert version[0].startswith("Fulcrum")
    rpc = rpc_of(ready)
    assert rpc.call("getblockchaininfo")["chain"] == "regtest"
    assert rpc.call("getbestblockhash") == ready["devnet"]["tip"]
    assert rpc.call("getblockcount") == ready["devnet"]["height"]
    tip = electrum(entry, "blockchain.headers.get_tip")
    assert tip["height"] == ready["devnet"]["height"]
    assert all(w["address"].startswith("bchreg:") for w in ready["wallets"])
    assert ready["bitcoind"]["rpc"].startswith("http://")


def test_the_ledger_is_the_nodes_chain(devnet: DevnetRun) -> None:
    ready, ledger = devnet.ready, devnet.ledger
    rpc = rpc_of(ready)
    chain = ledger["chain"]
    assert chain["genesis_hash"] == rpc.call("getblockhash", 0)
    assert chain["tip_hash"] == rpc.call("getbestblockhash")
    kinds = Counter(t["kind"] for t in ledger["transactions"])
    assert {"pool_create", "trade", "oracle_update"} <= set(kinds), kinds
    hashes: dict[int, str] = {}
    for tx in ledger["transactions"]:
        height = tx["height"]
        if height not in hashes:
            hashes[height] = rpc.call("getblockhash", height)
        found = rpc.call("getrawtransaction", tx["txid"], 1)
        assert found["blockhash"] == hashes[height], tx
        assert found["blocktime"] == tx["time"], tx  # the simulated clock, on the node
    mempool = set(rpc.call("getrawmempool"))
    assert {t["txid"] for t in ledger["mempool"]["transactions"]} <= mempool
    # The scenario's reorganisations happened on the node: the orphaned blocks are a side branch.
    tips = rpc.call("getchaintips")
    assert ledger["reorgs"]
    for reorg in ledger["reorgs"]:
        for orphan in reorg["orphaned"]:
            header = rpc.call("getblockheader", orphan)
            assert header["confirmations"] == -1, header
    assert len(tips) > 1
    # Fulcrum serves the same chain: the trades and oracle updates where the ledger puts them.
    [entry] = ready["electrum"]
    for item in [*ledger["trades"][:5], *ledger["oracle_updates"][-3:]]:
        proof = electrum(entry, "blockchain.transaction.get_merkle", item["txid"], item["height"])
        assert proof["block_height"] == item["height"]


def test_sigterm_stops_the_node_and_fulcrum(devnet: DevnetRun) -> None:
    ready = devnet.ready
    root = str(Path(ready["bitcoind"]["datadir"]).parent)
    assert len(children_in(root)) == 2  # bitcoind and Fulcrum
    assert devnet.ladle.stop(signal.SIGTERM) == 0
    assert children_in(root) == []
    assert not os.path.exists(root)


def _spend_a_coinbase(rpc: BitcoindRpc) -> Transaction:
    """The devnet miner's first coinbase, paid back to it (a transaction the devnet never saw)."""
    miner = Wallet.from_seed(MINER_SEED)
    coinbase = rpc.call("getblock", rpc.call("getblockhash", 1), 2)["tx"][0]
    value = round(coinbase["vout"][0]["value"] * 100_000_000)
    source = TxOutput(value, miner.locking_bytecode)
    unsigned = Transaction.build(
        [TxInput(OutPoint(bytes.fromhex(coinbase["txid"])[::-1], 0))],
        [TxOutput(value - 1_000, miner.locking_bytecode)],
    )
    return miner.sign_transaction(unsigned, [source])


def test_without_fulcrum_the_devnets_own_server_writes_through(binaries: Binaries) -> None:
    """No Fulcrum: the devnet's Electrum server is the front; the blocks it mines on request
    land on the node, and carry what was sent to the node directly."""
    running = Ladle("devnet", "--ports", "0", "--no-scenario", "--bitcoind", binaries.bitcoind)
    try:
        ready = running.ready()
        [entry] = ready["electrum"]
        rpc = rpc_of(ready)
        assert rpc.call("getbestblockhash") == ready["devnet"]["tip"]
        direct = _spend_a_coinbase(rpc)
        rpc.call("sendrawtransaction", direct.to_bytes().hex())
        electrum(entry, "devnet.mine", 2)
        tip = electrum(entry, "blockchain.headers.get_tip")
        assert tip["height"] == ready["devnet"]["height"] + 2 == rpc.call("getblockcount")
        mined = rpc.call("getrawtransaction", direct.txid_hex, 1)
        assert mined["confirmations"] == 2
        assert (
            electrum(entry, "blockchain.transaction.get", direct.txid_hex)
            == direct.to_bytes().hex()
        )
        root = str(Path(ready["bitcoind"]["datadir"]).parent)
        assert running.stop(signal.SIGINT) == 0
        assert children_in(root) == []
    finally:
        running.kill()


def test_with_fulcrum_the_node_mines_on_a_timer(binaries: Binaries) -> None:
    """`--mine-every` with Fulcrum in front: the node's own miner, seen through Fulcrum."""
    running = Ladle(
        "devnet",
        *("--ports", "0", "--no-scenario", "--mine-every", "0.3"),
        *("--bitcoind", binaries.bitcoind, "--fulcrum", binaries.fulcrum),
    )
    try:
        ready = running.ready()
        [entry] = ready["electrum"]
        rpc = rpc_of(ready)
        start = ready["devnet"]["height"]
        deadline = time.monotonic() + 30
        while electrum(entry, "blockchain.headers.get_tip")["height"] < start + 2:
            assert time.monotonic() < deadline, "no block mined"
            time.sleep(0.2)
        assert rpc.call("getblockcount") >= start + 2
        assert running.stop(signal.SIGTERM) == 0
    finally:
        running.kill()


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_kill_9_of_ladle_leaves_no_node_running(binaries: Binaries) -> None:
    running = Ladle(
        "devnet",
        *("--ports", "0", "--no-scenario"),
        *("--bitcoind", binaries.bitcoind, "--fulcrum", binaries.fulcrum),
    )
    root = ""
    try:
        ready = running.ready()
        root = str(Path(ready["bitcoind"]["datadir"]).parent)
        assert len(children_in(root)) == 2
        running.kill()
        deadline = time.monotonic() + STOP_TIMEOUT
        while children_in(root):
            assert time.monotonic() < deadline, "bitcoind or Fulcrum outlived ladle"
            time.sleep(0.2)
    finally:
        running.kill()
        if root:
            shutil.rmtree(root, ignore_errors=True)


def _wait_health(api: httpx.Client, *, nodes: int, timeout: float = 20.0) -> Any:
    """The broadcast API's /health once all `nodes` are connected (their tips are heard)."""
    deadline = time.monotonic() + timeout
    while True:
        health = _get(api, "/health")
        if len(health["nodes"]) == nodes and health["connected"] == nodes:
            return health
        assert time.monotonic() < deadline, health
        time.sleep(0.2)


def _get(api: httpx.Client, path: str, **params: Any) -> Any:
    """The answer, as a client following the specification gets it: with the node mining on a
    timer, an answer "as of now" is 503 `not_synced` for the moment between a new block and
    the index holding it, and is asked again."""
    deadline = time.monotonic() + 20.0
    while True:
        r = api.get(path, params=params)
        not_synced = r.status_code == 503 and r.json()["error"]["code"] == "not_synced"
        if not not_synced or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.status_code == 200, (path, r.text)
    return r.json()


def test_up_on_a_real_node_serves_the_ledger(binaries: Binaries) -> None:
    running = Ladle("up", *SCENARIO, "--bitcoind", binaries.bitcoind, "--fulcrum", binaries.fulcrum)
    try:
        ready = running.ready()
        root = str(Path(ready["bitcoind"]["datadir"]).parent)
        with httpx.Client(base_url=ready["rest"], timeout=30) as api:
            ledger = _get(api, ready["devnet"]["ledger"])
            active = [p for p in ledger["pools"] if p["status"] == "active"]
            ended = [p for p in ledger["pools"] if p["status"] == "withdrawn"]
            assert active and ended

            # Pools: every active pool in its live state (mempool trades applied), no other.
            page = _get(api, "/tokenpool/pools", limit=1000)
            assert page["total"] == len(active)
            got = {f"{p['txid']}:{p['tx_pos']}": (p["sats"], p["tokens"]) for p in page["pools"]}
            live = {
                p["live_utxo"]: (p["live_state"]["sats"], p["live_state"]["tokens"]) for p in active
            }
            assert got == live
            assert all(p["owner_p2pkh_addr"].startswith("bchreg:") for p in page["pools"])

            # Trade counts, in all and per token.
            count = _get(api, "/dex/contract/count")
            assert count == {
                "active": len(active),
                "ended": len(ended),
                "interactions": len(ledger["trades"]),
            }
            per_token = Counter(t["category"] for t in ledger["trades"])
            for category, trades in per_token.items():
                assert _get(api, f"/dex/contract/count/{category}")["interactions"] == trades
            latest = _get(api, "/dex/tx/latest", limit=500)
            assert {t["txid"] for t in latest} == {t["txid"] for t in ledger["trades"]}

            # The oracle: the devnet's feed at its last update.
            feed = ledger["oracle"]["category"]
            last = max(ledger["oracle_updates"], key=lambda u: u["sequence"])
            closest = _get(api, "/oracle/feed/closest", token_id=feed)
            assert (closest["oracle_price"], closest["txid"]) == (last["price"], last["txid"])

            # Lending: what the ledger's lending activity left (none when the node's rules
            # predate the lending contracts: BCHN v28 enforces the 2025 rules).
            lending = ledger["extensions"].get("lending")
            if ready["bitcoind"]["vm"] < 2026:
                assert lending is None
            records = [] if lending is None else lending["records"]
            history = _get(api, "/lending/v11/history", limit=200)
            assert sorted(x["txid"] for x in history) == sorted(
                e["txid"] for e in records if e.get("version") == "v11" and e["height"] is not None
            )
        # The broadcast API fans out to Fulcrum and to the node itself (its own verdicts).
        with httpx.Client(base_url=ready["broadcast"], timeout=30) as broadcast:
            health = _wait_health(broadcast, nodes=2)
            assert health["best_height"] == rpc_of(ready).call("getblockcount")
        assert running.stop(signal.SIGINT) == 0
        assert children_in(root) == []
    finally:
        running.kill()
