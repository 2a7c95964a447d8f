"""`--config FILE` and `LADLE_<COMMAND>_<OPTION>` for every command: precedence and errors."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from ladle.cli import build_parser
from runtime.config import add_config_option, apply_config, leaf_commands
from runtime.usage import UsageError


def parse(
    argv: list[str],
    env: dict[str, str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> argparse.Namespace:
    parser = parser or build_parser()
    apply_config(parser, argv, env or {})
    return parser.parse_args(argv)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ladle.toml"
    path.write_text(text)
    return str(path)


def test_every_command_takes_a_config_file() -> None:
    for path, leaf in leaf_commands(build_parser()).items():
        assert any("--config" in a.option_strings for a in leaf._actions), path


def test_the_file_sets_the_commands_options(tmp_path: Path) -> None:
    file = write(
        tmp_path,
        '[index]\ndb = "from-file.sqlite"\nstart-height = 5\nno-mempool = true\n'
        'electrum = ["tcp://a:1", "tcp://b:2"]\n'
        '[tx.decode]\nprefix = "bchreg"\n',
    )
    args = parse(["index", "--config", file])
    assert (args.db, args.start_height, args.no_mempool) == ("from-file.sqlite", 5, True)
    assert args.electrum == ["tcp://a:1", "tcp://b:2"]
    assert parse(["tx", "decode", "00", f"--config={file}"]).prefix == "bchreg"


def test_command_line_beats_environment_beats_file(tmp_path: Path) -> None:
    file = write(tmp_path, '[index]\ndb = "file.sqlite"\nstart-height = 5\nwindow = 3\n')
    env = {"LADLE_INDEX_DB": "env.sqlite", "LADLE_INDEX_START_HEIGHT": "7"}
    args = parse(["index", "--config", file, "--db", "cli.sqlite"], env)
    assert (args.db, args.start_height, args.window) == ("cli.sqlite", 7, 3)
    defaults = parse(["index"])
    assert parse(["index"], {"LADLE_INDEX_DB": "env.sqlite"}).db == "env.sqlite"
    assert defaults.window == parse(["index", "--config", write(tmp_path, "")]).window


def test_a_list_on_the_command_line_replaces_the_configured_one(tmp_path: Path) -> None:
    file = write(tmp_path, '[rest]\ncors-origin = ["https://a.example"]\n')
    assert parse(["rest", "--config", file]).cors_origin == ["https://a.example"]
    args = parse(["rest", "--config", file, "--cors-origin", "https://b.example"])
    assert args.cors_origin == ["https://b.example"]
    env = {"LADLE_REST_CORS_ORIGIN": "https://c.example, https://d.example"}
    assert parse(["rest"], env).cors_origin == ["https://c.example", "https://d.example"]


def test_flags_from_the_environment() -> None:
    assert parse(["index"], {"LADLE_INDEX_NO_MEMPOOL": "yes"}).no_mempool is True
    assert parse(["index"], {"LADLE_INDEX_NO_MEMPOOL": "0"}).no_mempool is False
    with pytest.raises(UsageError, match="LADLE_INDEX_NO_MEMPOOL"):
        parse(["index"], {"LADLE_INDEX_NO_MEMPOOL": "maybe"})


def test_a_required_option_may_come_from_the_file(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="t")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("go").add_argument("--needed", required=True, type=int)
    add_config_option(parser)
    file = write(tmp_path, "[go]\nneeded = 3\n")
    assert parse(["go", "--config", file], parser=parser).needed == 3


@pytest.mark.parametrize(
    ("text", "env", "message"),  # for `ladle index`
    [
        ("[index]\nsurprise = 1\n", {}, "unknown option 'surprise'"),
        ('[nosuch]\ndb = "x"\n', {}, r"\[nosuch\] is not a command"),
        ('index = "x"\n', {}, "index must be a table"),
        ("[index]\nstart-height = 'ten'\n", {}, "invalid value 'ten'"),
        ("[index]\nno-mempool = 1\n", {}, "must be true or false"),
        ("[index\n", {}, "not TOML"),
        ("", {"LADLE_INDEX_SURPRISE": "1"}, "LADLE_INDEX_SURPRISE: no such option"),
    ],
)
def test_bad_configuration_is_a_usage_error(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    file = write(tmp_path, text)
    with pytest.raises(UsageError, match=message):
        parse(["index", "--config", file], env)


def test_a_value_outside_the_choices_is_a_usage_error(tmp_path: Path) -> None:
    file = write(tmp_path, '[tx.decode]\nprefix = "nope"\n')
    with pytest.raises(UsageError, match="invalid choice 'nope'"):
        parse(["tx", "decode", "00", "--config", file])


def test_other_commands_variables_are_left_alone() -> None:
    assert parse(["index"], {"LADLE_REST_SURPRISE": "1", "LADLE_FULCRUM": "x"}).db is not None


def test_the_command_reports_a_bad_file_in_one_line(tmp_path: Path) -> None:
    file = write(tmp_path, "[pool.address]\nsurprise = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ladle", "pool", "address", "00", "--config", file],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"ladle: error: {file}: [pool.address]: unknown option 'surprise'"
    ]
    missing = str(tmp_path / "missing.toml")
    proc = subprocess.run(
        [sys.executable, "-m", "ladle", "pool", "address", "00", "--config", missing],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
