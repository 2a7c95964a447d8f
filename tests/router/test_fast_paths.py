"""The builder's fast paths give exactly what the slow ones gave: the route model's inline
contract arithmetic equals `protocols.cauldron.formulas` (results and errors), a pool's output
template encodes what `TxOutput.encode` does, caches follow a new pool state, and the gate's
one-pass token tally rejects everything `bch.policy`'s token rules reject."""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import math
import random
from collections.abc import Callable

import numpy as np
import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from bch.hashes import sha256
from bch.policy import standardness_errors, token_balance_errors, token_burns
from bch.token import MAX_TOKEN_AMOUNT, NFT, Capability, TokenData
from bch.tx import MAX_SATS, FungibleTemplate, OutPoint, Transaction, TxInput, TxOutput
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot
from protocols.cauldron.formulas import (
    LP_FEE_NUM,
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    lp_fee,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)
from router import gate, wire
from router.book import EncodingColumns, LiveBook, PoolEncoding, encodings
from router.build import build
from router.errors import RouterError
from router.params import Destination, QuoteRequest, RouterConfig, parse_build_params
from router.pools import PoolBook, pool_reserve
from router.quotes import quote
from router.route import Direction, Hop, Leg, _best_single, _single, solve_hop
from router.solve import continuous, integer
from router.solve import model as solve_model
from router.solve.model import _Model, _model, _Units
from router.txsize import output_size
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    even_pools,
    funding,
    make_pool,
    standard_book,
)
from tests.router.reference import legs_json, plain_leg
from tests.router.test_daemon_support import running, snapshot_of, standard_pools

# --- inline contract arithmetic ------------------------------------------------------------


def trade_pending(snap: PoolSnapshot, moved: LivePool, tag: bytes, sats: int, tokens: int) -> bytes:
    """A pending trade moving `moved` to (sats, tokens) in a new output 0; its txid."""
    txid = sha256(tag)
    after = LivePool(
        OutPoint(txid, 0), moved.lineage, moved.owner_pkh, moved.token_id, sats, tokens, None
    )
    snap.add_pending(PendingTx(txid, (moved.outpoint,), (after,)))
    return txid


def _outcome(f: Callable[[], int]) -> int | str:
    try:
        return f()
    except ValueError as exc:
        return f"ValueError: {exc}"


pool_states = st.tuples(
    st.one_of(st.integers(706, 10**9), st.integers(706, MAX_SATS)),
    st.one_of(st.integers(2, 10**9), st.integers(2, MAX_TOKEN_AMOUNT)),
)
amounts = st.one_of(st.integers(-2, 1000), st.integers(1, 10**12), st.integers(1, 2**64))


@settings(max_examples=400, deadline=None)
@given(pool_states, amounts)
def test_model_arithmetic_is_the_contracts(state: tuple[int, int], amount: int) -> None:
    sats, tokens = state
    pool = make_pool(TOKEN_A, sats, tokens, "p")
    s = PoolState(sats, tokens)
    buy, sell = _Model([pool], Direction.BUY), _Model([pool], Direction.SELL)
    if len(buy):
        assert _outcome(lambda: buy.out_for_in(0, amount)) == _outcome(
            lambda: buy_tokens_exact_in(s, amount)
        )
        assert _outcome(lambda: buy.in_for_out(0, amount)) == _outcome(
            lambda: buy_tokens_exact_out(s, amount)
        )
    if len(sell):

        def sold() -> int:
            out = sell_tokens_exact_in(s, amount)
            return max(0, min(out, sats - pool_reserve(tokens + amount)))

        assert _outcome(lambda: sell.out_for_in(0, amount)) == _outcome(sold)
        assert _outcome(lambda: sell.in_for_out(0, amount)) == _outcome(
            lambda: sell_tokens_exact_out(s, amount)
        )


def test_edges_fall_back_to_the_formulas_and_their_errors() -> None:
    pool = make_pool(TOKEN_A, 10_000, 100, "edge")
    buy, sell = _Model([pool], Direction.BUY), _Model([pool], Direction.SELL)
    calls: tuple[Callable[[], int], ...] = (
        lambda: buy.in_for_out(0, 100),  # the whole pool
        lambda: buy.in_for_out(0, 0),
        lambda: buy.out_for_in(0, MAX_SATS),  # past 21e14 sats
        lambda: sell.in_for_out(0, 10_000),  # every sat
        lambda: sell.out_for_in(0, MAX_TOKEN_AMOUNT),  # past 2^63−1 tokens
    )
    for call in calls:
        with pytest.raises(ValueError):
            call()


# --- output templates and per-state caches -----------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, MAX_SATS),
    st.integers(1, MAX_TOKEN_AMOUNT),
    st.binary(min_size=0, max_size=80),
    st.binary(min_size=32, max_size=32),
)
def test_template_outputs_encode_as_plain_outputs(
    value: int, amount: int, locking: bytes, category: bytes
) -> None:
    made = FungibleTemplate(locking, category).output(value, amount)
    plain = TxOutput(value, locking, TokenData(category, amount))
    assert made == plain
    # Independently: value ‖ CompactSize(script field length) ‖ ef ‖ category ‖ 0x10 ‖
    # CompactSize(amount) ‖ locking.
    field = b"\xef" + category + b"\x10" + _compact(amount) + locking
    assert made.encode() == value.to_bytes(8, "little") + _compact(len(field)) + field
    assert made.size() == len(made.encode())
    assert type(made.token) is TokenData and hash(made.token) == hash(plain.token)


