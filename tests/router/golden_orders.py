"""Recorded router replies: a deterministic book, a few hundred orders, their reply bytes.

The replies are what the daemon puts after `"result":` (or `"error":`) for `quote` and
`tx.build`, so a change anywhere in routing, building or JSON emission that alters a byte
shows up in `test_golden_replies.py`. Regenerate (only for an intended change, and say why in
the commit) with

    .venv/bin/python -m tests.router.golden_orders
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from bch.hashes import sha256
from router import wire
from router.build import build
from router.errors import RouterError
from router.params import RouterConfig, parse_build_params, parse_quote_params
from router.pools import Pool, PoolBook
from router.quotes import quote
from tests.router.helpers import FEE_WALLET, build_params, funding, txid

GOLDEN = Path(__file__).parent / "golden" / "replies.json"

BIG = sha256(b"golden: 400-pool token").hex()
MID = sha256(b"golden: 30-pool token").hex()
SOLO = sha256(b"golden: 1-pool token").hex()
EDGE = sha256(b"golden: width-edge token").hex()
UNKNOWN = sha256(b"golden: no pools").hex()

CONFIG = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)


def _pools(token: str, n: int, sats: tuple[int, int], price: float, seed: int) -> list[Pool]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        x = rng.randint(*sats)
        p = price * rng.uniform(0.9, 1.1)
        label = f"{token}:{i}"
        out.append(
            Pool(txid(label), i % 3, sha256(label.encode())[:20], token, x, max(2, int(x / p)))
        )
    return out


def golden_book() -> PoolBook:
    edge = [
        Pool(txid("edge0"), 0, sha256(b"e0")[:20], EDGE, 90_000, 250),
        Pool(txid("edge1"), 1, sha256(b"e1")[:20], EDGE, 5_000_000, 65_530),
        Pool(txid("edge2"), 0, sha256(b"e2")[:20], EDGE, 40_000_000, 2**32 - 10),
        Pool(txid("edge3"), 2, sha256(b"e3")[:20], EDGE, 3_000, 40),
    ]
    pools = (
        _pools(BIG, 400, (200_000, 4_000_000), 0.02, 1)
        + _pools(MID, 30, (1_000_000, 5_000_000), 5.0, 2)
        + _pools(SOLO, 1, (10_000_000, 10_000_000), 300.0, 3)
        + edge
    )
    return PoolBook(pools, version=19, height=900_019)


def _amounts(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    """`n` amounts spread log-uniformly over [lo, hi], plus both ends."""
    ratio = hi / lo
    return sorted({lo, hi, *(int(lo * ratio ** rng.random()) for _ in range(n))})


def orders() -> Iterator[tuple[str, dict[str, Any]]]:
    """(method, params) in a fixed order."""
    rng = random.Random(19)
    rich = funding("rich", 2_000_000_000_000)
    small = funding("small", 30_000)

    def tok(token: str, amount: int) -> dict[str, Any]:
        return funding(f"tok:{token}", 5_000, token={"category": token, "amount": str(amount)})

    # (sell, buy, side, amount range): the amount ranges run from "too little" past "too much".
    kinds: list[tuple[str, str, str, int, int, int]] = [
        ("bch", BIG, "sell", 50, 2_000_000_000, 26),
        ("bch", BIG, "buy", 1, 80_000_000_000, 22),
        (BIG, "bch", "sell", 1, 90_000_000_000, 22),
        (BIG, "bch", "buy", 300, 900_000_000, 20),
        ("bch", MID, "sell", 100, 300_000_000, 14),
        (MID, "bch", "sell", 10, 50_000_000, 14),
        (MID, "bch", "buy", 500, 200_000_000, 10),
        ("bch", SOLO, "sell", 100, 20_000_000, 8),
        (SOLO, "bch", "buy", 600, 12_000_000, 8),
        (BIG, MID, "sell", 1_000, 50_000_000_000, 16),
        (MID, BIG, "sell", 100, 30_000_000, 14),
        (MID, BIG, "buy", 100, 10_000_000_000, 10),
        ("bch", EDGE, "sell", 10, 60_000_000, 10),
        (EDGE, "bch", "sell", 1, 2**33, 12),
        (EDGE, "bch", "buy", 600, 45_000_000, 8),
    ]
    for sell, buy, side, lo, hi, n in kinds:
        for i, amount in enumerate(_amounts(rng, lo, hi, n)):
            q: dict[str, Any] = {"sell": sell, "buy": buy, "amount": str(amount), "side": side}
            if i % 3 == 1:
                q["fee_per_byte"] = [1.5, 20, 3.3][i % 9 // 3]
            yield "quote", q
            inputs = [rich] if sell == "bch" else [tok(sell, 2**62), rich]
            extra: dict[str, Any] = {k: v for k, v in q.items() if k == "fee_per_byte"}
            if i % 4 == 2:
                extra["min_output"] = "1"
            if i % 7 == 3:
                extra["min_output"] = str(10**15)  # slippage unless the order fails first
            yield "tx.build", build_params(sell, buy, amount, inputs, side=side, **extra)
            if i % 5 == 0:  # not enough funds
                short = [small] if sell == "bch" else [tok(sell, max(1, amount // 2)), small]
                yield "tx.build", build_params(sell, buy, amount, short, side=side)
    for params in (
        {"sell": "bch", "buy": UNKNOWN, "amount": "1000"},
        {"sell": "bch", "buy": "bch", "amount": "1000"},
        {"sell": "bch", "buy": BIG, "amount": "0"},
        {"sell": "bch", "buy": BIG, "amount": "12", "side": "sideways"},
        {"sell": "bch", "buy": BIG},
        {"sell": "bch", "buy": BIG, "amount": "1000", "fee_per_byte": 0},
    ):
        yield "quote", params
        yield "tx.build", {**params, "receive_addr": "x", "change_addr": "y", "funding": [rich]}


def reply(book: PoolBook, method: str, params: dict[str, Any]) -> bytes:
    """The reply's `result` (or `error`) bytes exactly as the daemon sends them."""
    try:
        if method == "quote":
            return wire.quote_bytes(quote(book, parse_quote_params(params), CONFIG))
        request = parse_build_params(params, CONFIG)
        return wire.build_bytes(build(book, request, CONFIG))
    except RouterError as err:
        return b'{"error":' + orjson.dumps(err.to_json()) + b"}"


INLINE = 2_000  # replies up to this many bytes are stored whole, longer ones as their SHA-256


def entry(method: str, params: dict[str, Any], data: bytes) -> dict[str, Any]:
    stored: dict[str, Any] = {"method": method, "params": params, "bytes": len(data)}
    if len(data) <= INLINE:
        stored["reply"] = data.decode()
    else:
        stored["sha256"] = sha256(data).hex()
    return stored


def record() -> list[dict[str, Any]]:
    book = golden_book()
    return [entry(m, p, reply(book, m, p)) for m, p in orders()]


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    entries = record()
    GOLDEN.write_bytes(orjson.dumps(entries, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"{len(entries)} replies written to {GOLDEN}")
