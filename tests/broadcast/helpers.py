"""Real signed transactions on a devnet, for the broadcast tests.

Coins come from the devnet faucet (the miner's mature coinbases), like a user's wallet would be
funded; every transaction is signed by `bch.wallet.Wallet`. The devnet is the test peer: the
broadcaster only ever reaches it over Electrum sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from broadcast.cli import start_server
from broadcast.config import BroadcastConfig, NodeConfig
from devnet.service import Devnet, DevnetConfig

ALICE = Wallet.from_seed("broadcast tests alice")
BOB = Wallet.from_seed("broadcast tests bob")


def devnet(nodes: int = 5, **overrides: Any) -> Devnet:
    options: dict[str, Any] = {"nodes": nodes, "tcp_base": 0, "ws_base": None, "verify": False}
    options.update(overrides)
    return Devnet(DevnetConfig(**options))


def node_url(net: Devnet, k: int) -> str:
    return f"tcp://127.0.0.1:{net.servers[k].tcp_port}"


def config_for(
    net: Devnet,
    db: Path | str = ":memory:",
    *,
    timeout: float = 2.0,
    weights: list[float] | None = None,
    **options: Any,
) -> BroadcastConfig:
    """The service pointed at every node of `net` (in node order), re-checks left to the test
    unless it asks for them."""
    weights = weights or [1.0] * len(net.servers)
    nodes = tuple(
        NodeConfig(node_url(net, k), weights[k], timeout) for k in range(len(net.servers))
    )
    options.setdefault("recheck_interval", 3600.0)
    options.setdefault("verify_scripts", False)
    options.setdefault("missing_inputs_retry", None)
    options.setdefault("reconnect_backoff", 0.02)
    return BroadcastConfig(nodes, db_path=str(db), **options)


@dataclass(frozen=True)
class Coin:
    outpoint: OutPoint
    output: TxOutput
    wallet: Wallet

    @property
    def value(self) -> int:
        return self.output.value


async def fund(net: Devnet, wallet: Wallet, amount: int, *, mine: bool = True) -> Coin:
    """A faucet payment of `amount` to `wallet` (output 0 of its transaction)."""
    txid = await net.network.faucet(net.nodes[0], wallet.locking_bytecode, amount)
    if mine:
        net.nodes[0].mine(1)
    return Coin(OutPoint.from_hex(txid, 0), TxOutput(amount, wallet.locking_bytecode), wallet)


def spend(
    coins: list[Coin], outputs: list[TxOutput], *, locktime: int = 0, sequence: int | None = None
) -> Transaction:
    inputs = [
        TxInput(c.outpoint) if sequence is None else TxInput(c.outpoint, sequence=sequence)
        for c in coins
    ]
    tx = Transaction.build(inputs, outputs, locktime=locktime)
    for wallet in {id(c.wallet): c.wallet for c in coins}.values():
        indices = [i for i, c in enumerate(coins) if c.wallet is wallet]
        tx = wallet.sign_transaction(tx, [c.output for c in coins], indices)
    return tx


def pay(coin: Coin, to: bytes | None = None, fee: int = 500) -> Transaction:
    """Spend one coin to `to` (default: back to its wallet), paying `fee`."""
    return spend([coin], [TxOutput(coin.value - fee, to or coin.wallet.locking_bytecode)])


def outputs_of(tx: Transaction, wallet: Wallet) -> list[Coin]:
    txid = tx.txid_hex
    return [
        Coin(OutPoint.from_hex(txid, i), out, wallet)
        for i, out in enumerate(tx.outputs)
        if out.locking == wallet.locking_bytecode
    ]


async def token_genesis(net: Devnet, wallet: Wallet) -> tuple[Coin, Coin, Coin]:
    """A new token category (confirmed): a fungible-only output (1000 units), an NFT-only
    output (immutable, commitment "art"), and plain change."""
    coin = await fund(net, wallet, 20_000)
    category = coin.outpoint.txid  # a genesis spends output 0 of the category's txid
    tx = spend(
        [coin],
        [
            TxOutput(1_000, wallet.locking_bytecode, TokenData(category, 1000)),
            TxOutput(
                1_000,
                wallet.locking_bytecode,
                TokenData(category, 0, NFT(Capability.NONE, b"art")),
            ),
            TxOutput(coin.value - 2_000 - 600, wallet.locking_bytecode),
        ],
    )
    await net.nodes[0].submit(tx)
    net.nodes[0].mine(1)
    ft, nft, change = outputs_of(tx, wallet)
    return ft, nft, change


@asynccontextmanager
async def served(net: Devnet, records: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The broadcast API on a real uvicorn server over `net`'s nodes, and a client for it."""
    running = await start_server(config_for(net, records), port=0)
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=10) as client:
            yield client
    finally:
        await running.stop()