def _compact(n: int) -> bytes:
    if n < 0xFD:
        return bytes((n,))
    if n <= 0xFFFF:
        return b"\xfd" + n.to_bytes(2, "little")
    if n <= 0xFFFFFFFF:
        return b"\xfe" + n.to_bytes(4, "little")
    return b"\xff" + n.to_bytes(8, "little")


def test_a_template_rejects_what_token_data_rejects() -> None:
    template = FungibleTemplate(b"\x51", bytes(32))
    with pytest.raises(ValueError):
        template.output(1000, 0)
    with pytest.raises(ValueError):
        template.output(1000, MAX_TOKEN_AMOUNT + 1)
    with pytest.raises(ValueError, match="out of range"):
        template.output(1000, -1)
    with pytest.raises(ValueError, match="must carry an amount"):
        template.output(1000, 0)


def _live(n: int, sats: int, tokens: int) -> LivePool:
    op = OutPoint(sha256(f"fast paths {n}".encode()), 0)
    return LivePool(op, op, bytes(20), TOKEN_A, sats, tokens, 800_000)


def test_a_new_pool_state_gets_new_bytes_and_the_old_pools_keep_theirs() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed([_live(i, 1_000_000 + i, 20_000) for i in range(3)], 800_000)
    live = LiveBook(snap)
    before = {p.key: p for p in live.current().pools(TOKEN_A)}
    after_state = PoolState(1_000_100, 19_999)
    table = encodings(live.current())
    old = {k: table.of([p])[0] for k, p in before.items()}
    old_bytes = {
        k: e.template.output(after_state.sats, after_state.tokens).encode() for k, e in old.items()
    }
    moved = snap.pools(TOKEN_A)[1]
    txid = trade_pending(snap, moved, b"fast paths: a trade", moved.sats + 5_000, moved.tokens - 90)
    now = {p.key: p for p in live.current().pools(TOKEN_A)}
    assert (moved.txid, moved.vout) not in now
    fresh = encodings(live.current()).of([now[(txid[::-1].hex(), 0)]])[0]
    template = fresh.template
    assert (
        fresh.source_output.encode()
        == TxOutput(
            moved.sats + 5_000,
            template.locking,
            TokenData(template.category, moved.tokens - 90),
        ).encode()
    )
    for key, pool in now.items():
        if key in before:
            assert pool is before[key]  # untouched pools keep their objects and encodings
            kept = encodings(live.current()).of([pool])[0]
            assert kept is old[key]
            assert (
                kept.template.output(after_state.sats, after_state.tokens).encode()
                == old_bytes[key]
            )
    live.close()


def test_quote_legs_are_its_hops_legs_in_order() -> None:
    book = standard_book()
    config = RouterConfig()
    q = quote(book, QuoteRequest(TOKEN_A, TOKEN_B, 5_000_000), config)
    assert len(q.hops) == 2
    assert q.legs == q.hops[0].legs + q.hops[1].legs
    other = quote(book, QuoteRequest(TOKEN_B, TOKEN_A, 5_000_000), config)
    swapped = dataclasses.replace(q, hops=other.hops)
    assert swapped.legs == other.hops[0].legs + other.hops[1].legs


# --- the gate's one-pass token tally ---------------------------------------------------------

CATS = [sha256(bytes([i])) for i in range(3)]
_LOCK = USER.locking_bytecode


@st.composite
def token_outputs(draw: st.DrawFn) -> TxOutput:
    kind = draw(st.sampled_from(["none", "ft", "ft", "ft", "nft", "prefix"]))
    if kind == "none":
        return TxOutput(1000, _LOCK)
    if kind == "prefix":
        return TxOutput(1000, b"\xef" + _LOCK)
    category = draw(st.sampled_from(CATS))
    if kind == "nft":
        return TxOutput(1000, _LOCK, TokenData(category, 0, NFT(Capability.NONE, b"\x01")))
    return TxOutput(1000, _LOCK, TokenData(category, draw(st.integers(1, 5))))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(token_outputs(), min_size=1, max_size=5),
    st.lists(token_outputs(), min_size=1, max_size=5),
    st.lists(st.sampled_from([*CATS, sha256(b"elsewhere")]), min_size=5, max_size=5),
    st.lists(st.integers(0, 1), min_size=5, max_size=5),
)
def test_the_one_pass_tally_rejects_whatever_the_token_rules_reject(
    spent: list[TxOutput], outputs: list[TxOutput], txids: list[bytes], indexes: list[int]
) -> None:
    inputs = tuple(TxInput(OutPoint(txids[i], indexes[i])) for i in range(len(spent)))
    tx = Transaction(2, inputs, tuple(outputs), 0)
    found = gate.token_problems(tx, spent)
    if token_balance_errors(tx, spent) or token_burns(tx, spent):
        assert found
    plain = all(o.token is None or o.token.nft is None for o in [*spent, *outputs])
    if plain and not any(o.token is None and o.locking[:1] == b"\xef" for o in spent):
        # Without NFTs the tally is exactly conservation plus genesis and overflow.
        totals_in: dict[bytes, int] = {}
        totals_out: dict[bytes, int] = {}
        for side, totals in ((spent, totals_in), (outputs, totals_out)):
            for o in side:
                if o.token is not None:
                    totals[o.token.category] = totals.get(o.token.category, 0) + o.token.amount
        genesis = {i.outpoint.txid for i in inputs if i.outpoint.index == 0}
        no_prefix = not any(o.token is None and o.locking[:1] == b"\xef" for o in outputs)
        clean = totals_in == totals_out and not genesis & set(totals_in) and no_prefix
        assert (not found) == clean


