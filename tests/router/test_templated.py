"""A built transaction keeps its pools' outputs as template integers and bytes
(`bch.tx.TemplatedTransaction`); the gate and the policy checks judge those integers in one
pass. Here every fast path is held to the plain code: the same bytes and objects as a plain
`Transaction`, and the same problems, reasons and totals from the gate and `bch.policy`, for
honest builds and for tampered ones (a sat, a token, a template, an input, a source output,
a user output), which must be caught."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch import policy
from bch.hashes import sha256
from bch.policy import (
    MAX_STANDARD_LOCKING_SIZE,
    input_standardness_errors,
    standard_spend,
    standardness_errors,
)
from bch.script import p2pkh_locking
from bch.token import MAX_TOKEN_AMOUNT, NFT, Capability, TokenData
from bch.tx import (
    MAX_SATS,
    FungibleTemplate,
    OutPoint,
    TemplatedTransaction,
    Transaction,
    TxInput,
    TxOutput,
    fungible_encodings,
    hex_to_hash,
)
from protocols.cauldron.formulas import PoolState
from router import gate, wire
from router.book import EncodingColumns, Encodings, PoolEncoding, encode
from router.build import BuildResult, build
from router.params import RouterConfig, parse_build_params
from router.pools import PoolBook
from router.quotes import Quote
from router.route import Direction, Hop, Leg
from tests.router.helpers import (
    FEE_WALLET,
    OTHER,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    funding,
    make_pool,
    standard_book,
)
from tests.router.reference import legs_json_parts

CONFIG = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)
CAT_A, CAT_B = hex_to_hash(TOKEN_A), hex_to_hash(TOKEN_B)
_LOCK = sha256(b"templated tests") + b"\x87\x01\x02"


def _orders() -> list[dict[str, Any]]:
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


@pytest.fixture(scope="module")
def book() -> PoolBook:
    return standard_book()


@pytest.fixture(scope="module")
def builds(book: PoolBook) -> list[tuple[BuildResult, gate.Expectation]]:
    out = []
    for params in _orders():
        request = parse_build_params(params, CONFIG)
        result = build(book, request, CONFIG)
        exp = gate.Expectation.for_build(result.route, request, CONFIG, result.inputs_to_sign)
        out.append((result, exp))
    return out


def _plain(tx: Transaction) -> Transaction:
    """The same transaction as plain objects, its outputs made the ordinary way."""
    if isinstance(tx, TemplatedTransaction):
        made = [
            TxOutput(v, t.locking, TokenData(t.category, a))
            for t, v, a in zip(tx.templates, tx.values, tx.amounts, strict=True)
        ]
        return Transaction(tx.version, tx.inputs, (*made, *tx.rest), tx.locktime)
    return Transaction(tx.version, tx.inputs, tx.outputs, tx.locktime)


def _templated(
    tx: TemplatedTransaction,
    *,
    inputs: Any = None,
    templates: Any = None,
    values: Any = None,
    amounts: Any = None,
    rest: Any = None,
    version: int | None = None,
) -> TemplatedTransaction:
    return TemplatedTransaction(
        tx.inputs if inputs is None else inputs,
        tx.templates if templates is None else templates,
        tx.values if values is None else values,
        tx.amounts if amounts is None else amounts,
        tx.rest if rest is None else rest,
        version=tx.version if version is None else version,
    )


def _same_verdicts(
    tx: TemplatedTransaction, sources: tuple[TxOutput, ...], exp: gate.Expectation
) -> list[str]:
    """The gate's and the policy's answers on `tx` equal those on its plain copy."""
    plain = _plain(tx)
    fresh = _templated(tx)  # outputs never read: every fast path is taken where it can be
    found = gate.problems(fresh, sources, exp)
    assert found == gate.problems(plain, sources, exp)
    assert gate.token_problems(_templated(tx), sources) == gate.token_problems(plain, sources)
    assert standardness_errors(_templated(tx)) == standardness_errors(plain)
    assert standardness_errors(_templated(tx), vm_year=2025) == standardness_errors(
        plain, vm_year=2025
    )
    if len(sources) == len(tx.inputs):
        assert input_standardness_errors(_templated(tx), sources) == input_standardness_errors(
            plain, sources
        )
    assert gate.output_total(_templated(tx)) == sum(o.value for o in plain.outputs)
    return found


# --- the transaction -----------------------------------------------------------------------------


def test_builds_are_templated_and_their_bytes_are_the_plain_ones(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    for result, exp in builds:
        tx = result.tx
        assert isinstance(tx, TemplatedTransaction)
        n = len(exp.routed[0])
        assert len(tx.templates) == n and tx.output_count() == n + len(tx.rest)
        plain = _plain(tx)
        assert tx.to_bytes() == plain.to_bytes() == Transaction.from_bytes(tx.to_bytes()).raw
        assert Transaction.from_bytes(tx.to_bytes()) == tx  # outputs made on demand, equal
        assert tx == plain and plain == tx and hash(tx) == hash(plain)
        assert tx.outputs == plain.outputs and tx.outputs is tx.outputs  # made once
        assert [o.encode() for o in tx.outputs] == [o.encode() for o in plain.outputs]
        assert tx.output_value() == sum(o.value for o in plain.outputs)
        assert gate._templated_pools_clean(
            _templated(tx), result.source_outputs, exp.routed, exp.encodings
        )
        assert policy._templated_clean(_templated(tx), 2026) == (n, sum(tx.values))
        assert _same_verdicts(tx, result.source_outputs, exp) == []


def test_the_signed_copy_keeps_the_outputs_bytes(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    for result, _ in builds:
        tx = result.tx
        assert isinstance(tx, TemplatedTransaction)
        signed = gate.worst_case_signed(tx, result.inputs_to_sign)
        assert isinstance(signed, TemplatedTransaction)
        fresh = Transaction(2, signed.inputs, _plain(tx).outputs, 0)
        assert signed.to_bytes() == fresh.to_bytes()
        assert signed.size() == tx.size() + 109 * len(result.inputs_to_sign)
        again = signed.with_inputs(tx.inputs)
        assert again.to_bytes() == tx.to_bytes() and again == tx


def test_encodings_and_objects_are_the_plain_constructors() -> None:
    templates = [FungibleTemplate(_LOCK, CAT_A), FungibleTemplate(_LOCK[:-1], CAT_B)] * 4
    values = [546, 0, 2**63, 1, 10**9, MAX_SATS, 700, 12]
    amounts = [1, 0xFC, 0xFD, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, MAX_TOKEN_AMOUNT]
    made = fungible_encodings(templates, values, amounts)
    plain = [
        TxOutput(v, t.locking, TokenData(t.category, a))
        for t, v, a in zip(templates, values, amounts, strict=True)
    ]
    assert made == [o.encode() for o in plain]
    ins = [TxInput(OutPoint(sha256(b"in"), 3), b"\x51")]
    rest = [TxOutput(1_000, USER.locking_bytecode)]
    tx = TemplatedTransaction(ins, templates, values, amounts, rest, version=1, locktime=7)
    assert tx.to_bytes() == Transaction(1, tuple(ins), (*plain, *rest), 7).to_bytes()
    assert tx.outputs == (*plain, *rest)
    changed = tx.replace(locktime=0)
    assert type(changed) is Transaction and changed.locktime == 0 and changed.raw is None
    assert changed.outputs == tx.outputs
    for again in (copy.copy(tx), copy.deepcopy(tx), pickle.loads(pickle.dumps(tx))):
        assert type(again) is TemplatedTransaction and again == tx and again.raw == tx.raw


@pytest.mark.parametrize("amount", [0, -1, MAX_TOKEN_AMOUNT + 1])
def test_an_amount_token_data_refuses_is_refused(amount: int) -> None:
    with pytest.raises(ValueError) as plain:
        TokenData(CAT_A, amount)
    with pytest.raises(ValueError) as made:
        fungible_encodings([FungibleTemplate(_LOCK, CAT_A)], [1_000], [amount])
    assert str(made.value) == str(plain.value)


# --- the gate and the policy on tampered transactions --------------------------------------------


def _honest(
    builds: list[tuple[BuildResult, gate.Expectation]], k: int = 0
) -> tuple[TemplatedTransaction, tuple[TxOutput, ...], gate.Expectation]:
    result, exp = builds[k]
    assert isinstance(result.tx, TemplatedTransaction)
    return result.tx, result.source_outputs, exp


def _bumped(seq: tuple[int, ...], i: int, delta: int) -> list[int]:
    out = list(seq)
    out[i] += delta
    return out


def test_a_sat_or_a_token_off_is_caught_as_by_the_plain_gate(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    tx, sources, exp = _honest(builds)
    cases = {
        "pool pays one sat more": (_templated(tx, values=_bumped(tx.values, 0, -1)), "predicate"),
        "pool keeps one sat more": (_templated(tx, values=_bumped(tx.values, 1, 1)), "routed"),
        "pool gives a token more": (_templated(tx, amounts=_bumped(tx.amounts, 0, -1)), "totals"),
        "pool keeps a token more": (_templated(tx, amounts=_bumped(tx.amounts, 2, 1)), "totals"),
        "last pool off": (_templated(tx, values=_bumped(tx.values, -1, -5)), "predicate"),
    }
    for name, (bad, reason) in cases.items():
        found = _same_verdicts(bad, sources, exp)
        assert any(reason in f for f in found), (name, found)
        with pytest.raises(Exception, match="safety gate"):
            gate.enforce(_templated(bad), sources, exp)


def test_a_routed_state_no_output_holds_is_judged_the_plain_way(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    """A route saying a pool ends above 21e14 sats (the contract predicate alone would pass
    it): the column checks find the value by the sum, and the plain checks report it."""
    tx, sources, exp = _honest(builds)
    values = tuple(_bumped(tx.values, 1, MAX_SATS + 1 - tx.values[1]))
    routed = dataclasses.replace(exp, routed=(exp.routed[0], values, exp.routed[2]))
    bad = _templated(tx, values=values)
    assert gate._templated_pools_clean(bad, sources, routed.routed, routed.encodings) is None
    found = _same_verdicts(bad, sources, routed)
    assert any("toolarge" in f for f in found), found


def test_a_template_an_input_or_a_source_not_the_pools_is_judged_the_plain_way(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    tx, sources, exp = _honest(builds)
    t = list(tx.templates)
    swapped_templates = [t[1], t[0], *t[2:]]
    equal_template = [FungibleTemplate(t[0].locking, t[0].category), *t[1:]]
    other_category = [FungibleTemplate(t[0].locking, CAT_B), *t[1:]]
    other_locking = [FungibleTemplate(OTHER.locking_bytecode, t[0].category), *t[1:]]
    ins = list(tx.inputs)
    swapped_inputs = [ins[1], ins[0], *ins[2:]]
    copied_input = [TxInput(ins[0].outpoint, ins[0].unlocking), *ins[1:]]
    first = sources[0]
    copied_source = (TxOutput(first.value, first.locking, first.token), *sources[1:])
    assert first.token is not None
    richer_source = (TxOutput(first.value + 10**6, first.locking, first.token), *sources[1:])
    cases: list[tuple[TemplatedTransaction, tuple[TxOutput, ...], str | None]] = [
        (_templated(tx, templates=swapped_templates), sources, "does not re-create"),
        (_templated(tx, templates=equal_template), sources, None),
        (_templated(tx, templates=other_category), sources, "category"),
        (_templated(tx, templates=other_locking), sources, "does not re-create"),
        (_templated(tx, inputs=swapped_inputs), sources, "not pool"),
        (_templated(tx, inputs=copied_input), copied_source, None),
        (tx, copied_source, None),
        (tx, richer_source, "not pool"),
        (_templated(tx, version=1), sources, "must be 2 / 0"),
    ]
    for bad, srcs, reason in cases:
        assert gate._templated_pools_clean(
            _templated(bad), srcs, exp.routed, exp.encodings
        ) is None or (reason is None or reason == "must be 2 / 0")
        found = _same_verdicts(bad, srcs, exp)
        if reason is None:
            assert found == []
        else:
            assert any(reason in f for f in found), (reason, found)


def test_user_outputs_of_a_templated_transaction_are_judged_as_before(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    tx, sources, exp = _honest(builds, 4)  # token→token: token change and a token fee
    rest = list(tx.rest)
    change = next(j for j, o in enumerate(rest) if o.token is None)
    nft = TokenData(CAT_A, 0, NFT(Capability.NONE, b"\x01"))
    cases = {
        "to a stranger": [
            *rest[:change],
            TxOutput(rest[change].value, OTHER.locking_bytecode),
            *rest[change + 1 :],
        ],
        "dust": [*rest, TxOutput(10, USER.locking_bytecode)],
        "empty": [*rest[:change], TxOutput(rest[change].value, b""), *rest[change + 1 :]],
        "fee dropped": rest[:-1],
        "fee twice": [*rest, rest[-1]],
        "an nft": [*rest, TxOutput(1_000, USER.locking_bytecode, nft)],
        "a bare prefix": [*rest, TxOutput(1_000, b"\xef" + bytes(40))],
        "bought dropped": rest[1:],
        "nothing": [],
    }
    for name, outputs in cases.items():
        bad = _templated(tx, rest=outputs)
        found = _same_verdicts(bad, sources, exp)
        assert found, name


def test_fewer_templates_than_pools_is_judged_the_plain_way(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    tx, sources, exp = _honest(builds)
    plain = _plain(tx).outputs
    n = len(tx.templates)
    short = TemplatedTransaction(
        tx.inputs, tx.templates[:-1], tx.values[:-1], tx.amounts[:-1], plain[n - 1 :]
    )
    assert short.to_bytes() == tx.to_bytes()
    assert _same_verdicts(short, sources, exp) == []
    empty = TemplatedTransaction(tx.inputs, (), (), (), plain)
    assert _same_verdicts(empty, sources, exp) == []


def _one_pool_trade(
    encoded: PoolEncoding, after: PoolState
) -> tuple[TemplatedTransaction, tuple[TxOutput, ...], gate.Expectation]:
    """A transaction trading through the one pool `encoded` to `after` (its template
    re-creating it), a coin of the user's paying, and what the gate expects of it."""
    coin = TxOutput(10**8, USER.locking_bytecode)
    ins = [encoded.trade_input, TxInput(OutPoint(sha256(b"coin"), 0))]
    rest = [TxOutput(10**8 - 2_000, USER.locking_bytecode)]
    tx = TemplatedTransaction(ins, [encoded.template], [after.sats], [after.tokens], rest)
    exp = gate.Expectation(
        ((encoded.pool,), (after.sats,), (after.tokens,)),
        EncodingColumns.of_encodings((encoded,)),
        USER.locking_bytecode,
        USER.locking_bytecode,
        frozenset({USER.locking_bytecode}),
        frozenset({CAT_A}),
        None,
        10**8 - 2_000,
        None,
        None,
        1000,
        (1,),
    )
    return tx, (encoded.source_output, coin), exp


