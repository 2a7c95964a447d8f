"""The indexer's protocol configuration from files and option values (`ladle index`).

What is decoded is configuration because a feed or a deployment is recognised by its categories
and contracts, never guessed: `--feeds FILE` (oracle feeds), `--lending FILE` (lending
deployments), `--devnet-ledger FILE` (the devnet's own feed and deployment, from the ledger
`ladle devnet --ledger` writes), `--registry-source NAME=URL|PATH` (off-chain registries).
Every problem is a ValueError naming the file and what is wrong.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from indexer.registry_fetch import OffchainSource
from protocols.bcmr import DEFAULT_IPFS_GATEWAY
from protocols.ledger import Ledger
from protocols.ledger_deployments import feed_configs, lending_configs
from protocols.lending.contracts import VERSIONS, LendingConfig
from protocols.oracle import FeedConfig, FeedTable

_LENDING_KEYS = ("version", "stablecoin", "price_oracle", "rate_oracle", "agent_minter")


def _read_json(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None


def load_feeds(path: str | Path) -> tuple[FeedConfig, ...]:
    """`[{"category": hex, "layout": "delphi"|"price9"|"legacy36", "name": "BCH/USD",
    "pubkeys": [hex, …]}, …]` (`FeedTable.from_json`); replaces the mainnet feed."""
    obj = _read_json(path)
    if not isinstance(obj, list) or not all(isinstance(x, dict) for x in obj):
        raise ValueError(f"{path}: a list of feed objects is expected")
    try:
        return FeedTable.from_json(obj).feeds
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def _hex_set(value: Any, what: str) -> frozenset[bytes] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"{what} is a list of hex strings")
    return frozenset(bytes.fromhex(str(x)) for x in value)


def _hex(value: Any) -> bytes | None:
    return None if value is None else bytes.fromhex(str(value))


def lending_from_json(item: dict[str, Any]) -> LendingConfig:
    """One deployment: `LendingConfig`'s fields, categories as display hex, bytecodes as hex;
    a missing field keeps its mainnet default."""
    unknown = set(item) - {*_LENDING_KEYS, "loan_lockings", "bar_locking", "pool_locking"}
    unknown -= {"patterns"}
    if unknown:
        raise ValueError(f"unknown lending fields {sorted(unknown)}")
    named = str(item.get("version", "v1"))
    version = next((v for v in VERSIONS if v == named), None)
    if version is None:
        raise ValueError(f"unknown lending version {named!r}; known: {VERSIONS}")
    base = LendingConfig()
    patterns = item.get("patterns", [])
    if not isinstance(patterns, list):
        raise ValueError("patterns is a list of hex strings")
    return LendingConfig(
        version=version,
        stablecoin=str(item.get("stablecoin", base.stablecoin)),
        price_oracle=str(item.get("price_oracle", base.price_oracle)),
        rate_oracle=str(item.get("rate_oracle", base.rate_oracle)),
        agent_minter=str(item.get("agent_minter", base.agent_minter)),
        loan_lockings=_hex_set(item.get("loan_lockings"), "loan_lockings"),
        bar_locking=_hex(item.get("bar_locking")),
        pool_locking=_hex(item.get("pool_locking")),
        patterns=tuple(bytes.fromhex(str(p)) for p in patterns),
    )


def load_lending(path: str | Path) -> tuple[LendingConfig, ...]:
    """A list of deployments (`lending_from_json`); replaces the mainnet v1 deployment."""
    obj = _read_json(path)
    if not isinstance(obj, list) or not all(isinstance(x, dict) for x in obj):
        raise ValueError(f"{path}: a list of deployment objects is expected")
    try:
        return tuple(lending_from_json(x) for x in obj)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_devnet_ledger(
    path: str | Path,
) -> tuple[tuple[FeedConfig, ...], tuple[LendingConfig, ...]]:
    """The devnet's feed and lending deployments, from a scenario ledger file."""
    obj = _read_json(path)
    try:
        ledger = Ledger.from_json(obj)
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not a devnet ledger: {exc}") from None
    return feed_configs(ledger), lending_configs(ledger)


def parse_source(text: str) -> OffchainSource:
    """`NAME=URL` or `NAME=PATH` (an argparse type): an off-chain registry list."""
    name, sep, location = text.partition("=")
    if not sep or not name or not location:
        raise ValueError(f"a registry source is NAME=URL or NAME=PATH, got {text!r}")
    if name == "onchain":
        raise ValueError("the source name 'onchain' is reserved for authchain registries")
    return OffchainSource(name, location)


def _source(text: str) -> OffchainSource:
    try:
        return parse_source(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_registry_arguments(parser: argparse.ArgumentParser) -> None:
    """The registry fetch job's options (shared with `ladle up`)."""
    g = parser.add_argument_group("token registries")
    g.add_argument(
        "--registry-source",
        action="append",
        type=_source,
        metavar="NAME=URL|PATH",
        help="an off-chain BCMR registry (an http(s) URL or a local file) merged into "
        "/registry/token/<c>/all as source NAME (repeatable)",
    )
    g.add_argument(
        "--ipfs-gateway",
        metavar="URL",
        help=f"gateway for ipfs:// registry URIs (default {DEFAULT_IPFS_GATEWAY}; "
        "ladle up: the devnet's)",
    )
    g.add_argument(
        "--no-registry-fetch", action="store_true", help="do not download token registries"
    )
