"""The small pure pieces: conditional and encoding headers, integer parsing, candle buckets
merging in any order."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rest.candles import HOUR, Bucket, fold, ordered
from rest.declare import parse_int
from rest.middleware import accepts_gzip, etag_matches
from runtime.errors import ApiError


def test_etag_comparison_is_weak_and_accepts_lists() -> None:
    etag = 'W/"12.abc.def"'
    assert etag_matches('W/"12.abc.def"', etag)
    assert etag_matches('"12.abc.def"', etag)
    assert etag_matches('"x", W/"12.abc.def"', etag)
    assert etag_matches("*", etag)
    assert not etag_matches('W/"12.abc.deg"', etag)
    assert not etag_matches("", etag)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("deflate, gzip;q=0.5", True),
        ("gzip;q=0", False),
        ("GZIP", True),
        ("br", False),
        ("*", True),
        ("gzip;q=abc", False),
    ],
)
def test_accept_encoding(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected


@pytest.mark.parametrize("text", ["-1", "1.0", "1e3", " 1", "+1", "0x1", "", "١٢"])
def test_integers_are_plain_digits(text: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_int("n", text)
    assert err.value.status == 400 and err.value.fields["parameter"] == "n"


def test_integer_digits() -> None:
    assert parse_int("n", "0") == 0
    assert parse_int("n", "007") == 7
    with pytest.raises(ApiError):
        parse_int("n", "9" * 40)


points = st.lists(
    st.tuples(
        st.integers(0, 10 * HOUR),  # time
        st.integers(0, 50),  # height
        st.integers(1, 20),  # position
        st.integers(1, 10**9),  # volume_sats
        st.integers(1, 10**12),  # volume_tokens
    ),
    max_size=60,
    unique_by=lambda p: (p[1], p[2]),
)


@given(points, st.sampled_from([HOUR, 2 * HOUR, 3 * HOUR]), st.randoms())
def test_hourly_buckets_merge_to_the_direct_fold(
    trades: list[tuple[int, int, int, int, int]], step: int, rnd: random.Random
) -> None:
    """Folding trades straight into `step` buckets equals folding them into hours (in any
    order) and merging the hours (in any order)."""
    direct: dict[int, Bucket] = {}
    fold(direct, step, trades)
    shuffled = list(trades)
    rnd.shuffle(shuffled)
    hours: dict[int, Bucket] = {}
    fold(hours, HOUR, shuffled)
    merged: dict[int, Bucket] = {}
    keys = list(hours)
    rnd.shuffle(keys)
    for t in keys:
        at = t - t % step
        if at in merged:
            merged[at].merge(hours[t])
        else:
            merged[at] = hours[t].copy(at)
    assert [b.candle() for b in ordered(merged)] == [b.candle() for b in ordered(direct)]


def test_response_cache_is_bounded_by_entries_and_bytes() -> None:
    from rest.cache import Entry, ResponseCache
    from rest.db import IndexVersion

    tip = IndexVersion(1, "ab" * 32, 0, 0)
    cache = ResponseCache(size=3, max_bytes=1000)
    for i in range(5):
        cache.put(i, Entry(tip, b"x" * 100, "e"))
    assert len(cache) == 3 and cache.get(0, tip) is None and cache.get(4, tip) is not None
    cache.put("big", Entry(tip, b"x" * 450, "e"))  # weighs 900: the others must make room
    assert len(cache) == 1 and cache.bytes == 900
    cache.put("huge", Entry(tip, b"x" * 600, "e"))  # over the whole budget: not kept
    assert cache.get("huge", tip) is None and cache.get("big", tip) is not None
    other = IndexVersion(2, "cd" * 32, 0, 0)
    assert cache.get("big", other) is None  # another version: a miss