def test_an_nft_anywhere_is_a_problem() -> None:
    nft = TokenData(CATS[0], 3, NFT(Capability.MUTABLE, b""))
    spent = [TxOutput(1000, _LOCK, nft)]
    tx = Transaction(2, (TxInput(OutPoint(CATS[1], 1)),), (TxOutput(900, _LOCK, nft),), 0)
    assert token_balance_errors(tx, spent) == [] and token_burns(tx, spent) == {}
    assert any("NFT" in p for p in gate.token_problems(tx, spent))


def test_real_builds_pass_the_tally() -> None:
    book: PoolBook = standard_book()
    config = RouterConfig()
    token_coin = funding("a", 10_000, token={"category": TOKEN_A, "amount": "5000000"})
    for params in (
        build_params(TOKEN_A, TOKEN_B, 2_000_000, [token_coin, funding("s", 10**7)]),
        build_params("bch", TOKEN_A, 3_000_000, [funding("b", 10**8)]),
    ):
        result = build(book, parse_build_params(params, config), config)
        assert gate.token_problems(result.tx, result.source_outputs) == []


# --- the best single pool: the shared prefix bound prunes only pools that cannot win ----------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(706, 10**8), st.floats(0.5, 2.0)), min_size=1, max_size=40),
    st.sampled_from(list(Direction)),
    st.integers(1, 10**7),
    st.one_of(st.just(0.0), st.floats(0.05, 1.5)),
    st.floats(0.0, 1.0),
)
def test_best_single_is_the_brute_force_best(
    states: list[tuple[int, float]],
    direction: Direction,
    amount: int,
    rate_share: float,
    floor_share: float,
) -> None:
    pools = [
        make_pool(TOKEN_A, sats, max(2, round(sats / (50 * price))), f"s{k}")
        for k, (sats, price) in enumerate(states)
    ]
    m = _Model(pools, direction)
    if not len(m):
        return
    plan = m.plan(1.0)
    v = m.vmax[0] * rate_share
    values = []
    for i in range(len(m)):
        found = _single(m, i, amount, True, plan.cost, v, False)
        if found is not None:
            values.append((found.value, -i, found))
    best_value = max((value for value, _, _ in values), default=None)
    # A floor somewhere between nothing and the best value (or past it).
    floor = -math.inf if best_value is None else best_value * (2 * floor_share) - 1.0
    expected = max((x for x in values if x[0] > floor), default=None, key=lambda x: x[:2])
    got = _best_single(m, amount, True, plan, v, floor)
    if expected is None:
        assert got is None
    else:
        assert got is not None and got.value == expected[0]


