"""The scenario generator against the chain it produced.

The chain is read back only through the Electrum server's socket (`blockchain.block.get`,
`mempool.get`, `transaction.get`, `listunspent`), and every pool lineage, trade, oracle update
and token is recomputed here from the raw transactions with `protocols.cauldron.detect` and
plain byte arithmetic — never with the generator's own bookkeeping — then compared with the
ledger, which must describe the final chain (after its reorg) and the mempool separately.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bch.block import Block
from bch.hashes import hash160
from bch.keys import verify_schnorr
from bch.script import pushes
from bch.tx import OutPoint, Transaction, TxOutput
from devnet.scenario.coins import Draft
from devnet.scenario.generator import ScenarioGenerator, ScenarioResult
from devnet.scenario.params import PRESETS, ScenarioParams
from devnet.service import Devnet, DevnetConfig
from protocols.cauldron.contract import pool_locking_bytecode
from protocols.cauldron.detect import KnownOwners, detect, parse_summon, pool_spend_pkh
from protocols.ledger import Amounts, Ledger, PoolEvent
from tests.devnet.client import Client, ServerError
from tests.devnet.helpers import scripthash

SMALL = PRESETS["small"]


def devnet_config(**overrides: object) -> DevnetConfig:
    base: dict[str, object] = {"tcp_base": 0, "ws_base": None, "verify": False}
    base.update(overrides)
    return DevnetConfig(**base)  # type: ignore[arg-type]


async def generate(
    params: ScenarioParams = SMALL, **config: object
) -> tuple[Devnet, ScenarioResult]:
    net = Devnet(devnet_config(**config))
    await net.start()
    try:
        result = await ScenarioGenerator(net, params).run()
    except BaseException:
        await net.stop()
        raise
    return net, result


@pytest.fixture
async def scenario() -> AsyncIterator[tuple[Devnet, ScenarioResult, Client]]:
    net, result = await generate()
    server = net.servers[0]
    from tests.devnet.client import TcpClient

    client = await TcpClient.open(server.host, server.tcp_port)
    await client.call("server.version", "scenario-tests", ["1.4", "1.6"])
    yield net, result, client
    await client.close()
    await net.stop()


# --- reading the chain back ---------------------------------------------------------------------


@dataclass
class Seen:
    """What the chain says happened to one pool in one transaction."""

    txid: str
    height: int | None
    time: int | None
    kind: str
    input_index: int | None
    output_index: int | None
    before: tuple[int, int] | None
    after: tuple[int, int] | None
    touched: int = 0


@dataclass
class ChainView:
    txs: dict[str, tuple[Transaction, int | None, int | None]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # parents before children
    mempool: list[str] = field(default_factory=list)
    block_hashes: list[str] = field(default_factory=list)


def topological(txs: list[Transaction]) -> list[Transaction]:
    """Block order is by txid (CTOR): put every parent before its children."""
    by_id = {t.txid: t for t in txs}
    out: list[Transaction] = []
    done: set[bytes] = set()

    def visit(tx: Transaction) -> None:
        if tx.txid in done:
            return
        done.add(tx.txid)
        for inp in tx.inputs:
            parent = by_id.get(inp.outpoint.txid)
            if parent is not None:
                visit(parent)
        out.append(tx)

    for tx in txs:
        visit(tx)
    return out


async def read_chain(client: Client) -> ChainView:
    view = ChainView()
    tip = await client.call("blockchain.headers.get_tip")
    for height in range(tip["height"] + 1):
        block = Block.from_hex(await client.call("blockchain.block.get", height))
        view.block_hashes.append(block.hash_hex)
        txs = list(block.iter_transactions())[1:]
        for tx in topological(txs):
            view.txs[tx.txid_hex] = (tx, height, block.header.time)
            view.order.append(tx.txid_hex)
    pending = [
        Transaction.from_hex(await client.call("blockchain.transaction.get", txid))
        for txid in await client.call("mempool.get")
    ]
    for tx in topological(pending):
        view.txs[tx.txid_hex] = (tx, None, None)
        view.mempool.append(tx.txid_hex)
    return view


def state(out: TxOutput) -> tuple[int, int]:
    assert out.token is not None
    return out.value, out.token.amount


def kind_of(before: tuple[int, int], after: tuple[int, int]) -> str:
    ds, dt = after[0] - before[0], after[1] - before[1]
    if ds > 0 and dt < 0:
        return "buy"
    if ds < 0 and dt > 0:
        return "sell"
    assert ds >= 0 and dt >= 0 and (ds, dt) != (0, 0), (before, after)
    return "deposit"


def pool_history(view: ChainView) -> dict[str, list[Seen]]:
    """Every pool lineage, recomputed from the transactions: pass 1 learns every owner (from
    SUMMON markers and pool spends anywhere), pass 2 follows the outpoints."""
    owners = KnownOwners()
    for tx, _, _ in view.txs.values():
        for inp in tx.inputs:
            pkh = pool_spend_pkh(inp.unlocking)
            if pkh is not None:
                owners.add(pkh)
        for out in tx.outputs:
            pkh = parse_summon(out.locking)
            if pkh is not None:
                owners.add(pkh)
    live: dict[OutPoint, tuple[str, tuple[int, int]]] = {}
    history: dict[str, list[Seen]] = {}
    for txid in view.order + view.mempool:
        tx, height, when = view.txs[txid]
        act = detect(tx, owners)
        seen: list[tuple[str, Seen]] = []
        for spend in act.spends:
            pool_id, before = live.pop(tx.inputs[spend.input_index].outpoint)
            if spend.kind == "withdraw":
                seen.append(
                    (
                        pool_id,
                        Seen(txid, height, when, "withdraw", spend.input_index, None, before, None),
                    )
                )
                continue
            j = spend.continuation_index
            assert j == spend.input_index
            after = state(tx.outputs[j])
            live[OutPoint(tx.txid, j)] = (pool_id, after)
            seen.append(
                (pool_id, Seen(txid, height, when, kind_of(before, after), j, j, before, after))
            )
        for created in act.created:
            j = created.output_index
            pool_id = f"{txid}:{j}"
            after = state(tx.outputs[j])
            live[OutPoint(tx.txid, j)] = (pool_id, after)
            seen.append((pool_id, Seen(txid, height, when, "create", None, j, None, after)))
        for pool_id, s in seen:
            s.touched = len(seen)
            history.setdefault(pool_id, []).append(s)
    return history


def as_pair(a: Amounts | None) -> tuple[int, int] | None:
    return None if a is None else (a.sats, a.tokens)


# --- the tests ----------------------------------------------------------------------------------


FINGERPRINT = """
import asyncio, hashlib, sys
from devnet.scenario.generator import ScenarioGenerator
from devnet.scenario.params import PRESETS
from devnet.service import Devnet, DevnetConfig