def test_a_token_less_pool_is_not_re_created_by_a_template() -> None:
    """A pool holding no token cannot be re-created by a fungible template: the fast path
    leaves it to the plain checks, which say so."""
    encoded = encode(make_pool(TOKEN_A, 100_000, 0, "token-less"))
    assert encoded.source_output.token is None
    tx, sources, exp = _one_pool_trade(encoded, PoolState(101_000, 1))
    assert gate._templated_pools_clean(tx, sources, exp.routed, exp.encodings) is None
    found = _same_verdicts(tx, sources, exp)
    assert any("does not re-create" in f for f in found)


def test_a_pool_not_standard_on_its_own_is_still_caught() -> None:
    """The policy checks skip the pools' unlocking and bytecodes only for encodings found
    standard (`PoolEncoding.standard`, once per pool): a pool whose trade input is not
    push-only, or whose bytecode is of no standard type, is judged the plain way and
    reported."""
    pool = make_pool(TOKEN_A, 100_000, 1_000, "odd")
    honest = encode(pool)
    assert honest.standard
    tx, sources, exp = _one_pool_trade(honest, PoolState(101_100, 1_000))
    assert gate._templated_pools_clean(tx, sources, exp.routed, exp.encodings)
    assert _same_verdicts(tx, sources, exp) == []

    not_push_only = TxInput(honest.trade_input.outpoint, b"\x76" + honest.trade_input.unlocking)
    assert honest.source_output.token is not None
    odd_locking = bytes(MAX_STANDARD_LOCKING_SIZE + 1)  # too long for "pay to script"
    odd_source = TxOutput(pool.sats, odd_locking, honest.source_output.token)
    odd_template = FungibleTemplate(odd_locking, CAT_A)
    cases = {
        "scriptsig-not-pushonly": honest._replace(trade_input=not_push_only),
        "scriptpubkey": honest._replace(source_output=odd_source, template=odd_template),
    }
    for reason, odd in cases.items():
        assert not standard_spend(odd.trade_input, odd.source_output, odd.template)
        odd = odd._replace(standard=False)  # as `book.encode` finds it
        tx, sources, exp = _one_pool_trade(odd, PoolState(101_100, 1_000))
        assert gate._templated_pools_clean(tx, sources, exp.routed, exp.encodings) is None
        found = _same_verdicts(tx, sources, exp)
        assert any(f"non-standard ({reason})" in f for f in found), (reason, found)
    assert any("bad-txns-nonstandard-inputs" in f for f in found)