def test_the_prefix_depths_follow_the_model_and_a_new_book() -> None:
    snap = PoolSnapshot()
    snap.replace_confirmed(
        [_live(i, 1_000_000 + 7_919 * (i % 5), 20_000 + 10 * i) for i in range(12)], 800_000
    )
    live = LiveBook(snap)
    for direction in Direction:
        m = _model(live.current(), TOKEN_A, direction)
        reserve = [p.sats if direction is Direction.BUY else p.tokens for p in m.pools]
        assert m.depth_max() == [max(reserve[: k + 1]) for k in range(len(reserve))]
    old = _model(live.current(), TOKEN_A, Direction.BUY)
    moved = snap.pools(TOKEN_A)[0]
    trade_pending(snap, moved, b"fast paths: a deep trade", 9_000_000, moved.tokens // 3)
    new = _model(live.current(), TOKEN_A, Direction.BUY)
    assert new is not old
    assert new.depth_max()[-1] == 9_000_000 and old.depth_max()[-1] < 9_000_000
    live.close()


def test_push_only_answers_do_not_leak_between_unlockings() -> None:
    pushes = TxInput(OutPoint(bytes(32), 1), b"\x01\x02")
    not_pushes = TxInput(OutPoint(bytes(32), 2), b"\x76\xa9")  # OP_DUP OP_HASH160
    out = (TxOutput(1_000, USER.locking_bytecode),)
    for _ in range(2):  # the second round answers from the cache
        reasons = [v.reason for v in standardness_errors(Transaction(2, (pushes,), out, 0))]
        assert "scriptsig-not-pushonly" not in reasons
        reasons = [v.reason for v in standardness_errors(Transaction(2, (not_pushes,), out, 0))]
        assert "scriptsig-not-pushonly" in reasons


def test_decoded_addresses_are_reused_only_for_the_same_text_and_network() -> None:
    first = Destination.parse(USER.token_address, "receive_addr", None)
    again = Destination.parse(USER.token_address, "receive_addr", None)
    assert again == first and again.token_aware
    plain = Destination.parse(USER.address, "change_addr", None)
    assert not plain.token_aware and plain.locking == first.locking
    with pytest.raises(RouterError):  # a mainnet address on a testnet router
        Destination.parse(USER.token_address, "receive_addr", "bchtest")
    with pytest.raises(RouterError):  # a bad checksum, asked twice: never cached
        Destination.parse(USER.address[:-1] + ("q" if USER.address[-1] != "q" else "p"), "x", None)
    with pytest.raises(RouterError):
        Destination.parse(USER.address[:-1] + ("q" if USER.address[-1] != "q" else "p"), "x", None)


# --- the daemon sends its ready-made JSON bytes as text frames ------------------------------


async def test_replies_and_pushes_are_text_frames() -> None:
    order = build_params("bch", TOKEN_A, 100_000, [funding("text", 10_000_000)])
    async with running(snapshot_of(standard_pools())) as server, connect(server.url) as ws:
        await ws.send(orjson.dumps({"id": 1, "method": "tx.build", "params": order}).decode())
        reply = await asyncio.wait_for(ws.recv(), 5)
        assert isinstance(reply, str)  # a text frame: websockets gives str only for those
        assert orjson.loads(reply)["result"]["unsigned_tx_hex"]
        await ws.send(orjson.dumps({"id": 2, "method": "tx.subscribe", "params": order}).decode())
        frames = [await asyncio.wait_for(ws.recv(), 5) for _ in range(2)]
        assert all(isinstance(f, str) for f in frames)
        assert {orjson.loads(f).get("method") for f in frames} == {None, "tx.update"}


# --- JSON bytes, legs, template widths, the signed copy, one-pass standardness --------


def _orders() -> list[dict[str, object]]:
    token_coin = funding("a", 10_000, token={"category": TOKEN_A, "amount": "9000000"})
    bch = funding("b", 10**9)
    return [
        build_params("bch", TOKEN_A, 3_000_000, [bch]),
        build_params("bch", TOKEN_A, 40_000_000, [bch], side="buy"),
        build_params(TOKEN_A, "bch", 2_000_000, [token_coin, bch]),
        build_params(TOKEN_A, "bch", 20_000, [token_coin, bch], side="buy"),
        build_params(TOKEN_A, TOKEN_B, 2_000_000, [token_coin, bch]),
        build_params(TOKEN_A, TOKEN_B, 3_000, [token_coin, bch], side="buy"),
        build_params("bch", TOKEN_B, 800_000, [token_coin, bch]),  # token change
    ]


def test_the_transactions_hex_is_spliced_only_from_its_own_pool_inputs() -> None:
    """`build_bytes` takes the pools' inputs' hex from the book; a transaction whose inputs
    are not the route's pools (here: one pool input replaced by a funding-like input, and a
    transaction with no pool inputs at all) is written from its own bytes."""
    book = standard_book()
    config = RouterConfig(fee_address=FEE_WALLET.token_address)
    result = build(book, parse_build_params(_orders()[0], config), config)
    assert b"".join(wire._tx_hex_parts(result)).decode() == result.tx.hex()
    inputs = list(result.tx.inputs)
    inputs[0] = TxInput(inputs[0].outpoint)  # the pool's outpoint, unlocked otherwise
    for tx in (
        result.tx.replace(inputs=tuple(inputs)),
        result.tx.replace(inputs=tuple(inputs[len(result.route.encodings) :])),
    ):
        other = dataclasses.replace(result, tx=tx)
        assert b"".join(wire._tx_hex_parts(other)).decode() == tx.hex() != result.tx.hex()
        assert wire.build_bytes(other) == orjson.dumps(wire.build_doc(other))


def test_the_daemons_json_bytes_are_the_dicts() -> None:
    book = standard_book()
    config = RouterConfig(fee_address=FEE_WALLET.token_address)
    for params in _orders():
        result = build(book, parse_build_params(params, config), config)
        assert wire.build_bytes(result) == orjson.dumps(wire.build_doc(result))
        assert wire.quote_bytes(result.route) == orjson.dumps(wire.quote_doc(result.route))
        assert orjson.loads(legs_json(result.route.legs)) == [
            wire.leg_doc(leg) for leg in result.route.legs
        ]


def test_source_outputs_json_whatever_objects_the_pools_spend() -> None:
    """The pools' entries come made only while every pool input spends the pool's own output
    object; an equal copy, or another output, is written out like any funding input."""
    book = standard_book()
    config = RouterConfig(fee_address=FEE_WALLET.token_address)
    result = build(book, parse_build_params(_orders()[0], config), config)
    assert len(result.route.legs) >= 2
    first = result.route.encodings[0].source_output
    copy = TxOutput(first.value, first.locking, first.token)
    other = TxOutput(first.value + 1, first.locking, first.token)
    for swapped in (copy, other):
        sources = (swapped, *result.source_outputs[1:])
        changed = dataclasses.replace(result, source_outputs=sources)
        doc = orjson.loads(wire.build_bytes(changed))
        assert wire.build_bytes(changed) == orjson.dumps(wire.build_doc(changed))
        assert doc["source_outputs"][0]["value"] == str(swapped.value)
        assert (
            doc["source_outputs"][1:]
            == orjson.loads(wire.build_bytes(result))["source_outputs"][1:]
        )


def test_a_hops_legs_and_totals_are_the_plain_ones() -> None:
    book = standard_book()
    config = RouterConfig()
    for params in _orders():
        q = build(book, parse_build_params(params, config), config).route
        for hop in q.hops:
            m = _model(book, hop.token_id, hop.direction)
            for leg in hop.legs:
                i = m.position(leg.pool.key)
                assert i is not None
                plain = plain_leg(m, i, leg.amount_in, leg.amount_out)
                assert leg == plain and leg.after == plain.after
                assert type(leg) is Leg and type(leg.after) is PoolState
                assert hash(leg.after) == hash(plain.after)
            assert hop.amount_in == sum(leg.amount_in for leg in hop.legs)
            assert hop.amount_out == sum(leg.amount_out for leg in hop.legs)
            # Bytes written out apart from the router: 110-byte input, 78-byte output plus
            # the amount's CompactSize.
            assert hop.pool_bytes == sum(
                110 + 78 + len(_compact(leg.after.tokens)) for leg in hop.legs
            )
            bare = Hop(hop.token_id, hop.direction, hop.legs)
            assert (bare.amount_in, bare.amount_out, bare.pool_bytes) == (
                hop.amount_in,
                hop.amount_out,
                hop.pool_bytes,
            )


@pytest.mark.parametrize(
    "amount",
    [1, 0xFC, 0xFD, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, MAX_TOKEN_AMOUNT],
)
def test_template_outputs_at_every_width_step(amount: int) -> None:
    locking = sha256(b"width steps") + b"\x87\x01\x02"
    made = FungibleTemplate(locking, CATS[0]).output(12_345, amount)
    plain = TxOutput(12_345, locking, TokenData(CATS[0], amount))
    assert made == plain and made.encode() == TxOutput(12_345, locking, plain.token).encode()


def test_the_signed_copy_is_the_transaction_serialized_afresh() -> None:
    ins = [TxInput(OutPoint(sha256(bytes([i])), i), bytes(i % 3 * 40)) for i in range(8)]
    outs = (TxOutput(1_000, _LOCK),)
    tx = Transaction(2, tuple(ins), outs, 0)
    tx = Transaction(2, tx.inputs, outs, 0, tx.to_bytes())
    for signing in [(), (7,), (5, 6, 7), (0,), (2, 5), (0, 3, 7)]:
        signed = gate.worst_case_signed(tx, signing)
        fresh = Transaction(2, signed.inputs, outs, 0)
        assert signed.to_bytes() == fresh.to_bytes()
        assert [i.unlocking for i in signed.inputs] == [
            gate._PLACEHOLDER_UNLOCK if n in signing else ins[n].unlocking for n in range(8)
        ]


def test_standardness_reports_in_bchns_order() -> None:
    """Relay policy first (inputs, then outputs), then consensus (inputs, then outputs),
    whatever the one-pass output loop does inside."""
    null = OutPoint(bytes(32), 0xFFFFFFFF)
    dup = OutPoint(sha256(b"dup"), 1)
    ins = (TxInput(dup), TxInput(null, b"\xac"), TxInput(dup))
    outs = (
        TxOutput(MAX_SATS + 1, _LOCK),
        TxOutput(10, _LOCK),
        TxOutput(1_000, b"\xef" + bytes(40)),
        TxOutput(0, b"\x6a\x01\x00"),
        TxOutput(2**64 - 1, _LOCK),
    )
    reasons = [v.reason for v in standardness_errors(Transaction(2, ins, outs, 0))]
    assert reasons == [
        "scriptsig-not-pushonly",
        "dust",  # output 1
        "bad-txns-prevout-null",  # input 1
        "bad-txns-inputs-duplicate",  # input 2
        "bad-txns-vout-toolarge",  # output 0
        "bad-txns-vout-tokenprefix",  # output 2
        "bad-txns-vout-negative",  # output 4
    ]


@settings(max_examples=300, deadline=None)
@given(pool_states, st.integers(1, 2**40), st.integers(0, 3), st.sampled_from(list(Direction)))
def test_unit_costs_are_in_for_out(
    state: tuple[int, int], y: int, room: int, direction: Direction
) -> None:
    sats, tokens = state
    m = _Model([make_pool(TOKEN_A, sats, tokens, "unit costs")], direction)
    if not len(m):
        return
    cap = m.out_cap(0)
    y = min(y, cap)
    if y < 1:
        return
    for want in {y, max(1, cap - room), cap}:
        try:
            now = m.in_for_out(0, want)
            step = m.in_for_out(0, want + 1) - now if want < cap else -1
        except ValueError:
            with pytest.raises(ValueError):
                m.unit_costs([(0, want, cap)])
            continue
        assert m.unit_costs([(0, want, cap)]) == [(now, step)]
    assert m.out_caps([0]) == [cap]


# --- a purchase's whole units and polish in one pass ------------------------------------


def _plain_units(
    m: _Model, alloc: list[tuple[int, float, float]]
) -> tuple[dict[int, int], dict[int, int], dict[int, int], list[tuple[int, int]]]:
    """What `_exact_in_by_out` made before `buy_units`: caps, whole units, unit costs."""
    get: dict[int, int] = {}
    caps: dict[int, int] = {}
    for (i, _, y), cap in zip(alloc, m.out_caps([i for i, _, _ in alloc]), strict=True):
        if min(int(y), cap) >= 1:
            get[i], caps[i] = min(int(y), cap), cap
    costs = m.unit_costs([(i, y, caps[i]) for i, y in get.items()])
    pay = {i: now for i, (now, _) in zip(get, costs, strict=True)}
    heap = [(step, i) for i, (_, step) in zip(get, costs, strict=True) if step >= 0]
    return get, caps, pay, heap


def _plain_polish(
    m: _Model,
    heap: list[tuple[int, int]],
    pay: dict[int, int],
    get: dict[int, int],
    caps: dict[int, int],
    spare: int,
) -> int:
    """The polish loop with `in_for_out` itself (what `_buy_cheapest_units` inlines)."""
    heapq.heapify(heap)
    while heap and heap[0][0] <= spare:
        cost, i = heapq.heappop(heap)
        spare -= cost
        pay[i] += cost
        get[i] += 1
        if get[i] < caps[i]:
            heapq.heappush(heap, (m.in_for_out(i, get[i] + 1) - pay[i], i))
    return spare


@settings(max_examples=300, deadline=None)
@given(
    st.lists(pool_states, min_size=1, max_size=8),
    st.randoms(use_true_random=False),
    st.one_of(st.floats(0.0, 1.2), st.just(0.0), st.just(1.0)),
    st.integers(0, 50_000),
)
def test_a_purchases_units_and_polish_are_the_plain_ones(
    states: list[tuple[int, int]], rng: random.Random, share: float, spare: int
) -> None:
    """`buy_units(members, v)` is `_allocation(members, v)` made whole the plain way, at
    rates from above every pool's v_max (nothing trades) to below their v_min (saturated)."""
    pools = [make_pool(TOKEN_A, x, t, f"units {n}") for n, (x, t) in enumerate(states)]
    m = _Model(pools, Direction.BUY)
    members = rng.sample(range(len(m)), rng.randint(0, len(m)))
    rates = [*m.vmax, *m.vmin]
    v = rng.choice(rates) * share if rates else 0.0
    alloc = continuous._allocation(m, members, v)
    try:
        expected = _plain_units(m, alloc)
    except ValueError:
        with pytest.raises(ValueError):
            m.buy_units(members, v)
        return
    got = m.buy_units(members, v)
    # Positions ascend with the pools' indices; the heap's entries are `_unit_key(cost,
    # position)`: one integer ordering as the pair does.
    get, caps, pay, heap = expected
    assert got.indices == sorted(get)
    assert dict(zip(got.indices, got.get, strict=True)) == get
    assert dict(zip(got.indices, got.pay, strict=True)) == pay
    assert all(caps[i] == m.out_limit[i] for i in got.indices)
    position = {i: p for p, i in enumerate(got.indices)}
    assert sorted(got.heap) == [solve_model._unit_key(c, position[i]) for c, i in sorted(heap)]
    if any(step < 1 for step, _ in heap):
        return  # free units: the route polishes only where a token costs ≥ 1 sat
    index = got.indices
    mine = _Units(
        index,
        [get[i] for i in index],
        [pay[i] for i in index],
        [solve_model._unit_key(step, position[i]) for step, i in heap],
    )
    heapq.heapify(mine.heap)
    try:
        left = _plain_polish(m, heap, pay, get, caps, spare)
    except ValueError:
        with pytest.raises(ValueError):
            integer._buy_cheapest_units(m, mine, spare)
        return
    assert integer._buy_cheapest_units(m, mine, spare) == left
    assert dict(zip(index, mine.get, strict=True)) == get
    assert dict(zip(index, mine.pay, strict=True)) == pay


def test_real_purchases_polish_the_plain_way() -> None:
    """On the standard book's purchases (hundreds of units polished), the same legs."""
    book = standard_book()
    config = RouterConfig(fee_address=FEE_WALLET.token_address)
    for amount in (3_000_000, 40_000_000, 700_000_000):
        q = quote(book, QuoteRequest("bch", TOKEN_A, amount), config)
        m = _model(book, TOKEN_A, Direction.BUY)
        for leg in q.legs:
            i = m.position(leg.pool.key)
            assert i is not None
            assert leg.amount_in == m.in_for_out(i, leg.amount_out) or len(q.legs) == 1


narrow_states = st.tuples(
    st.one_of(st.integers(706, 10**6), st.integers(706, 10**9)),
    st.one_of(st.integers(2, 300), st.integers(2, 10**6)),
)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(narrow_states, min_size=170, max_size=220),
    st.randoms(use_true_random=False),
    st.one_of(st.floats(0.0, 1.2), st.just(1.0)),
)
def test_a_many_pool_purchases_units_are_the_plain_ones(
    states: list[tuple[int, int]], rng: random.Random, share: float
) -> None:
    """From `_ARRAY_MEMBERS` members on, `buy_units` reads the columns as arrays: still
    `_allocation(members, v)` made whole the plain way, pool for pool (the polish heap's
    entries in any order: it is heapified, its keys distinct)."""
    pools = [make_pool(TOKEN_A, x, t, f"many {n}") for n, (x, t) in enumerate(states)]
    m = _Model(pools, Direction.BUY)
    assume(len(m) >= solve_model._ARRAY_MEMBERS)
    assert m.purchase_arrays() is not None
    members = rng.sample(range(len(m)), rng.randint(solve_model._ARRAY_MEMBERS, len(m)))
    v = rng.choice([*m.vmax, *m.vmin]) * share
    expected = _plain_units(m, continuous._allocation(m, members, v))
    got = m.buy_units(members, v)
    assert list(zip(got.indices, got.get, strict=True)) == sorted(expected[0].items())
    assert list(zip(got.indices, got.pay, strict=True)) == sorted(expected[2].items())
    heap = [divmod(key, 2**32) for key in got.heap]
    assert sorted((cost, got.indices[p]) for cost, p in heap) == sorted(expected[3])
    assert m.buy_units(np.array(members, dtype=np.int64), v) == got  # (a plan's array)