async def main():
    net = Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False))
    await net.start()
    result = await ScenarioGenerator(net, PRESETS["small"].replace(seed=int(sys.argv[1]))).run()
    blocks = b"".join(b.hash for b in net.nodes[0].chain.blocks)
    print(hashlib.sha256(blocks).hexdigest(), hashlib.sha256(result.ledger.dumps()).hexdigest())
    await net.stop()

asyncio.run(main())
"""


async def fingerprint(seed: int, hash_seed: str) -> tuple[str, str]:
    """Block hashes and ledger of a run in a fresh process (its own PYTHONHASHSEED, so nothing
    may depend on set or dict-of-bytes iteration order)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FINGERPRINT,
        str(seed),
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    blocks, ledger = out.decode().split()
    return blocks, ledger


async def test_same_seed_same_chain_and_ledger_other_seed_differs() -> None:
    net, result = await generate(SMALL)
    here = (
        hashlib.sha256(b"".join(b.hash for b in net.nodes[0].chain.blocks)).hexdigest(),
        hashlib.sha256(result.ledger.dumps()).hexdigest(),
    )
    await net.stop()
    runs = await asyncio.gather(fingerprint(1, "1"), fingerprint(1, "2"), fingerprint(2, "1"))
    assert runs[0] == runs[1] == here
    assert runs[2][0] != here[0] and runs[2][1] != here[1]


