"""`ladle index`'s protocol options: feeds, lending deployments, the devnet's ledger, registry
sources and the IPFS gateway reach `IndexerConfig`; a bad file or value is a usage error (exit
status 2, one line); the defaults stay the mainnet constants. Also `ladle rest --usd-feed`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from indexer.cli import add_commands, config_from_args, main
from indexer.registry_fetch import OffchainSource
from protocols.lending.contracts import LendingConfig
from protocols.oracle import FeedConfig, mainnet_feeds
from rest.cli import add_arguments as add_rest_arguments
from rest.cli import config_from_args as rest_config
from tests.indexer.test_decoder_oracle import small_chain

FEED = "11" * 32
KEY = "02" + "ab" * 32


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ladle")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["index", *argv])


def write(path: Path, obj: object) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


def test_defaults_are_the_mainnet_constants() -> None:
    config = config_from_args(parse())
    assert config.feeds is None and config.lending is None  # the decoders' mainnet defaults
    assert config.registry_fetch and config.fetch.offchain == ()
    assert config.fetch.ipfs_gateway == "https://ipfs.io/ipfs/"


def test_feeds_lending_sources_and_gateway(tmp_path: Path) -> None:
    feeds = write(
        tmp_path / "feeds.json",
        [{"category": FEED, "layout": "price9", "name": "X/USD", "pubkeys": [KEY]}],
    )
    lending = write(
        tmp_path / "lending.json",
        [
            {"version": "v11", "stablecoin": FEED, "bar_locking": "aa", "loan_lockings": ["bb"]},
            {},
        ],
    )
    config = config_from_args(
        parse(
            *("--feeds", feeds, "--lending", lending, "--ipfs-gateway", "http://gw/ipfs/"),
            *("--registry-source", "list=https://example.org/r.json"),
            *("--registry-source", "local=/tmp/r.json", "--no-registry-fetch"),
        )
    )
    assert config.feeds == (FeedConfig(FEED, "price9", "X/USD", (bytes.fromhex(KEY),)),)
    mainnet = LendingConfig()
    assert config.lending == (
        LendingConfig(
            version="v11",
            stablecoin=FEED,
            loan_lockings=frozenset({b"\xbb"}),
            bar_locking=b"\xaa",
        ),
        mainnet,
    )
    assert config.fetch.offchain == (
        OffchainSource("list", "https://example.org/r.json"),
        OffchainSource("local", "/tmp/r.json"),
    )
    assert config.fetch.ipfs_gateway == "http://gw/ipfs/"
    assert not config.registry_fetch


def test_devnet_ledger_adds_the_devnet_feed_to_the_mainnet_ones(tmp_path: Path) -> None:
    ledger = small_chain().ledger
    path = tmp_path / "ledger.json"
    path.write_bytes(ledger.dumps())
    config = config_from_args(parse("--devnet-ledger", str(path)))
    devnet_feed = FeedConfig(
        ledger.oracle.category, "delphi", pubkeys=(bytes.fromhex(ledger.oracle.pubkey),)
    )
    assert config.feeds == (*mainnet_feeds().feeds, devnet_feed)
    assert config.lending == (LendingConfig(),)  # the small scenario has no lending activity


@pytest.mark.parametrize(
    ("option", "content"),
    [
        ("--feeds", "not json"),
        ("--feeds", [{"category": "zz", "layout": "delphi"}]),
        ("--feeds", [{"category": FEED, "layout": "bogus"}]),
        ("--feeds", {"category": FEED}),
        ("--lending", [{"version": "v9"}]),
        ("--lending", [{"stablecoin": FEED, "colour": "red"}]),
        ("--lending", [{"stablecoin": "12"}]),
        ("--devnet-ledger", {"oracle": {}}),
        ("--feeds", None),  # a file that does not exist
    ],
)
def test_bad_files_are_usage_errors(
    option: str, content: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.json"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        write(path, content)
    assert main([option, str(path), "--db", str(tmp_path / "i.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ladle: error: ") and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["nameonly", "=/path", "x=", "onchain=/tmp/r.json"])
def test_bad_registry_source_is_a_usage_error(bad: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse("--registry-source", bad)
    assert exit_.value.code == 2


def test_rest_usd_feed_option() -> None:
    parser = argparse.ArgumentParser()
    add_rest_arguments(parser)
    assert rest_config(parser.parse_args(["--usd-feed", FEED.upper()])).usd_feed == FEED
    assert rest_config(parser.parse_args(["--usd-feed", "none"])).usd_feed is None
    default = rest_config(parser.parse_args([])).usd_feed
    assert default == "d0d46f5cbd82188acede0d3e49c75700c19cb8331a30101f0bb6a260066ac972"
    with pytest.raises(ValueError, match="usd_feed"):
        rest_config(parser.parse_args(["--usd-feed", "12"]))