# Amounts at the edges: negative, just past a side's limit, past 2^63.
_EDGE_AMOUNTS = st.one_of(
    st.integers(0, MAX_TOKEN_AMOUNT),
    st.sampled_from([-1, MAX_SATS, MAX_SATS + 1, MAX_TOKEN_AMOUNT, MAX_TOKEN_AMOUNT + 1]),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, MAX_SATS),
            st.sampled_from([2, 0xFC, 0xFD, 0x10000, 0x100000000, MAX_TOKEN_AMOUNT - 1]),
            _EDGE_AMOUNTS,
            _EDGE_AMOUNTS,
        ),
        min_size=1,
        max_size=32,
    ),
    st.booleans(),
)
def test_a_hop_is_its_plain_legs_at_any_amount(
    trades: list[tuple[int, int, int, int]], within_limits: bool
) -> None:
    """`hop` adds in a compiled loop: its columns, totals and pool bytes are the plain
    legs', amounts within the pools' limits (as the formulas make them) or not (negative,
    past a side's limit, past 64 bits)."""
    pools = [make_pool(TOKEN_A, x, t, f"many{n}") for n, (x, t, _, _) in enumerate(trades)]
    amounts = {
        pool.key: (x_in, y_out) for pool, (_, _, x_in, y_out) in zip(pools, trades, strict=True)
    }
    for direction in Direction:
        m = _Model(pools, direction)
        indices = list(range(len(m)))
        ins = [amounts[m.pools[i].key][0] for i in indices]
        outs = [amounts[m.pools[i].key][1] for i in indices]
        if within_limits:
            buying = direction is Direction.BUY
            for n, pool in enumerate(m.pools):
                side_in, side_out = (pool.sats, pool.tokens) if buying else (pool.tokens, pool.sats)
                ins[n] = abs(ins[n]) % ((MAX_SATS if buying else MAX_TOKEN_AMOUNT) - side_in + 1)
                outs[n] = abs(outs[n]) % (side_out + 1)
        hop = m.hop(TOKEN_A, (indices, ins, outs))
        plain = Hop(
            TOKEN_A,
            direction,
            tuple(plain_leg(m, i, x, y) for i, x, y in zip(indices, ins, outs, strict=True)),
        )
        assert hop.columns() == plain.columns()
        assert (hop.amount_in, hop.amount_out) == (sum(ins), sum(outs))
        assert hop.pool_bytes == plain.pool_bytes