async def test_ledger_round_trips_through_json(
    scenario: tuple[Devnet, ScenarioResult, Client],
) -> None:
    _, result, _ = scenario
    ledger = result.ledger
    again = Ledger.loads(ledger.dumps())
    assert again == ledger
    assert again.dumps() == ledger.dumps()


async def test_pool_lineages_equal_the_chain(
    scenario: tuple[Devnet, ScenarioResult, Client],
) -> None:
    _, result, client = scenario
    ledger = result.ledger
    view = await read_chain(client)
    history = pool_history(view)

    def ledger_side(events: list[PoolEvent]) -> dict[str, list[Seen]]:
        out: dict[str, list[Seen]] = {}
        for e in events:
            seen = Seen(
                e.txid,
                e.height,
                e.time,
                e.kind,
                e.input_index,
                e.output_index,
                as_pair(e.before),
                as_pair(e.after),
                e.pools_touched,
            )
            out.setdefault(e.pool_id, []).append(seen)
        return out

    expected = ledger_side([*ledger.events, *ledger.mempool.events])
    assert history == expected
    # Each pool's entry: where it was created, and its state on the final chain.
    assert set(history) == {p.pool_id for p in ledger.pools}
    for pool in ledger.pools:
        first = history[pool.pool_id][0]
        assert first.kind == "create"
        assert (pool.created_txid, pool.created_height, pool.created_time) == (
            first.txid,
            first.height,
            first.time,
        )
        assert as_pair(pool.initial) == first.after
        last = [s for s in history[pool.pool_id] if s.height is not None][-1]
        if last.kind == "withdraw":
            assert (pool.status, pool.utxo, pool.withdrawn_txid) == ("withdrawn", None, last.txid)
        else:
            assert pool.status == "active"
            assert pool.utxo == f"{last.txid}:{last.output_index}"
            assert as_pair(pool.state) == last.after
    # The confirmed part is exactly what is in blocks; the mempool part what the node holds.
    confirmed = {e.txid for e in ledger.events}
    assert all(view.txs[t][1] is not None for t in confirmed)
    assert {e.txid for e in ledger.mempool.events} <= set(view.mempool)
    assert {t.txid for t in ledger.mempool.transactions} == set(view.mempool)
    assert ledger.mempool.trades, "the scenario leaves trades in the mempool"
    # LP fee: 0.3 % of the pool's BCH change, rounded down (cauldron.md), on every trade-path event.
    for e in ledger.events:
        if e.before is not None and e.after is not None:
            assert e.lp_fee == abs(e.after.sats - e.before.sats) * 3 // 1000
    # Every kind and creation route a real deployment shows is present.
    kinds = {e.kind for e in ledger.events}
    assert kinds == {"create", "buy", "sell", "deposit", "withdraw"}
    assert {p.created_via for p in ledger.pools} == {"summon", "no_marker", "withdraw_recreate"}
    assert any(not p.visible_at_creation for p in ledger.pools)
    assert any(p.visible_at_creation and p.created_via == "no_marker" for p in ledger.pools)
    # Withdrawals were signed by the owner (the node accepted them): their unlocking carries
    # a signature and a key in front of the redeem script.
    for e in ledger.events:
        if e.kind == "withdraw":
            tx = view.txs[e.txid][0]
            assert len(tx.inputs[e.input_index or 0].unlocking) > 69


async def test_pool_entries_match_the_utxo_set(
    scenario: tuple[Devnet, ScenarioResult, Client],
) -> None:
    _, result, client = scenario
    ledger = result.ledger
    busiest = max(ledger.tokens, key=lambda t: sum(p.category == t.category for p in ledger.pools))
    per_owner: dict[tuple[str, str], int] = {}
    for p in ledger.pools:
        key = (p.owner_pkh, p.category)
        per_owner[key] = per_owner.get(key, 0) + 1
    assert max(per_owner.values()) >= 2, "owners with several pools of one token"
    assert sum(p.category == busiest.category for p in ledger.pools) >= SMALL.pools
    unspent: dict[str, dict[str, Any]] = {}
    for owner in {p.owner_pkh for p in ledger.pools}:
        sh = scripthash(pool_locking_bytecode(bytes.fromhex(owner)))
        for u in await client.call("blockchain.scripthash.listunspent", sh):
            unspent[f"{u['tx_hash']}:{u['tx_pos']}"] = u
    live = {p.live_utxo: p for p in ledger.pools if p.live_utxo is not None}
    pools_found = {op: u for op, u in unspent.items() if "token_data" in u}
    assert set(pools_found) == set(live)
    for op, u in pools_found.items():
        pool = live[op]
        assert pool.live_state is not None
        assert u["value"] == pool.live_state.sats
        assert u["token_data"]["amount"] == str(pool.live_state.tokens)
        assert u["token_data"]["category"] == pool.category
    # Decoys: BCH-only outputs at a pool address, not pools.
    decoys = {op for op, u in unspent.items() if "token_data" not in u}
    assert decoys == {d.outpoint for d in ledger.decoys}
    for p in ledger.pools:
        if p.status == "withdrawn":
            assert p.utxo is None and p.withdrawn_txid is not None


