"""The router's replies are byte-identical to the recorded ones (`golden_orders.py`)."""

from __future__ import annotations

import orjson

from tests.router.golden_orders import GOLDEN, entry, golden_book, orders, reply


def test_recorded_orders_cover_every_kind() -> None:
    stored = orjson.loads(GOLDEN.read_bytes())
    assert [(e["method"], e["params"]) for e in stored] == list(orders())
    assert len(stored) >= 300


def test_replies_are_byte_identical_to_the_recorded_ones() -> None:
    book = golden_book()
    stored = orjson.loads(GOLDEN.read_bytes())
    changed = []
    for want in stored:
        got = entry(want["method"], want["params"], reply(book, want["method"], want["params"]))
        if got != want:
            changed.append((want, got))
    assert not changed, f"{len(changed)} replies changed, first: {changed[0]}"