def test_a_many_leg_hops_encodings_by_position_are_its_pools_own() -> None:
    """A hop the route makes carries its legs' model positions, and the book's encodings
    come by them (`Encodings.of_hops`): the very objects `Encodings.of` gives for its pools,
    the first time, again, and after another order filled part of the model's table."""
    book = PoolBook(even_pools(TOKEN_A, 80, 10**9, 100.0))
    table = encodings(book)

    def hop(amount: int) -> Hop:
        return solve_hop(
            book, TOKEN_A, Direction.BUY, amount, exact_in=True, fee_per_byte=0.0, max_pools=80
        )

    small, large = hop(10**9), hop(10**10)
    assert 1 <= small.count() < large.count()
    assert small.aligned() is not None and large.aligned() is not None
    for hops in ((small,), (large,), (large, small), (large,)):
        got = table.of_hops(hops)
        want = table.of(tuple(p for h in hops for p in h.columns()[0]))
        assert len(got) == len(want) and all(g is w for g, w in zip(got, want, strict=True))
        assert [e.pool for e in got] == [p for h in hops for p in h.columns()[0]]


def test_encoding_columns_are_the_encodings_field_by_field() -> None:
    """A route's encodings as columns (`EncodingColumns`): field by field, the very objects
    of each encoding in order; a part is the columns of those encodings; a two-hop quote's
    are both hops' pools'; `with_costs` keeps them."""
    book = PoolBook([*even_pools(TOKEN_A, 30, 10**9, 100.0), *even_pools(TOKEN_B, 30, 10**9, 50.0)])
    for request in (QuoteRequest("bch", TOKEN_A, 10**10), QuoteRequest(TOKEN_A, TOKEN_B, 10**8)):
        q = quote(book, request, RouterConfig())
        columns = q.encoding_columns()
        assert columns is q.encoding_columns()
        assert columns.pool == q.columns()[0]
        assert columns.sats == tuple(p.sats for p in columns.pool)
        assert columns.tokens == tuple(p.tokens for p in columns.pool)
        for name, column in zip(PoolEncoding._fields, columns, strict=True):
            assert len(column) == len(q.encodings) > 1
            assert all(c is getattr(e, name) for c, e in zip(column, q.encodings, strict=True))
        part = columns.part(1, 3)
        assert part == EncodingColumns.of_encodings(q.encodings[1:3])
        assert q.with_costs(1, 2).encoding_columns() is columns
    assert EncodingColumns.of_encodings(()) == EncodingColumns(*((),) * len(PoolEncoding._fields))


