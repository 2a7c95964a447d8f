"""`ladle route` / `ladle build`: exit codes, stdout JSON, stderr lines.

Mostly in-process through a parser built with `router.cli.add_commands` (as `ladle` registers
them), plus real `python -m ladle` subprocesses as integrators run it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from router import wire
from router.cli import add_commands
from router.pools import BCH
from tests.conftest import ROOT
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    funding,
    standard_book,
)
from tests.router.schemas import validator


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ladle")
    add_commands(p.add_subparsers(dest="command", required=True))
    return p


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    args = parser().parse_args(argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.fixture
def pools_file(tmp_path: Path) -> Path:
    book = standard_book()
    path = tmp_path / "pools.json"
    pools = [wire.pool_doc(p) for token in book.tokens() for p in book.pools(token)]
    path.write_text(json.dumps(pools))
    return path


def buy_a_with_bch(pools_file: Path) -> list[str]:
    """`ladle route` arguments of the order both the in-process and the subprocess tests run."""
    return [
        "route",
        "--pools",
        str(pools_file),
        "--sell",
        "bch",
        "--buy",
        TOKEN_A,
        "--amount",
        "3000000",
        "--fee-address",
        FEE_WALLET.token_address,
    ]


def test_route_prints_the_quote(pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = run(buy_a_with_bch(pools_file), capsys)
    assert (code, err) == (0, "")
    validator("quote.result.json").validate(doc)
    assert doc["input_amount"] == "3000000" and doc["router_fee"]["amount"] == "3000"
    assert doc["snapshot_version"] is None and doc["index_height"] is None
    code, doc, _ = run(
        [
            "route",
            "--pools",
            str(pools_file),
            "--sell",
            TOKEN_A,
            "--buy",
            TOKEN_B,
            "--amount",
            "5000",
            "--side",
            "buy",
            "--fee-bps",
            "0",
            "--fee-per-byte",
            "2",
        ],
        capsys,
    )
    assert code == 0 and doc["output_amount"] == "5000" and doc["fee_per_byte"] == 2.0
    assert doc["router_fee"]["amount"] == "0"


def test_route_errors(pools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A routing error: JSON on stdout, exit 1.
    code, doc, _ = run(
        ["route", "--pools", str(pools_file), "--sell", "bch", "--buy", "ab" * 32, "--amount", "5"],
        capsys,
    )
    assert code == 1 and doc["error"]["code"] == "route_failed"
    validator("error.json").validate(doc["error"])
    # Bad arguments and unreadable files: one line on stderr, exit 2.
    for argv in (
        ["route", "--pools", str(pools_file), "--sell", "bch", "--buy", TOKEN_A, "--amount", "x"],
        ["route", "--pools", "/nonexistent", "--sell", "bch", "--buy", TOKEN_A, "--amount", "5"],
        [
            "route",
            "--pools",
            str(pools_file),
            "--sell",
            "bch",
            "--buy",
            TOKEN_A,
            "--amount",
            "5",
            "--fee-address",
            USER.address,
        ],
    ):
        code, doc, err = run(argv, capsys)
        assert code == 2 and doc is None
        assert err.startswith("ladle: error: ") and err.count("\n") == 1


def test_bad_pools_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pools.json"
    path.write_text('[{"txid": 1}]')
    code, _, err = run(
        ["route", "--pools", str(path), "--sell", "bch", "--buy", TOKEN_A, "--amount", "5"], capsys
    )
    assert code == 2 and "bad pools file" in err


def test_build_prints_the_result(
    pools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = tmp_path / "request.json"
    params = build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 10_000_000)])
    request.write_text(json.dumps(params))
    argv = [
        "build",
        "--pools",
        str(pools_file),
        "--request",
        str(request),
        "--fee-address",
        FEE_WALLET.token_address,
    ]
    code, doc, err = run(argv, capsys)
    assert (code, err) == (0, "")
    validator("tx.build.result.json").validate(doc)
    assert doc["fee_sats"] == "3000"
    # A whole JSON-RPC request is accepted as well and gives the same answer.
    request.write_text(json.dumps({"id": 1, "method": "tx.build", "params": params}))
    assert run(argv, capsys)[1] == doc
    # --fee-bps 0 disables the fee.
    code, free, _ = run([*argv, "--fee-bps", "0"], capsys)
    assert code == 0 and free["fee_sats"] == "0"


def test_build_errors(pools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 1_000)])))
    code, doc, _ = run(["build", "--pools", str(pools_file), "--request", str(request)], capsys)
    assert code == 1 and doc["error"]["code"] == "insufficient_funds"
    request.write_text(json.dumps({"sell": "bch"}))
    code, doc, _ = run(["build", "--pools", str(pools_file), "--request", str(request)], capsys)
    assert code == 1 and doc["error"]["code"] == "bad_request"
    request.write_text("{not json")
    code, doc, err = run(["build", "--pools", str(pools_file), "--request", str(request)], capsys)
    assert code == 2 and doc is None and "not valid JSON" in err
    code, _, err = run(["build", "--pools", str(pools_file), "--request", "/nonexistent"], capsys)
    assert code == 2 and "cannot read request file" in err
    bad_pools = tmp_path / "pools.json"
    bad_pools.write_text('[{"txid": "00", "tx_pos": 0}]')
    request.write_text(json.dumps(build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 10**7)])))
    for argv in (
        ["build", "--pools", str(bad_pools), "--request", str(request)],
        ["build", "--pools", str(pools_file), "--request", str(request), "--fee-bps", "-1"],
        ["build", "--pools", str(pools_file), "--request", str(request), "--fee-per-byte", "0"],
    ):
        code, doc, err = run(argv, capsys)
        assert (code, doc) == (2, None), argv
        assert err.startswith("ladle: error: ") and err.count("\n") == 1, err


def test_options_are_registered() -> None:
    args = parser().parse_args(
        ["route", "--pools", "p", "--sell", "bch", "--buy", TOKEN_A, "--amount", "1"]
    )
    assert (args.side, args.fee_bps, args.fee_address, args.fee_per_byte) == ("sell", 10, None, 1.0)
    args = parser().parse_args(["build", "--pools", "p", "--request", "-", "--fee-bps", "0"])
    assert (args.fee_bps, args.fee_per_byte, args.request) == (0, 1.0, "-")
    with pytest.raises(SystemExit):
        parser().parse_args(
            [
                "route",
                "--pools",
                "p",
                "--sell",
                "bch",
                "--buy",
                TOKEN_A,
                "--amount",
                "1",
                "--side",
                "both",
            ]
        )


# --- as integrators run it: `python -m ladle …` in a subprocess ------------------------------


def ladle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ladle", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_ladle_route_and_build_subprocess(pools_file: Path, tmp_path: Path) -> None:
    proc = ladle(*buy_a_with_bch(pools_file))
    assert proc.returncode == 0, proc.stderr
    quote_doc = json.loads(proc.stdout)
    validator("quote.result.json").validate(quote_doc)
    request = tmp_path / "request.json"
    request.write_text(json.dumps(build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 10**7)])))
    proc = ladle(
        "build",
        "--pools",
        str(pools_file),
        "--request",
        str(request),
        "--fee-address",
        FEE_WALLET.token_address,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validator("tx.build.result.json").validate(doc)
    assert doc["route"]["output_amount"] == quote_doc["output_amount"]  # same code path


def test_ladle_route_exit_codes_subprocess(pools_file: Path) -> None:
    proc = ladle(
        "route", "--pools", str(pools_file), "--sell", "bch", "--buy", "cd" * 32, "--amount", "5"
    )
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["code"] == "route_failed"
    proc = ladle(
        "route",
        "--pools",
        str(pools_file) + ".missing",
        "--sell",
        "bch",
        "--buy",
        TOKEN_A,
        "--amount",
        "5",
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ladle: error: cannot read pools file")
