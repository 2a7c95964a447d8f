"""The service as deployed: a real uvicorn server on a loopback port, and `ladle broadcast`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from broadcast.cli import add_commands, config_from_args, start_server
from devnet.service import Devnet
from tests.broadcast.helpers import ALICE, BOB, config_for, fund, node_url, pay

ROOT = Path(__file__).resolve().parents[2]
RUN_CLI = (
    "import argparse, sys\n"
    "from broadcast.cli import add_commands\n"
    "parser = argparse.ArgumentParser(prog='ladle')\n"
    "add_commands(parser.add_subparsers(dest='command', required=True))\n"
    "args = parser.parse_args(sys.argv[1:])\n"
    "sys.exit(args.func(args))\n"
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ladle")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


async def test_end_to_end_over_a_real_socket(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    running = await start_server(config_for(net, tmp_path / "r.sqlite"), port=0)
    try:
        assert running.port != 0
        async with httpx.AsyncClient(base_url=running.url) as http:
            response = await http.post("/broadcast", json={"tx": tx.hex()})
            assert response.status_code == 200
            assert response.json()["status"] == "accepted"
            assert response.json()["nodes_reached"] >= 3
            status = await http.get(f"/broadcast/status/{tx.txid_hex}")
            assert status.json()["status"] == "accepted"
            huge = await http.post(
                "/broadcast",
                content=b'{"tx": "' + b"00" * 1_000_000 + b'"}',
                headers={"content-type": "application/json"},
            )
            assert huge.status_code == 413
            assert huge.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
            wrong = await http.post("/broadcast", content=b"tx=00")
            assert wrong.status_code == 415
    finally:
        await running.stop()


def test_command_line_options(tmp_path: Path) -> None:
    args = parse(
        "broadcast",
        "--port",
        "9001",
        "--node",
        "tcp://127.0.0.1:50001",
        "--node",
        "wss://example.org:50004,2.5",
        "--db",
        str(tmp_path / "x.sqlite"),
        "--timeout",
        "3",
    )
    config = config_from_args(args)
    assert args.port == 9001
    assert [(n.url, n.weight, n.timeout) for n in config.nodes] == [
        ("tcp://127.0.0.1:50001", 1.0, 3.0),
        (["wss://example.org:50004", "2.5"][0], 2.5, 3.0),
    ]
    assert config.db_path == str(tmp_path / "x.sqlite")


@pytest.mark.parametrize(
    "node", ["http://example.org", "tcp://example.org:50001,heavy", "tcp://example.org:1,-1"]
)
def test_command_line_rejects_bad_nodes(node: str) -> None:
    with pytest.raises(ValueError):
        config_from_args(parse("broadcast", "--node", node))


def test_command_line_needs_a_node() -> None:
    with pytest.raises(ValueError, match="--node"):
        config_from_args(parse("broadcast"))


def test_config_file(tmp_path: Path) -> None:
    path = tmp_path / "broadcast.json"
    path.write_text(
        json.dumps(
            {
                "nodes": [{"url": "tcp://a.example:50001", "weight": 3, "timeout": 4}],
                "db": "records.sqlite",
                "record_ttl": 120,
                "protection": {"max_fee_per_byte": 50},
            }
        )
    )
    config = config_from_args(parse("broadcast", "--settings", str(path)))
    assert [(n.url, n.weight, n.timeout) for n in config.nodes] == [
        ("tcp://a.example:50001", 3.0, 4.0)
    ]
    assert (config.db_path, config.record_ttl) == ("records.sqlite", 120.0)
    assert config.protection.max_fee_per_byte == 50.0
    path.write_text(json.dumps({"nodes": [], "surprise": 1}))
    with pytest.raises(ValueError, match="surprise"):
        config_from_args(parse("broadcast", "--settings", str(path)))


async def test_ladle_broadcast_command(net: Devnet, tmp_path: Path) -> None:
    coin = await fund(net, ALICE, 40_000)
    tx = pay(coin, BOB.locking_bytecode)
    nodes = [arg for k in range(5) for arg in ("--node", node_url(net, k))]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RUN_CLI,
        "broadcast",
        "--port",
        "0",
        "--db",
        str(tmp_path / "cli.sqlite"),
        "--no-verify",
        *nodes,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        ready = json.loads(line)
        assert len(ready["nodes"]) == 5
        async with httpx.AsyncClient(base_url=ready["broadcast"]) as http:
            response = await http.post("/broadcast", json={"tx": tx.hex()})
            answer = response.json()
            assert (answer["txid"], answer["status"], answer["nodes_total"]) == (
                tx.txid_hex,
                "accepted",
                5,
            )
            assert answer["nodes_reached"] >= 3  # answered at the majority
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_ladle_up_component(net: Devnet) -> None:
    from broadcast.cli import UpConfig, start_in_up
    from devnet.cli import LaunchedDevnet
    from runtime.component import UpContext

    ctx = UpContext(argparse.Namespace())
    ctx.devnet = LaunchedDevnet(net, None, None)  # type: ignore[arg-type]  # no HTTP server here
    started = await start_in_up(ctx, UpConfig(host="127.0.0.1", port=0, verify_scripts=False))
    assert started is not None
    try:
        url = str(started.ready["broadcast"])
        coin = await fund(net, ALICE, 40_000)
        tx = pay(coin, BOB.locking_bytecode)
        async with httpx.AsyncClient(base_url=url) as http:
            response = await http.post("/broadcast", json={"tx": tx.hex()})
        assert response.json()["status"] == "accepted"
        assert url in started.lines[0]
    finally:
        await started.stop()
