"""The route object (the spec's "coarse route view"): one shape for the quote, a tx.build
result's `route` and the pushes. Clients of the public Cauldron router read `pools` as a pool
count; the per-pool detail is `legs`; `kind` says how the order crosses the pools."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from router import wire
from router.build import build
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.pools import BCH, PoolBook
from router.quotes import Quote, RouteKind, quote
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    TOKEN_B,
    build_params,
    funding,
    pools_from,
    standard_book,
)
from tests.router.schemas import validator

FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)
COARSE = (
    "input_amount",
    "output_amount",
    "input_is_bch",
    "output_is_bch",
    "market_pre_price",
    "market_post_price",
    "pools",
)


def _quote(book: PoolBook, sell: str, buy: str, amount: int, side: str = "sell") -> Quote:
    params = {"sell": sell, "buy": buy, "amount": str(amount), "side": side}
    return quote(book, parse_quote_params(params), FEE)


def _docs(q: Quote) -> list[dict[str, Any]]:
    """The plain document and the daemon's bytes: both must say the same."""
    docs = [wire.quote_doc(q), orjson.loads(wire.quote_bytes(q))]
    assert docs[0] == docs[1]
    for doc in docs:
        validator("quote.result.json").validate(doc)
    return docs


def _check_counts(doc: dict[str, Any], kind: str) -> None:
    assert set(COARSE) <= set(doc)
    assert doc["kind"] == kind
    assert isinstance(doc["pools"], int) and doc["pools"] == len(doc["legs"])
    assert len({(leg["txid"], leg["tx_pos"]) for leg in doc["legs"]}) == doc["pools"]


def test_one_pool_is_single() -> None:
    book = PoolBook(pools_from(TOKEN_A, [(5_000_000, 100_000)]), version=1, height=10)
    for sell, buy in ((BCH, TOKEN_A), (TOKEN_A, BCH)):
        q = _quote(book, sell, buy, 10_000 if sell == TOKEN_A else 100_000)
        assert q.kind is RouteKind.SINGLE and q.pool_count == 1
        for doc in _docs(q):
            _check_counts(doc, "single")


@pytest.mark.parametrize("side", ["sell", "buy"])
def test_many_pools_of_one_token_is_split(side: str) -> None:
    q = _quote(standard_book(), BCH, TOKEN_A, 3_000_000 if side == "sell" else 100_000_000, side)
    assert q.kind is RouteKind.SPLIT and q.pool_count == len(q.legs) > 1
    for doc in _docs(q):
        _check_counts(doc, "split")


def test_token_to_token_is_two_hop_and_counts_both_hops() -> None:
    q = _quote(standard_book(), TOKEN_A, TOKEN_B, 100_000_000)
    assert q.kind is RouteKind.TWO_HOP
    assert q.pool_count == q.hops[0].count() + q.hops[1].count()
    for doc in _docs(q):
        _check_counts(doc, "two_hop")
        assert {leg["token_id"] for leg in doc["legs"]} == {TOKEN_A, TOKEN_B}
        # sold-token units per bought-token unit: token A is ~0.02 sats, token B ~5 sats.
        assert 100 < doc["market_pre_price"] < 500


def test_a_build_route_is_the_quote_object() -> None:
    """tx.build's `route` is "the same coarse view a quote returns": the same keys and, apart
    from the build's real size and miner fee, the same values."""
    book = standard_book()
    inputs = [funding("bch", 100_000), funding("tok", 1_000, token={"category": TOKEN_A})]
    inputs[1]["token"]["amount"] = "100000000"
    for params in (
        build_params(BCH, TOKEN_A, 3_000_000, [funding("f1", 10_000_000)]),
        build_params(TOKEN_A, TOKEN_B, 100_000_000, inputs),
    ):
        result = build(book, parse_build_params(params, FEE), FEE)
        for doc in (wire.build_doc(result), orjson.loads(wire.build_bytes(result))):
            validator("tx.build.result.json").validate(doc)
            q = _quote(book, params["sell"], params["buy"], int(params["amount"]))
            plain = wire.quote_doc(q)
            assert set(doc["route"]) == set(plain)
            changed = {"estimated_size", "miner_fee_estimate_sats"}
            assert {k: v for k, v in doc["route"].items() if k not in changed} == {
                k: v for k, v in plain.items() if k not in changed
            }