# --- the quote's sizes without output objects ----------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10_010), st.one_of(st.none(), st.integers(1, MAX_TOKEN_AMOUNT)))
def test_output_size_is_the_size_of_the_output(locking: int, amount: int | None) -> None:
    token = None if amount is None else TokenData(bytes(range(32)), amount)
    assert output_size(locking, amount) == TxOutput(MAX_SATS, bytes(locking), token).size()


def test_with_costs_is_replace_of_the_two_fields() -> None:
    q = quote(standard_book(), QuoteRequest("bch", TOKEN_A, 2_000_000), RouterConfig())
    assert len(q.legs) > 1  # computed and kept on `q`: the copy need not carry them
    got = q.with_costs(q.size_estimate + 7, q.miner_fee_estimate + 9)
    assert got == dataclasses.replace(
        q, size_estimate=got.size_estimate, miner_fee_estimate=got.miner_fee_estimate
    )
    assert (got.size_estimate, got.miner_fee_estimate) == (
        q.size_estimate + 7,
        q.miner_fee_estimate + 9,
    )
    assert got.encodings == q.encodings and got.legs == q.legs and got.columns() == q.columns()


# Where the fee's product leaves a compiled loop's machine integers (63 bits, 64 bits).
_EDGES = ((2**62 - 1) // LP_FEE_NUM, (2**63 - 1) // LP_FEE_NUM)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 10**16),
            st.sampled_from(_EDGES).flatmap(lambda edge: st.integers(edge - 2, edge + 2)),
            st.integers(0, 2**70),
        ),
        max_size=80,
    )
)
def test_leg_fees_are_lp_fee(moved: list[int]) -> None:
    assert wire._lp_fees(moved) == [lp_fee(0, m) for m in moved]


