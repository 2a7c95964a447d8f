"""State invariants under random activity, through the Python API a scenario generator uses:
after any mix of payments, blocks and reorgs, a node's indexes equal those of a fresh node that
connects the same blocks, and its mempool only spends what exists."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bch.script import scripthash
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from devnet.chain import Chain
from devnet.clock import SimClock
from devnet.network import Network
from devnet.node import Node

WALLETS = [Wallet.from_seed(f"consistency {i}") for i in range(3)]

STOLEN: list[bytes] = []  # double spends that happened (the examples below make sure some do)
Op = tuple[str, int, int]
ops = st.lists(
    st.tuples(
        st.sampled_from(["pay", "pay", "mine", "reorg", "steal"]),
        st.integers(0, 2),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=12,
)


def check(node: Node) -> None:
    fresh = Chain(node.chain.blocks[0])
    for block in node.chain.blocks[1:]:
        fresh.connect(block)
    assert fresh.utxos == node.chain.utxos
    assert fresh.tx_index == node.chain.tx_index
    assert fresh.sh_history == node.chain.sh_history
    assert fresh.sh_utxos == node.chain.sh_utxos
    pool = node.mempool
    for txid, entry in pool.entries.items():
        assert txid not in node.chain.tx_index
        for inp in entry.tx.inputs:
            assert pool.spends[inp.outpoint] == txid
            assert inp.outpoint in node.chain.utxos or pool.output(inp.outpoint) is not None
    assert len(pool.spends) == sum(len(e.tx.inputs) for e in pool.entries.values())


def coins(node: Node, wallet: Wallet) -> list[tuple[OutPoint, TxOutput]]:
    return [(u.outpoint, u.output) for u in node.unspent(scripthash(wallet.locking_bytecode))]


async def run(script: list[Op]) -> None:
    net = Network(1, clock=SimClock())
    node = net.nodes[0]
    node.mine(101)
    for wallet in WALLETS:
        await net.faucet(node, wallet.locking_bytecode, 1_000_000)
    node.mine(1)
    owners = {w.locking_bytecode: w for w in [*WALLETS, net.miner]}
    for kind, who, n in script:
        wallet = WALLETS[who]
        to = WALLETS[(who + 1) % 3].locking_bytecode
        if kind == "pay":
            available = coins(node, wallet)
            if available:
                op, out = available[0]
                tx = wallet.sign_transaction(
                    Transaction.build([TxInput(op)], [TxOutput(out.value - 400 - n, to)]), [out]
                )
                await node.submit(tx)
        elif kind == "mine":
            node.mine(n)
        elif kind == "reorg":
            if node.chain.height - n > 101:
                node.reorg(n)
        else:  # a reorg whose new branch double-spends a transaction of the old tip
            in_tip = {t.txid for t in node.chain.tip.txs}
            victims = [t for t in node.chain.tip.txs[1:] if t.inputs[0].outpoint.txid not in in_tip]
            if victims:
                victim = victims[0]
                op = victim.inputs[0].outpoint
                found = node.find_tx(op.txid)
                assert found is not None
                out = found[0].outputs[op.index]
                thief = owners[out.locking].sign_transaction(
                    Transaction.build([TxInput(op)], [TxOutput(out.value - 900, to)]), [out]
                )
                node.reorg(1, [thief])
                STOLEN.append(victim.txid)
                assert thief.txid in node.chain.tx_index
                assert victim.txid not in node.chain.tx_index
                assert victim.txid not in node.mempool
        check(node)
    await net.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
@example([("pay", 0, 1), ("pay", 1, 1), ("mine", 0, 1), ("steal", 2, 1), ("reorg", 0, 2)])
@example([("pay", 0, 1), ("pay", 1, 2), ("mine", 0, 3), ("reorg", 0, 3), ("mine", 0, 1)])
def test_random_activity_keeps_indexes_consistent(script: list[Op]) -> None:
    asyncio.run(run(script))


def test_the_double_spend_path_ran() -> None:
    asyncio.run(run([("pay", 0, 1), ("mine", 0, 1), ("steal", 0, 1)]))
    assert STOLEN
