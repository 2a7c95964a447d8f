"""The follower's pure parts: header linking, parents-first ordering, the fetch pipeline, sync
progress, the structured log formats, and the snapshot's shortcut for blocks during a sync."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bch.block import Block, BlockHeader
from bch.hashes import hash256
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from devnet.blocks import coinbase_transaction
from indexer.electrum import BlockChanged, ElectrumProtocolError
from indexer.follow import (
    CASHTOKENS_HEIGHT,
    MAINNET_GENESIS,
    BlockPipeline,
    FetchedBlock,
    Progress,
    default_start_height,
    link_headers,
)
from indexer.follow.fetch import parse_checked_block
from indexer.follow.mempool import parents_first
from indexer.follow.progress import Rates, RateWindow, format_duration, status_line
from indexer.snapshot import LivePool, PendingTx, PoolSnapshot, SnapshotChange
from runtime.logs import JsonLineFormatter, KeyValueFormatter, fields

EASY_BITS = 0x207FFFFF  # regtest target: about every other hash meets it


def mined(prev: bytes, n: int = 0) -> bytes:
    """80 header bytes on top of `prev` that meet their proof of work."""
    nonce = 0
    while True:
        header = BlockHeader(1, prev, bytes([n % 256]) * 32, 1_700_000_000 + n, EASY_BITS, nonce)
        if header.check_proof_of_work():
            return header.encode()
        nonce += 1


def chain(prev: bytes, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        raw = mined(prev, i)
        out.append(raw)
        prev = hash256(raw)
    return out


# --- linking ----------------------------------------------------------------------------------


def test_headers_link_on_the_stored_tip() -> None:
    tip = hash256(mined(bytes(32)))
    headers = chain(tip, 5)
    assert link_headers(tip, 11, headers) == [(11 + i, h) for i, h in enumerate(headers)]
    assert link_headers(None, 0, headers) == [(i, h) for i, h in enumerate(headers)]
    assert link_headers(tip, 11, []) == []


def test_a_first_header_on_another_parent_means_a_fork() -> None:
    headers = chain(b"\x01" * 32, 3)
    assert link_headers(b"\x02" * 32, 7, headers) is None


def test_a_break_inside_the_headers_keeps_the_linked_prefix() -> None:
    tip = b"\x03" * 32
    first = chain(tip, 3)
    other = chain(b"\x04" * 32, 2)
    assert link_headers(tip, 1, first + other) == [(1, first[0]), (2, first[1]), (3, first[2])]


def test_a_header_without_its_proof_of_work_is_a_lying_server() -> None:
    tip = b"\x05" * 32
    nonce = 0
    while True:
        bad = BlockHeader(1, tip, bytes(32), 1_700_000_000, EASY_BITS, nonce)
        if not bad.check_proof_of_work():
            break
        nonce += 1
    with pytest.raises(ElectrumProtocolError, match="proof of work"):
        link_headers(tip, 5, [bad.encode()])


def test_the_default_start_height_is_cashtokens_activation_on_mainnet_only() -> None:
    assert default_start_height(MAINNET_GENESIS) == CASHTOKENS_HEIGHT == 792_772
    assert default_start_height("00" * 32) == 0
    assert default_start_height(None) == 0


# --- checked blocks ---------------------------------------------------------------------------


def a_block() -> tuple[bytes, bytes]:
    cb = coinbase_transaction(5, 50_000, b"\x51", 7)
    raw = Block.build([cb], prev_hash=b"\x06" * 32, time=1_700_000_000, bits=EASY_BITS)
    return raw, raw[:80]


def test_a_block_must_be_the_one_linked_and_match_its_merkle_root() -> None:
    raw, header = a_block()
    assert parse_checked_block(raw, header).hash == hash256(header)
    with pytest.raises(BlockChanged):
        parse_checked_block(raw, mined(b"\x07" * 32))
    # Same header, other transactions: the root does not match.
    cb2 = coinbase_transaction(5, 49_999, b"\x51", 7)
    forged = header + raw[80:81] + cb2.to_bytes()
    with pytest.raises(ElectrumProtocolError, match="root"):
        parse_checked_block(forged, header)
    with pytest.raises(ElectrumProtocolError, match="undecodable"):
        parse_checked_block(header + b"\x01\x00", header)


# --- the pipeline -----------------------------------------------------------------------------


def fetched(height: int, size: int = 100) -> FetchedBlock:
    return FetchedBlock(height, BlockHeader.from_bytes(mined(bytes(32))), None, (b"x",), size)


class SlowServer:
    """Answers fetches after per-height delays and records how many were in flight."""

    def __init__(self, delays: dict[int, float], size: int = 100, fail: int | None = None):
        self.delays = delays
        self.size = size
        self.fail = fail
        self.inflight = 0
        self.peak = 0
        self.started: list[int] = []
        self.cancelled: list[int] = []

    async def fetch(self, height: int, header: bytes) -> FetchedBlock:
        self.started.append(height)
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            await asyncio.sleep(self.delays.get(height, 0.001))
            if height == self.fail:
                raise BlockChanged("moved")
            return fetched(height, self.size)
        except asyncio.CancelledError:
            self.cancelled.append(height)
            raise
        finally:
            self.inflight -= 1


async def test_the_pipeline_yields_in_order_with_the_window_in_flight() -> None:
    server = SlowServer({0: 0.03, 1: 0.001, 2: 0.02, 5: 0.01})
    headers = [(h, b"") for h in range(12)]
    out = []
    async with BlockPipeline(server.fetch, headers, window=4) as pipe:
        async for block in pipe:
            out.append(block.height)
    assert out == list(range(12))
    assert server.peak == 4


async def test_big_blocks_shrink_the_window() -> None:
    server = SlowServer({}, size=50_000)
    headers = [(h, b"") for h in range(10)]
    async with BlockPipeline(
        server.fetch, headers, window=8, max_bytes=100_000, size_estimate=10_000
    ) as pipe:
        async for _ in pipe:
            pass
        assert pipe.size_estimate > 40_000
    assert server.peak <= 8
    late = SlowServer({}, size=50_000)
    async with BlockPipeline(
        late.fetch, headers, window=8, max_bytes=100_000, size_estimate=50_000
    ) as pipe:
        async for _ in pipe:
            pass
    assert late.peak == 2


async def test_a_failed_fetch_surfaces_in_turn_and_the_rest_is_cancelled() -> None:
    # Fetches after the failing one never finish by themselves (however slow the machine is),
    # so only the pipeline's cancellation can end them; the timeout turns a hang into a failure.
    server = SlowServer(dict.fromkeys(range(4, 10), 3600.0), fail=3)
    headers = [(h, b"") for h in range(10)]
    got = []
    async with asyncio.timeout(30):
        with pytest.raises(BlockChanged):
            async with BlockPipeline(server.fetch, headers, window=5) as pipe:
                async for block in pipe:
                    got.append(block.height)
    assert got == [0, 1, 2]
    assert set(server.cancelled) == set(server.started) - {0, 1, 2, 3}
    assert server.cancelled and server.inflight == 0


def test_the_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        BlockPipeline(SlowServer({}).fetch, [], window=0)


# --- parents first ----------------------------------------------------------------------------


def tx_spending(*parents: bytes, tag: int = 0) -> Transaction:
    inputs = [TxInput(OutPoint(p, 0)) for p in parents] or [TxInput(OutPoint(bytes(32), tag))]
    return Transaction.build(inputs, [TxOutput(1_000 + tag, b"\x51")])


@given(st.randoms(use_true_random=False), st.integers(1, 12))
def test_parents_come_before_their_children(rng: object, n: int) -> None:
    import random

    assert isinstance(rng, random.Random)
    txs: list[Transaction] = []
    for i in range(n):
        parents = rng.sample([t.txid for t in txs], k=min(len(txs), rng.randint(0, 2)))
        txs.append(tx_spending(*parents, tag=i))
    shuffled = txs[:]
    rng.shuffle(shuffled)
    order = parents_first({t.txid: t for t in shuffled})
    assert sorted(order) == sorted(t.txid for t in txs)
    position = {txid: i for i, txid in enumerate(order)}
    for t in txs:
        for inp in t.inputs:
            if inp.outpoint.txid in position:
                assert position[inp.outpoint.txid] < position[t.txid]


# --- progress ---------------------------------------------------------------------------------


def test_durations_read_compactly() -> None:
    assert [format_duration(s) for s in (None, 0, 44.6, 185, 7_620, 3 * 86_400 + 4 * 3600)] == [
        "?",
        "0s",
        "45s",
        "3m05s",
        "2h07m",
        "3d04h",
    ]


def test_rates_come_from_the_window() -> None:
    w = RateWindow(window=10.0)
    assert w.rates(100) == Rates(None, None, None)
    w.add(0.0, 0, 0)
    for t in range(1, 21):
        w.add(float(t), 2 if t <= 10 else 4, 10)  # faster in the second half
    rates = w.rates(400)
    assert rates.blocks_per_s is not None
    assert rates.blocks_per_s == pytest.approx(4.0, rel=0.15)
    assert rates.txs_per_s == pytest.approx(10.0)
    assert rates.eta_s == pytest.approx(400 / rates.blocks_per_s)
    line = status_line(500, 1000, Rates(12.5, 340.0, 40.0))
    assert line == "sync: height 500/1,000 (50.0%)  12.5 blocks/s  340.0 tx/s  ETA 40s"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drive(progress: Progress, clock: FakeClock, blocks: int) -> None:
    progress.begin(-1, blocks - 1)
    for h in range(blocks):
        clock.now += 0.1
        progress.block(h, 5)
    progress.end()


def test_a_terminal_gets_one_redrawn_status_line() -> None:
    out = io.StringIO()
    clock = FakeClock()
    drive(Progress(stream=out, tty=True, every=1.0, clock=clock), clock, 50)
    text = out.getvalue()
    frames = text.split("\r\x1b[K")[1:]
    assert len(frames) >= 4 and text.endswith("\n")
    assert frames[-1].startswith("sync: height 49/49 (100.0%)")
    assert "10.0 blocks/s  50.0 tx/s" in frames[2]
    assert "ETA" in frames[0]


def test_without_a_terminal_progress_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    clock = FakeClock()
    caplog.set_level(logging.INFO, logger="indexer.follow")
    drive(Progress(stream=out, tty=False, every=1.0, clock=clock), clock, 50)
    assert out.getvalue() == ""
    events = [getattr(r, "fields", {}) for r in caplog.records]
    kinds = [e.get("event") for e in events]
    assert kinds[0] == "sync_start" and kinds[-1] == "sync_done" and "sync" in kinds
    sync = next(e for e in events if e.get("event") == "sync")
    assert sync["blocks_per_s"] == pytest.approx(10.0) and sync["tip"] == 49
    assert events[-1]["blocks"] == 50 and events[-1]["txs"] == 250


def test_a_short_catch_up_reports_nothing(caplog: pytest.LogCaptureFixture) -> None:
    out = io.StringIO()
    clock = FakeClock()
    caplog.set_level(logging.INFO, logger="indexer.follow")
    drive(Progress(stream=out, tty=True, min_blocks=10, clock=clock), clock, 3)
    assert out.getvalue() == "" and not caplog.records


# --- log formats ------------------------------------------------------------------------------


def record(msg: str, **values: object) -> logging.LogRecord:
    rec = logging.LogRecord("indexer.follow", logging.WARNING, __file__, 1, msg, (), None)
    for key, value in fields(**values).items():
        setattr(rec, key, value)
    return rec


@pytest.mark.parametrize("make", [JsonLineFormatter, KeyValueFormatter])
def test_log_lines_carry_the_fields(make: Callable[[], logging.Formatter]) -> None:
    line = make().format(record("reorg", event="reorg", fork=812, why="a b=c"))
    assert "\n" not in line
    if isinstance(make(), JsonLineFormatter):
        obj = json.loads(line)
        assert obj["msg"] == "reorg" and obj["level"] == "warning"
        assert obj["logger"] == "indexer.follow" and obj["ts"].endswith("Z")
        assert (obj["event"], obj["fork"], obj["why"]) == ("reorg", 812, "a b=c")
    else:
        assert (
            line.split(" ", 1)[1]
            == 'warning indexer.follow: reorg event=reorg fork=812 why="a b=c"'
        )


# --- the snapshot during a sync ---------------------------------------------------------------


def live_pool(n: int, token: int, sats: int) -> LivePool:
    op = OutPoint(n.to_bytes(32, "little"), n % 3)
    return LivePool(op, op, bytes(20), f"{token:064x}", sats, 1_000 + n, n)


blocks_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 200), max_size=6), st.lists(st.integers(0, 3), max_size=6)),
    min_size=1,
    max_size=25,
)


@given(blocks_strategy)
def test_blocks_without_a_mempool_change_the_snapshot_like_with_one(
    blocks: list[tuple[list[int], list[int]]],
) -> None:
    """`apply_block` with nothing pending (the initial sync) takes a shortcut; a snapshot with
    one unrelated pending transaction takes the general path. Both must see the same pools and
    publish the same changes for the block's tokens."""
    alone, general = PoolSnapshot(), PoolSnapshot()
    unrelated = live_pool(10**6, 99, 5)
    assert general.add_pending(PendingTx(b"\xee" * 32, (), (unrelated,)))
    feeds: dict[int, list[SnapshotChange]] = {id(alone): [], id(general): []}
    alone.subscribe(feeds[id(alone)].append)
    general.subscribe(feeds[id(general)].append)
    model: dict[OutPoint, LivePool] = {}
    serial = 0
    for height, (spend, tokens) in enumerate(blocks, 1):
        live = sorted(model, key=lambda op: op.txid)
        removed = [live[i % len(live)] for i in spend] if live else []
        added = []
        for token in tokens:
            serial += 1
            added.append(live_pool(serial, token, 10_000 + serial))
        for op in removed:
            model.pop(op, None)
        model.update((p.outpoint, p) for p in added)
        feeds[id(alone)].clear()
        feeds[id(general)].clear()
        for snap in (alone, general):
            snap.apply_block(removed, added, [], height=height)
        assert {p.outpoint: p for p in alone.all_pools()} == model
        assert {p.outpoint: p for p in general.all_pools() if p != unrelated} == model
        assert alone.height == general.height == height

        def net(changes: list[SnapshotChange]) -> dict[str, tuple[set[LivePool], set[LivePool]]]:
            return {c.token: (set(c.added), set(c.removed)) for c in changes}

        assert net(feeds[id(alone)]) == net(feeds[id(general)])
        assert {t for t, ps in ((t, alone.pools(t)) for t in alone.tokens()) if ps} == {
            p.token_id for p in model.values()
        }