async def test_trades_match_the_chain(scenario: tuple[Devnet, ScenarioResult, Client]) -> None:
    _, result, client = scenario
    ledger = result.ledger
    view = await read_chain(client)
    history = pool_history(view)
    by_tx: dict[str, list[Seen]] = {}
    for events in history.values():
        for s in events:
            by_tx.setdefault(s.txid, []).append(s)
    # One row per (transaction, token): a token-to-token swap is a sell and a buy.
    recomputed: dict[tuple[str, str], tuple[object, ...]] = {}
    for txid, events in by_tx.items():
        moves = [s for s in events if s.kind in ("buy", "sell")]
        if not moves:
            continue
        tx, height, when = view.txs[txid]
        pool_inputs = {s.input_index for s in moves}
        funders = tuple(
            sorted(
                {
                    hash160(pushes(inp.unlocking)[-1]).hex()
                    for i, inp in enumerate(tx.inputs)
                    if i not in pool_inputs
                }
            )
        )
        by_token: dict[str, list[tuple[int, int]]] = {}
        for s in moves:
            token = tx.outputs[s.output_index or 0].token
            assert token is not None and s.before and s.after
            delta = (s.after[0] - s.before[0], s.after[1] - s.before[1])
            by_token.setdefault(token.category_hex, []).append(delta)
        for category, deltas in by_token.items():
            sats = sum(d[0] for d in deltas)
            recomputed[txid, category] = (
                height,
                when,
                "buy" if sats > 0 else "sell",
                sats,
                sum(d[1] for d in deltas),
                sum(abs(d[0]) for d in deltas),
                len(deltas),
                len(events),
                funders,
            )
    trades = [*ledger.trades, *ledger.mempool.trades]
    assert {(t.txid, t.category) for t in trades} == recomputed.keys()
    assert len(trades) == len(recomputed)
    for t in trades:
        assert recomputed[t.txid, t.category] == (
            t.height,
            t.time,
            t.direction,
            t.sats,
            t.tokens,
            t.volume_sats,
            t.pools,
            t.pools_touched,
            t.funding_pkhs,
        )
    swaps = {t.txid for t in trades if sum(u.txid == t.txid for u in trades) == 2}
    assert swaps, "token-to-token swaps"
    assert max(t.pools for t in trades) > 1, "trades through several pools"
    assert {t.direction for t in trades} == {"buy", "sell"}