def test_vetted_parts_are_skipped_only_where_the_checks_would_find_nothing(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    """`vetted` spares the policy checks what `standard_spend` vouched for: on honest builds
    and on ones with a non-standard user part the answers are those without it."""
    for result, exp in builds:
        tx, sources = result.tx, result.source_outputs
        assert isinstance(tx, TemplatedTransaction)
        n = len(exp.encodings.pool)
        assert all(
            standard_spend(i, s, t)
            for i, s, t in zip(tx.inputs, sources, tx.templates, strict=False)
        )
        dust = _templated(tx, rest=[*tx.rest, TxOutput(10, b"\x6a" * 300)])
        for checked in (tx, dust):
            assert standardness_errors(checked, vetted=n) == standardness_errors(checked)
            assert input_standardness_errors(
                checked, sources, vetted=n
            ) == input_standardness_errors(checked, sources)
        assert standardness_errors(dust, vetted=n)


def test_the_largest_templated_output_of_a_standard_type() -> None:
    """The dust check's one comparison assumes no templated output of a standard type is
    larger than `_LARGEST_TEMPLATED`: a bytecode of the longest standard size and the widest
    amount make exactly that."""
    widest = FungibleTemplate(bytes(MAX_STANDARD_LOCKING_SIZE), CAT_A)
    assert policy.standard_output_type(widest.locking) == "script"
    assert len(widest.output(1, MAX_TOKEN_AMOUNT).encode()) == policy._LARGEST_TEMPLATED


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 6),
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(-3, 3), st.integers(-3, 3)),
        min_size=1,
        max_size=4,
    ),
)
def test_random_tampering_gets_the_plain_gates_answer(
    k: int, changes: list[tuple[int, int, int]]
) -> None:
    book = standard_book()
    request = parse_build_params(_orders()[k], CONFIG)
    result = build(book, request, CONFIG)
    exp = gate.Expectation.for_build(result.route, request, CONFIG, result.inputs_to_sign)
    tx = result.tx
    assert isinstance(tx, TemplatedTransaction)
    values, amounts = list(tx.values), list(tx.amounts)
    for where, dv, da in changes:
        i = where % len(values)
        values[i] = max(0, values[i] + dv)
        amounts[i] = max(1, amounts[i] + da)
    bad = _templated(tx, values=values, amounts=amounts)
    found = _same_verdicts(bad, result.source_outputs, exp)
    if (values, amounts) != (list(tx.values), list(tx.amounts)):
        assert found  # every change moves a pool off its routed state
    else:
        assert found == []


