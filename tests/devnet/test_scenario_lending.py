"""The lending extension's chain, read back from the raw blocks with plain byte arithmetic (not
with the decoders): every recorded action is a confirmed transaction whose outputs carry the
recorded loan commitments, states and allowances; libauth accepts every transaction; and the
extension is deterministic."""

from __future__ import annotations

import itertools
import struct
from typing import Any

import pytest

from bch.block import Block
from bch.tx import Transaction
from devnet.scenario.generator import ScenarioGenerator
from devnet.scenario.lending import LendingExtension
from devnet.service import Devnet
from tests.devnet.test_scenario import SMALL, devnet_config
from tests.indexer.test_decoder_lending import LendingChain, lending_chain

LIFECYCLE = {"borrow", "add_collateral", "refinance", "delegate", "repay", "redeem"}
LIFECYCLE |= {"liquidation", "accrue", "state", "allowance", "claim", "rate"}


def transactions(blocks: list[bytes]) -> dict[str, tuple[int, Transaction]]:
    out = {}
    for height, raw in enumerate(blocks):
        block = Block.from_bytes(raw)
        for i in range(len(block.txids)):
            tx = block.transaction(i)
            out[tx.txid_hex] = (height, tx)
    return out


def loan_fields(version: str, commitment: bytes) -> dict[str, Any]:
    if version == "v1":
        assert len(commitment) == 40
        dollars, bp, ts = struct.unpack("<HHI", commitment[32:])
        return {"borrower_hash": commitment[:32].hex(), "principal": dollars * 100,
                "rate_bp": bp, "loan_ts": ts, "delegate_hash": None}  # fmt: skip
    assert len(commitment) == 76
    delegate = commitment[32:64]
    bp, ts = struct.unpack("<HI", commitment[70:])
    return {
        "borrower_hash": commitment[:32].hex(),
        "principal": int.from_bytes(commitment[64:70], "little"),
        "rate_bp": bp,
        "loan_ts": ts,
        "delegate_hash": None if delegate == bytes(32) else delegate.hex(),
    }


def test_records_are_on_chain_with_their_layouts() -> None:
    chain = lending_chain()
    part = chain.part
    txs = transactions(chain.blocks)
    records = part["records"]
    assert {e["kind"] for e in records} == LIFECYCLE
    stable = bytes.fromhex(part["stablecoin"])[::-1]
    for e in records:
        height, tx = txs[e["txid"]]
        assert e["height"] == height
        if "loan" in e and e["kind"] not in ("repay", "redeem", "liquidation"):
            out = tx.outputs[e["vout"]]
            assert out.token is not None and out.token.nft is not None
            assert out.token.category == stable and out.token.nft.capability == 0
            assert out.value == e["collateral"]
            fields = loan_fields(e["version"], out.token.nft.commitment)
            assert {k: e[k] for k in fields} == fields
            lock = part["configs"][0 if e["version"] == "v1" else 1]["loan_locking"]
            assert out.locking.hex() in lock
        if e["kind"] == "state":
            out = tx.outputs[e["vout"]]
            assert out.token is not None and out.token.nft is not None
            c = out.token.nft.commitment
            if e["state"] == "bar":
                assert c == b"B" + struct.pack("<QQ", e["staked"], e["shares"])
            else:
                assert c == b"P" + struct.pack("<QQQ", e["staked"], e["shares"], e["bch_pot"])
                assert out.value == 1_000 + e["bch_pot"]
            assert out.token.amount == e["staked"]
        if e["kind"] == "allowance":
            assert tx.outputs[e["vout"]].value == e["sats"]
        if e["kind"] == "rate":  # the interest-rate oracle: ts u48 ‖ use_fee u16 ‖ bp u16
            out = tx.outputs[e["vout"]]
            assert out.token is not None and out.token.nft is not None
            assert out.token.category == bytes.fromhex(part["rate_oracle"])[::-1]
            assert out.token.nft.capability == 1  # mutable: each update re-creates it
            assert out.token.nft.commitment == e["timestamp"].to_bytes(6, "little") + struct.pack(
                "<HH", e["use_fee"], e["bp"]
            )
            assert e["timestamp"] <= e["time"]  # built before its block was mined
        if e["kind"] == "claim":
            spent_txid, vout = e["spent"].split(":")
            assert any(
                i.outpoint.txid_hex == spent_txid and i.outpoint.index == int(vout)
                for i in tx.inputs
            )
        if e["kind"] in ("repay", "redeem", "liquidation"):  # the loan is spent, not re-created
            assert all(
                o.token is None or o.token.nft is None or o.token.nft.commitment[:32].hex()
                != e["borrower_hash"] for o in tx.outputs
            )  # fmt: skip
    # Loans of both versions; the v11 pool's BCH pot grew in the liquidation.
    assert {e["version"] for e in records if e["kind"] == "borrow"} == {"v1", "v11"}
    pots = [e["bch_pot"] for e in records if e["kind"] == "state" and e["state"] == "pool"]
    assert pots[0] == 0 and pots[-1] > 0
    # The rate oracle is its own feed; each update spends the previous one (one chain).
    assert part["rate_oracle"] not in (part["price_oracle"], part["stablecoin"])
    rates = [e for e in records if e["kind"] == "rate"]
    assert [e["bp"] for e in rates] == [100, 360, 200]
    for prev, e in itertools.pairwise(rates):
        spent = {(i.outpoint.txid_hex, i.outpoint.index) for i in txs[e["txid"]][1].inputs}
        assert (prev["txid"], prev["vout"]) in spent
    # The redeemed loans' rates were at most the oracle's value when they were redeemed.
    redeems = [e for e in records if e["kind"] == "redeem"]
    for redeem in redeems:
        before = (redeem["height"], redeem["seq"])
        standing = [e for e in rates if (e["height"], e["seq"]) < before]
        assert redeem["rate_bp"] <= standing[-1]["bp"]
    # Each version shows every action kind it has (docs/api-lending.md): the spec's five and
    # liquidation on both, delegate and accrue on v11.
    spec = {"borrow", "repay", "redeem", "refinance", "add_collateral", "liquidation"}
    for version, kinds in (("v1", spec), ("v11", spec | {"delegate", "accrue"})):
        assert {e["kind"] for e in records if e.get("version") == version} == kinds


@pytest.fixture
def unverified() -> LendingChain:
    """The unverified run, made outside the test's event loop (it runs one of its own)."""
    return lending_chain()


@pytest.mark.node
async def test_libauth_accepts_every_lending_transaction_and_runs_repeat(
    unverified: LendingChain,
) -> None:
    net = Devnet(devnet_config(verify=True))
    await net.start()
    try:
        result = await ScenarioGenerator(
            net, SMALL.replace(verify=True), extensions=[LendingExtension()]
        ).run()
    finally:
        await net.stop()
    part = result.ledger.extensions["lending"]
    assert part == unverified.part  # same history as the unverified run