async def test_tokens_oracle_and_reorg_match_the_chain(
    scenario: tuple[Devnet, ScenarioResult, Client],
) -> None:
    net, result, client = scenario
    ledger = result.ledger
    view = await read_chain(client)
    # Tokens: category = the txid of the outpoint that the genesis spends at input 0, index 0.
    for token in ledger.tokens:
        tx, height, _ = view.txs[token.genesis_txid]
        assert height is not None
        assert tx.inputs[0].outpoint.txid_hex == token.category
        assert tx.inputs[0].outpoint.index == 0
        supply = [
            o.token.amount for o in tx.outputs if o.token and o.token.category_hex == token.category
        ]
        assert supply == [token.supply]
    assert len({t.category for t in ledger.tokens}) == len(ledger.tokens)
    # The oracle: a mutable NFT re-created by every update, commitment in the Delphi layout.
    updates = []
    messages = []
    for txid in view.order + view.mempool:
        tx, height, when = view.txs[txid]
        for out in tx.outputs:
            tok = out.token
            if tok is not None and tok.category_hex == ledger.oracle.category:
                assert tok.nft is not None and tok.nft.capability.label == "mutable"
                c = tok.nft.commitment
                assert len(c) == 16
                ts = int.from_bytes(c[:6], "little")
                fee, seq, price = struct.unpack("<HII", c[6:])
                updates.append((txid, height, when, ts, fee, seq, price))
            if out.locking.startswith(b"\x6a\x04GPPM"):
                _, msg, sig, key = pushes(out.locking[1:])
                assert key.hex() == ledger.oracle.pubkey
                assert verify_schnorr(key, hashlib.sha256(msg).digest(), sig)
                messages.append((txid, height, *struct.unpack("<iiii", msg)))
    assert updates == [
        (u.txid, u.height, u.time, u.timestamp, u.use_fee, u.sequence, u.price)
        for u in [*ledger.oracle_updates, *ledger.mempool.oracle_updates]
    ]
    assert [u[5] for u in updates] == list(range(1, len(updates) + 1))
    assert messages == [
        (m.txid, m.height, m.timestamp, m.message_sequence, m.data_sequence, m.price)
        for m in [*ledger.messages, *ledger.mempool.messages]
    ]
    assert messages[0][4] == -6  # the attestation-scaling metadata message comes first
    # The reorg: its blocks are gone, and the ledger's heights are the final chain's.
    assert ledger.reorgs
    for reorg in ledger.reorgs:
        for block_hash in reorg.orphaned:
            assert block_hash not in view.block_hashes
            with pytest.raises(ServerError):
                await client.call("blockchain.block.get", block_hash)
    for entry in ledger.transactions:
        assert view.txs[entry.txid][1] == entry.height
    assert ledger.chain.tip_hash == view.block_hashes[-1]
    assert ledger.chain.tip_height == len(view.block_hashes) - 1
    assert net.nodes[0].chain.tip.hash_hex == ledger.chain.tip_hash


async def test_several_nodes_end_on_the_same_chain_and_mempool() -> None:
    net, result = await generate(SMALL.replace(days=1, reorgs=1), nodes=3, delay=0.2)
    try:
        tips = {n.chain.tip.hash_hex for n in net.nodes}
        assert tips == {result.ledger.chain.tip_hash}
        pools = [set(n.mempool.entries) for n in net.nodes]
        assert pools[0] == pools[1] == pools[2] and pools[0]
        assert net.network.delay == 0.2  # restored after the deterministic generation
    finally:
        await net.stop()


class Tipper:
    """An extension (the shape the lending issue will use): pays a tip every 10th slot."""

    name = "tipper"

    def __init__(self) -> None:
        self.setups = 0
        self.slots: list[int] = []
        self.txids: list[str] = []

    async def setup(self, generator: ScenarioGenerator) -> None:
        assert generator.tokens and generator.oracle_utxo is not None
        self.setups += 1

    async def on_slot(self, generator: ScenarioGenerator, slot: int) -> None:
        self.slots.append(slot)
        if slot % 10 == 0:
            payer, payee = generator.traders[0], generator.traders[1]
            draft = Draft()
            draft.pay(TxOutput(12_345, payee.locking))
            tx = draft.complete(payer)
            await generator.submit(tx, "payment")
            self.txids.append(tx.txid_hex)

    def ledger_json(self, generator: ScenarioGenerator) -> object:
        return {"tips": self.txids}


async def test_extensions_run_every_slot_and_add_to_the_ledger() -> None:
    tipper = Tipper()
    params = SMALL.replace(days=1)
    net = Devnet(devnet_config())
    await net.start()
    try:
        result = await ScenarioGenerator(net, params, extensions=[tipper]).run()
    finally:
        await net.stop()
    assert tipper.setups == 1
    assert tipper.slots == list(range(params.blocks_per_day))
    assert result.ledger.extensions == {"tipper": {"tips": tipper.txids}}
    confirmed = {t.txid: t for t in result.ledger.transactions}
    assert all(confirmed[txid].kind == "payment" for txid in tipper.txids)