def test_policy_fast_path_reports_what_the_plain_loop_reports() -> None:
    """Template outputs that are dust, above 21e14 sats, or locked by a non-standard, data or
    multisig bytecode: the same violations as the plain loop, in the same order."""
    ins = [TxInput(OutPoint(sha256(b"p"), 1), b"\x51"), TxInput(OutPoint(sha256(b"q"), 0))]
    p2sh = FungibleTemplate(_LOCK, CAT_A)
    multisig = bytes([0x51, 0x21]) + b"\x02" + bytes(32) + bytes([0x51, 0xAE])
    lockings = [
        _LOCK,
        b"\x6a\x01\x00",  # nulldata
        multisig,
        bytes(300),  # too long for "script"
        b"\x00" * 10,  # 2026 "script", non-standard in 2025
        p2pkh_locking(bytes(20)),
    ]
    rest = [TxOutput(1_000, USER.locking_bytecode), TxOutput(10, USER.locking_bytecode)]
    for locking in lockings:
        template = FungibleTemplate(locking, CAT_B)
        # Thresholds differ by size (the bytecodes' lengths): values near them take the
        # output-by-output check as well as the one-comparison one.
        for values in (
            [1_000, 1_000],
            [1_000, 10],
            [MAX_SATS + 1, 1_000],
            [2**63, 800],
            [690, 700],
            [700, 690],
            [650, 1_300],
            [1_300, 650],
        ):
            tx = TemplatedTransaction(ins, [p2sh, template], values, [5, 7], rest)
            plain = _plain(tx)
            for year in (2025, 2026):
                assert standardness_errors(tx, vm_year=year) == standardness_errors(
                    plain, vm_year=year
                )
            sources = (TxOutput(1_000, locking), TxOutput(1_000, _LOCK))
            assert input_standardness_errors(tx, sources) == input_standardness_errors(
                plain, sources
            )
            for year in (2025, 2026):
                found = input_standardness_errors(plain, sources, vm_year=year)
                unknown = [
                    i for i, o in enumerate(sources) if policy._solve(o.locking, year) is None
                ]
                assert [v.index for v in found] == unknown
    nothing = TemplatedTransaction(ins, [], [], [], [])
    assert standardness_errors(nothing) == standardness_errors(_plain(nothing))