def test_wide_routes_json_bytes_are_the_dicts() -> None:
    """Routes of some ninety legs a hop, every way."""
    pools = even_pools(TOKEN_A, 90, 3_000_000, 0.02, "w") + even_pools(
        TOKEN_B, 90, 4_000_000, 5.0, "v"
    )
    book = PoolBook(pools)
    config = RouterConfig(fee_address=FEE_WALLET.token_address)
    coin = {"category": TOKEN_A, "amount": str(10**11)}
    bch = funding("wide", 10**12)
    token_coin = funding("wide tokens", 10**6, token=coin)
    for params in (
        build_params("bch", TOKEN_A, 200_000_000, [bch]),
        build_params(TOKEN_A, "bch", 5 * 10**9, [token_coin, bch]),
        build_params(TOKEN_A, TOKEN_B, 5 * 10**9, [token_coin, bch]),
    ):
        result = build(book, parse_build_params(params, config), config)
        assert all(hop.count() > 60 for hop in result.route.hops)
        assert wire.build_bytes(result) == orjson.dumps(wire.build_doc(result))
        assert wire.quote_bytes(result.route) == orjson.dumps(wire.quote_doc(result.route))


def test_holes_are_filled_and_nothing_else_is() -> None:
    """A NUL in a string is written escaped, so only the holes' NULs split the text."""
    doc = {"a\0": "x\0y", "h": wire._HOLE_STRING, "b": [wire._HOLE_ARRAY, "\0"]}
    got = wire._dumps_filled(doc, [[b"ab", b"cd"], [b"1,", b"2"]])
    assert got == orjson.dumps({"a\0": "x\0y", "h": "abcd", "b": [[1, 2], "\0"]})
