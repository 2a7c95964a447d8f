"""The `ladle` command line.

The tools (`tx`, `pool`, …) print JSON on stdout; the services (`devnet`, `up`) print their
endpoints for people and then one `LADLE_READY {json}` line for scripts. Bad input is one line
on stderr and exit status 2, so scripts can tell a usage error (2) from a runtime failure (1).
Every command also reads its options from `--config FILE` and the environment
(`runtime.config`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson

import broadcast.cli
import indexer.cli
import rest.cli
import router.cli
from bch.encoding import DecodeError
from bch.script import electrum_scripthash
from bch.tx import Transaction
from devnet.cli import add_devnet_options
from ladle.txjson import transaction_json
from ladle.up import add_arguments as add_up_arguments
from ladle.up import cmd_devnet, cmd_up
from protocols.cauldron import contract
from runtime.config import add_config_option, apply_config
from runtime.usage import EXIT_USAGE, UsageError


def _print_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def _read_hex_argument(value: str) -> str:
    text = sys.stdin.read() if value == "-" else value
    return "".join(text.split())


def cmd_tx_decode(args: argparse.Namespace) -> int:
    text = _read_hex_argument(args.hex)
    if not text:
        raise UsageError("no transaction hex given")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise UsageError("transaction is not valid hex") from None
    try:
        tx = Transaction.from_bytes(raw)
    except DecodeError as exc:
        raise UsageError(f"malformed transaction: {exc}") from None
    _print_json(transaction_json(tx, prefix=args.prefix))
    return 0


def cmd_pool_address(args: argparse.Namespace) -> int:
    try:
        pkh = bytes.fromhex(args.pkh)
    except ValueError:
        raise UsageError("pkh is not valid hex") from None
    if len(pkh) != 20:
        raise UsageError(f"pkh must be 20 bytes (40 hex characters), got {len(pkh)} bytes")
    locking = contract.pool_locking_bytecode(pkh)
    _print_json(
        {
            "owner_pkh": pkh.hex(),
            "redeem_script": contract.redeem_script(pkh).hex(),
            "locking_bytecode": locking.hex(),
            "scripthash": electrum_scripthash(locking),
            "pool_address": contract.pool_address(pkh, prefix=args.prefix),
            "owner_p2pkh_addr": contract.owner_address(pkh, prefix=args.prefix),
        }
    )
    return 0


def _prefix_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prefix",
        default="bitcoincash",
        choices=("bitcoincash", "bchtest", "bchreg"),
        help="CashAddr prefix for addresses (default: bitcoincash)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ladle", description=__doc__.splitlines()[0] if __doc__ else None
    )
    sub = parser.add_subparsers(dest="command", required=True)

    tx = sub.add_parser("tx", help="transaction tools")
    tx_sub = tx.add_subparsers(dest="tx_command", required=True)
    decode = tx_sub.add_parser("decode", help="decode a raw transaction to JSON")
    decode.add_argument("hex", help="raw transaction hex, or - to read it from stdin")
    _prefix_option(decode)
    decode.set_defaults(func=cmd_tx_decode)

    pool = sub.add_parser("pool", help="Cauldron pool tools")
    pool_sub = pool.add_subparsers(dest="pool_command", required=True)
    address = pool_sub.add_parser("address", help="the pool contract of an owner pkh")
    address.add_argument("pkh", help="owner public key hash, 40 hex characters")
    _prefix_option(address)
    address.set_defaults(func=cmd_pool_address)

    devnet = sub.add_parser(
        "devnet",
        help="run a local Bitcoin Cash network with a Cauldron history",
        description="Run a local network speaking the Electrum Cash protocol, generate a "
        "deterministic Cauldron history, print its endpoints and test wallets, then serve "
        "until SIGINT/SIGTERM. Prints the same LADLE_READY line as `ladle up`.",
    )
    add_devnet_options(devnet)
    devnet.set_defaults(func=cmd_devnet)
    up = sub.add_parser(
        "up",
        help="start the devnet and every service",
        description="Start the devnet (with a generated history) and every ladle component, "
        "print their URLs and one LADLE_READY line, serve until SIGINT/SIGTERM.",
    )
    add_up_arguments(up)
    up.set_defaults(func=cmd_up)
    _add_component_commands(sub)
    add_config_option(parser)
    return parser


# The service components, in `ladle --help` order; each module exposes `add_commands(subparsers)`.
COMMAND_MODULES = (indexer.cli, rest.cli, router.cli, broadcast.cli)


def _add_component_commands(sub: Any) -> None:
    for module in COMMAND_MODULES:
        module.add_commands(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        apply_config(parser, arguments, os.environ)
    except UsageError as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(arguments)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except UsageError as exc:
        print(f"ladle: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
