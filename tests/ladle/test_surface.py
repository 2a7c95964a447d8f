"""The public surface, pinned: each package's `__all__` and the `ladle` command tree.

A change to either is a change of the API that integrators and scripts see, so it must show up
in review as a change to this file, not slip in with a refactoring. Each package also ships
`py.typed`, so that the annotations reach those who import it.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from pathlib import Path

from ladle.cli import build_parser

ROOTS = (
    "bch",
    "protocols",
    "runtime",
    "verify",
    "indexer",
    "router",
    "rest",
    "broadcast",
    "devnet",
    "ladle",
)

SURFACES: dict[str, list[str] | None] = {
    "bch": [],
    "protocols": [],
    "protocols.cauldron": [
        "CauldronActivity",
        "KnownOwners",
        "PoolCreation",
        "PoolSpend",
        "PoolState",
        "REDEEM_PREFIX",
        "REDEEM_SUFFIX",
        "buy_tokens_exact_in",
        "buy_tokens_exact_out",
        "classify_change",
        "detect",
        "electrum_scripthash",
        "is_pool_utxo",
        "is_trade_path",
        "is_valid_pool_transition",
        "lp_fee",
        "marginal_price",
        "owner_address",
        "parse_summon",
        "pool_address",
        "pool_locking_bytecode",
        "pool_spend_pkh",
        "pool_transition",
        "redeem_script",
        "sell_tokens_exact_in",
        "sell_tokens_exact_out",
        "trade_unlocking",
    ],
    "protocols.lending": [
        "ACTION_KINDS",
        "ActionKind",
        "LendingConfig",
        "Loan",
        "LoanAction",
        "StateOutput",
        "VERSIONS",
        "Version",
        "allowance_outputs",
        "classify",
        "devnet_config",
        "loan_outputs",
        "owner_hashes_present",
        "state_outputs",
    ],
    "runtime": [
        "Closing",
        "Component",
        "DevnetView",
        "EXIT_FAILURE",
        "EXIT_USAGE",
        "Service",
        "StartFn",
        "Started",
        "UpContext",
        "UsageError",
    ],
    "verify": [
        "AsyncLibauthVerifier",
        "LibauthVerifier",
        "SCRIPT",
        "VMS",
        "VerifierUnavailable",
        "VerifyResult",
    ],
    "indexer": [],
    "indexer.decoders": [
        "AnyDecoder",
        "BlockContext",
        "BlockTx",
        "Decoder",
        "DecoderDeps",
        "DecoderFactory",
        "create_decoders",
        "matches",
        "register_decoder",
        "registered_decoders",
    ],
    "indexer.decoders.cauldron": [
        "CauldronDecoder",
        "EVENT_KINDS",
        "EventKind",
        "PoolUtxo",
        "PoolVia",
        "format_pool_id",
        "parse_pool_id",
        "to_live",
    ],
    "indexer.decoders.lending": [
        "LendingContext",
        "LendingDecoder",
        "decode_lending_tx",
        "median_time_past",
    ],
    "indexer.decoders.oracle": ["FeedUpdate", "OracleDecoder", "SignedMessage", "decode_oracle_tx"],
    "indexer.decoders.registry": [
        "Link",
        "PublicationRow",
        "RegistryContext",
        "RegistryDecoder",
        "decode_registry_tx",
    ],
    "indexer.electrum": [
        "Backoff",
        "BlockChanged",
        "Capabilities",
        "ElectrumClient",
        "ElectrumClientError",
        "ElectrumConnection",
        "ElectrumConnectionError",
        "ElectrumError",
        "ElectrumPool",
        "ElectrumProtocolError",
        "ElectrumTimeout",
        "GenesisCoinbase",
        "HeaderNotice",
        "NotSupported",
        "ServerAddress",
        "ServerBusy",
        "ServerHealth",
        "UnknownTransaction",
        "Unspent",
        "UnsupportedMethod",
        "UtxoInfo",
        "scripthash",
        "ssl_context",
    ],
    "indexer.follow": [
        "BlockPipeline",
        "CASHTOKENS_HEIGHT",
        "CatchUp",
        "ChainFollower",
        "DEFAULT_MEMPOOL_INTERVAL",
        "FetchedBlock",
        "Follower",
        "MAINNET_GENESIS",
        "MempoolFollower",
        "Progress",
        "configure_logging",
        "default_start_height",
        "fetch_block",
        "fields",
        "link_headers",
        "pool_scripthashes",
    ],
    "indexer.store": [
        "AppliedBlock",
        "CORE_MIGRATIONS",
        "ChainError",
        "ChainTip",
        "Migration",
        "Store",
        "migrate",
        "open_reader",
        "open_writer",
    ],
    "router": [
        "BCH",
        "BuildRequest",
        "BuildResult",
        "Direction",
        "ErrorCode",
        "Hop",
        "Leg",
        "Pool",
        "PoolBook",
        "Quote",
        "QuoteRequest",
        "RouteKind",
        "RouterConfig",
        "RouterError",
        "Side",
        "build",
        "load_pools",
        "parse_build_params",
        "parse_pools",
        "parse_quote_params",
        "quote",
        "solve_hop",
    ],
    "router.solve": [],
    "rest": [],
    "rest.explorer": ["ExplorerEnv", "explorer_routes"],
    "rest.routes": [],
    "broadcast": [],
    "devnet": [],
    "devnet.electrum": [],
    "devnet.realnode": [],
    "devnet.scenario": [
        "Ledger",
        "PRESETS",
        "ScenarioError",
        "ScenarioExtension",
        "ScenarioGenerator",
        "ScenarioParams",
        "ScenarioResult",
    ],
    "ladle": ["__version__"],
}

COMMANDS: dict[str, list[str]] = {
    "ladle": ["-h/--help"],
    "ladle tx": ["-h/--help"],
    "ladle tx decode": ["-h/--help", "hex", "--prefix", "--config"],
    "ladle pool": ["-h/--help"],
    "ladle pool address": ["-h/--help", "pkh", "--prefix", "--config"],
    "ladle devnet": [
        "-h/--help",
        "--nodes",
        "--ports",
        "--host",
        "--no-verify",
        "--no-rostrum",
        "--bitcoind",
        "--fulcrum",
        "--delay",
        "--mine-every",
        "--preset",
        "--no-scenario",
        "--no-lending",
        "--seed",
        "--days",
        "--block-interval",
        "--pools",
        "--tokens",
        "--trades-per-day",
        "--payments-per-day",
        "--start-time",
        "--verify-scenario",
        "--ledger",
        "--config",
    ],
    "ladle up": [
        "-h/--help",
        "--nodes",
        "--ports",
        "--host",
        "--no-verify",
        "--no-rostrum",
        "--bitcoind",
        "--fulcrum",
        "--delay",
        "--mine-every",
        "--preset",
        "--no-scenario",
        "--no-lending",
        "--seed",
        "--days",
        "--block-interval",
        "--pools",
        "--tokens",
        "--trades-per-day",
        "--payments-per-day",
        "--start-time",
        "--verify-scenario",
        "--ledger",
        "--router-port",
        "--rest-port",
        "--registry-source",
        "--ipfs-gateway",
        "--no-registry-fetch",
        "--broadcast-port",
        "--broadcast-db",
        "--config",
    ],
    "ladle index": [
        "-h/--help",
        "--electrum",
        "--db",
        "--start-height",
        "--insecure-tls",
        "--window",
        "--bulk-distance",
        "--no-mempool",
        "--mempool-interval",
        "--exit-at-tip",
        "--no-progress",
        "--log-format",
        "--log-level",
        "--feeds",
        "--lending",
        "--devnet-ledger",
        "--registry-source",
        "--ipfs-gateway",
        "--no-registry-fetch",
        "--config",
    ],
    "ladle rest": [
        "-h/--help",
        "--db",
        "--host",
        "--port",
        "--rate-limit",
        "--trust-forwarded",
        "--cors-origin",
        "--stale-after",
        "--usd-feed",
        "--prefix",
        "--router-url",
        "--broadcast-url",
        "--electrum-ws",
        "--network-label",
        "--config",
    ],
    "ladle route": [
        "-h/--help",
        "--pools",
        "--fee-bps",
        "--fee-address",
        "--sell",
        "--buy",
        "--amount",
        "--side",
        "--fee-per-byte",
        "--config",
    ],
    "ladle build": [
        "-h/--help",
        "--pools",
        "--fee-bps",
        "--fee-address",
        "--request",
        "--fee-per-byte",
        "--config",
    ],
    "ladle router": [
        "-h/--help",
        "--host",
        "--port",
        "--fee-bps",
        "--fee-address",
        "--fee-per-byte",
        "--max-connections",
        "--rate",
        "--max-lag-blocks",
        "--max-lag-seconds",
        "--electrum",
        "--db",
        "--start-height",
        "--insecure-tls",
        "--window",
        "--bulk-distance",
        "--no-mempool",
        "--mempool-interval",
        "--exit-at-tip",
        "--no-progress",
        "--log-format",
        "--log-level",
        "--feeds",
        "--lending",
        "--devnet-ledger",
        "--registry-source",
        "--ipfs-gateway",
        "--no-registry-fetch",
        "--config",
    ],
    "ladle broadcast": [
        "-h/--help",
        "--host",
        "--port",
        "--node",
        "--settings",
        "--db",
        "--timeout",
        "--record-ttl",
        "--recheck-interval",
        "--no-verify",
        "--config",
    ],
}


def command_tree(parser: argparse.ArgumentParser, prefix: str = "ladle") -> dict[str, list[str]]:
    """Each command (by its path) → its arguments: option strings, positionals by name."""
    tree: dict[str, list[str]] = {}
    arguments: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                tree |= command_tree(sub, f"{prefix} {name}")
        elif action.option_strings:
            arguments.append("/".join(action.option_strings))
        else:
            arguments.append(action.dest)
    return {prefix: arguments, **tree}


def package_surfaces() -> dict[str, list[str] | None]:
    """Each package of ladle (top level and nested) → its sorted `__all__` (None: none)."""
    surfaces: dict[str, list[str] | None] = {}
    for root in ROOTS:
        top = importlib.import_module(root)
        names = [root] + [
            i.name for i in pkgutil.walk_packages(top.__path__, f"{root}.") if i.ispkg
        ]
        for name in sorted(names):
            exported = getattr(importlib.import_module(name), "__all__", None)
            surfaces[name] = None if exported is None else sorted(exported)
    return surfaces


def test_every_package_exports_what_is_pinned() -> None:
    assert package_surfaces() == SURFACES


def test_every_exported_name_exists() -> None:
    for name, exported in SURFACES.items():
        module = importlib.import_module(name)
        assert all(hasattr(module, x) for x in exported or ()), name


def test_every_top_level_package_ships_py_typed() -> None:
    for root in ROOTS:
        (path,) = importlib.import_module(root).__path__
        assert (Path(path) / "py.typed").is_file(), root


def test_the_command_tree_is_pinned() -> None:
    assert command_tree(build_parser()) == COMMANDS