def test_several_template_categories_are_tallied_the_plain_way(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    tx, sources, _ = _honest(builds)
    mixed = [FungibleTemplate(tx.templates[0].locking, CAT_B), *tx.templates[1:]]
    bad = _templated(tx, templates=mixed)
    assert gate.token_problems(bad, sources) == gate.token_problems(_plain(bad), sources)
    assert gate.token_problems(bad, sources)


# --- the quote's legs and prices in one pass -----------------------------------------------------


def test_legs_json_and_prices_in_one_pass_are_the_plain_ones(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    for result, _ in builds:
        q = result.route
        assert wire.quote_bytes(q) == orjson.dumps(wire.quote_doc(q))
        for hop in q.hops:
            texts, prices = legs_json_parts(hop.legs)
            assert [orjson.loads(t) for t in texts] == [wire.leg_doc(leg) for leg in hop.legs]
            assert prices is not None and prices[0] is hop.direction
            alone = dataclasses.replace(q, hops=(hop,))
            assert (prices[1], prices[2]) == alone.prices()


def test_mixed_or_mislabelled_hops_take_the_plain_prices(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    buy = builds[0][0].route  # BCH→token: one buying hop
    sell = builds[2][0].route  # token→BCH: one selling hop
    b, s = buy.hops[0], sell.hops[0]
    mixed = Hop(b.token_id, Direction.BUY, (*b.legs, *s.legs))
    mislabelled = Hop(s.token_id, Direction.BUY, s.legs)
    for hops in [(mixed,), (mislabelled,), (s, mixed), (Hop(b.token_id, Direction.SELL, b.legs),)]:
        pools = [leg.pool for hop in hops for leg in hop.legs]
        q: Quote = dataclasses.replace(buy, hops=hops, encodings=Encodings().of(pools))
        assert wire.quote_bytes(q) == orjson.dumps(wire.quote_doc(q))
    assert legs_json_parts((*b.legs, *s.legs))[1] is None
    assert legs_json_parts(())[1] is None


# --- the route's hops as columns -----------------------------------------------------------------


def test_route_hops_are_columns_and_their_legs_the_plain_ones(
    builds: list[tuple[BuildResult, gate.Expectation]],
) -> None:
    for result, exp in builds:
        q = result.route
        legs = q.legs
        assert (
            exp.routed
            == q.columns()
            == (
                tuple(leg.pool for leg in legs),
                tuple(leg.after.sats for leg in legs),
                tuple(leg.after.tokens for leg in legs),
            )
        )
        for hop in q.hops:
            assert hop.amounts() is not None  # made as columns (`Hop.of_columns`)
            plain = Hop(hop.token_id, hop.direction, hop.legs, hop.totals, hop.size)
            assert hop == plain and plain == hop and hash(hop) == hash(plain)
            assert plain.columns() == hop.columns()
            assert plain.count() == hop.count() == len(hop.legs)
            assert all(type(leg) is Leg and type(leg.after) is PoolState for leg in hop.legs)
            for again in (copy.copy(hop), pickle.loads(pickle.dumps(hop))):
                assert again == hop and again.legs == hop.legs


def test_the_daemons_path_makes_no_leg_objects(book: PoolBook) -> None:
    """Built and written out, a route's `Leg`s are never made (they are made on demand)."""
    for params in _orders():
        request = parse_build_params(params, CONFIG)
        result = build(book, request, CONFIG)
        raw = wire.build_bytes(result)
        assert result.route._legs is None
        for hop in result.route.hops:
            assert hop._legs is None  # never made
        assert raw == orjson.dumps(wire.build_doc(result))  # reads the legs, equal bytes
        assert result.route._legs is not None


def test_inputs_with_and_without_kept_bytes_serialize_as_plain() -> None:
    ins = [TxInput(OutPoint(sha256(bytes([i])), i), bytes(i % 4 * 30)) for i in range(40)]
    for i in range(0, 40, 3):
        ins[i].encode()  # some keep their bytes already, the others are new
    template = FungibleTemplate(_LOCK, CAT_A)
    tx = TemplatedTransaction(ins, [template], [1_000], [5], [])
    plain = Transaction(2, tuple(ins), (template.output(1_000, 5),), 0)
    assert tx.to_bytes() == plain.to_bytes()
    fresh = [TxInput(i.outpoint, b"\x51", i.sequence) for i in ins]
    assert (
        tx.with_inputs(fresh).to_bytes() == Transaction(2, tuple(fresh), plain.outputs).to_bytes()
    )
