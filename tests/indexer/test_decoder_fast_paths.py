"""The block path's shortcuts against the plain computations they stand for: the month of a
block time, the trade funder's key hash, a head's `txid ‖ 00000000` search, the pool inputs'
trade path read in place, and the parents-first order of a block's candidates."""

from __future__ import annotations

import hashlib
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from bch.block import LeanInput, LeanTx
from bch.hashes import hash160
from bch.script import push_data
from bch.tx import OutPoint
from indexer.decoders.cauldron.decode import decode_order, month_of, p2pkh_spender
from indexer.decoders.registry.decoder import _holds_output0
from indexer.store.decoder import BlockTx
from protocols.cauldron.contract import REDEEM_SUFFIX, TRADE_UNLOCK_LEN, trade_unlocking
from protocols.cauldron.detect import pool_inputs, pool_spend_pkh

_ZERO4 = bytes(4)


@given(st.integers(min_value=-(10**10), max_value=10**11))
def test_month_of_matches_strftime(unix_time: int) -> None:
    for t in (unix_time, unix_time // 86400 * 86400, unix_time // 86400 * 86400 - 1):
        assert month_of(t) == time.strftime("%Y-%m", time.gmtime(t))


def test_month_of_at_month_ends() -> None:
    # 2024-02-29 23:59:59 UTC and the next second; then the last second of 2023.
    assert (month_of(1709251199), month_of(1709251200)) == ("2024-02", "2024-03")
    assert (month_of(1704067199), month_of(1704067200)) == ("2023-12", "2024-01")


def test_p2pkh_spender_hashes_each_key_once_and_alike() -> None:
    """The second read of a key is the cache's: the same hash160 as computed from the key."""
    sig = bytes(71)
    for lead in (2, 3):
        key = bytes((lead,)) + hashlib.sha256(bytes((lead,))).digest()
        unlocking = push_data(sig) + push_data(key)
        expected = hashlib.new("ripemd160", hashlib.sha256(key).digest()).digest()
        assert p2pkh_spender(unlocking) == expected
        assert p2pkh_spender(unlocking) == expected == hash160(key)
    long_key = b"\x04" + bytes(range(64))
    assert p2pkh_spender(push_data(sig) + push_data(long_key)) == hash160(long_key)
    assert p2pkh_spender(push_data(sig) + push_data(b"\x05" + bytes(32))) is None


@settings(max_examples=200, deadline=None)
@given(
    st.binary(min_size=32, max_size=32),
    st.lists(st.binary(max_size=40), max_size=6),
    st.lists(st.integers(0, 3), max_size=4),
)
def test_holds_output0_is_the_outpoint_search(
    txid: bytes, fillers: list[bytes], plants: list[int]
) -> None:
    """Hits of the txid at other indexes, at the very end, overlapping: same answer as
    searching `txid ‖ 00000000` itself."""
    tails = [_ZERO4, b"\x01\x00\x00\x00", b"\x00\x00\x00", b""]
    raw = b""
    for i, filler in enumerate(fillers):
        raw += filler
        if i < len(plants):
            raw += txid + tails[plants[i]]
    assert _holds_output0(raw, txid) == (txid + _ZERO4 in raw)


def test_holds_output0_past_a_hit_at_another_index() -> None:
    txid = bytes(range(32))
    assert _holds_output0(txid + b"\x02\x00\x00\x00" + txid + _ZERO4, txid)
    assert not _holds_output0(txid + b"\x02\x00\x00\x00" + txid + bytes(3), txid)


_UNLOCKING = st.one_of(
    st.binary(max_size=80),
    st.builds(trade_unlocking, st.binary(min_size=20, max_size=20)),
    st.builds(lambda b: b + REDEEM_SUFFIX, st.binary(max_size=80)),
    st.builds(
        lambda pkh, at, byte: _mutate(trade_unlocking(pkh), at, byte),
        st.binary(min_size=20, max_size=20),
        st.integers(0, TRADE_UNLOCK_LEN - 1),
        st.integers(0, 255),
    ),
    st.builds(
        lambda lead, pkh: lead + trade_unlocking(pkh),
        st.binary(min_size=1, max_size=74),
        st.binary(min_size=20, max_size=20),
    ),
)


def _mutate(data: bytes, at: int, byte: int) -> bytes:
    return data[:at] + bytes((byte,)) + data[at + 1 :]


@settings(max_examples=300, deadline=None)
@given(st.lists(_UNLOCKING, max_size=6))
def test_pool_inputs_is_pool_spend_pkh_per_input(unlockings: list[bytes]) -> None:
    """The trade path read in place finds what `pool_spend_pkh` finds, input by input."""
    tx = LeanTx(2, [LeanInput(OutPoint(bytes(32), i), u) for i, u in enumerate(unlockings)], [])
    expected = [
        (i, pkh, len(u) == TRADE_UNLOCK_LEN)
        for i, u in enumerate(unlockings)
        if (pkh := pool_spend_pkh(u)) is not None
    ]
    assert pool_inputs(tx) == expected


def _tx(n: int, parents: list[tuple[int, int]]) -> BlockTx:
    txid = n.to_bytes(32, "little")
    inputs = [LeanInput(OutPoint(p.to_bytes(32, "little"), vout), b"") for p, vout in parents]
    return BlockTx(n, txid, LeanTx(2, inputs, []))  # type: ignore[arg-type]


def test_decode_order_parents_first_then_block_order() -> None:
    """A child spending two outputs of one parent, a child of two parents listed out of block
    order, a transaction spending its own txid's outpoint, and outsiders (not candidates)."""
    txs = [
        _tx(1, [(5, 0), (5, 1), (99, 0)]),  # two outputs of 5; 99 is not a candidate
        _tx(2, [(4, 0), (3, 0)]),  # parents 4 and 3: 3 comes first (block order)
        _tx(3, [(3, 7)]),  # its own txid: not its parent
        _tx(4, []),
        _tx(5, [(4, 1)]),
    ]
    order = [t.position for t in decode_order(txs)]
    assert order == [4, 5, 1, 3, 2]
    for done, t in enumerate(order):
        parents = {op.outpoint.txid for op in txs[t - 1].view.inputs} - {txs[t - 1].txid}
        placed = {txs[p - 1].txid for p in order[:done]}
        assert parents & {x.txid for x in txs} <= placed
