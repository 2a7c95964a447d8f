"""Lag behind the best tip heard (`indexer.freshness`), what the tip watch keeps of the tips
announced, and its copy in the index for other processes (`indexer.store.heard`), on real
SQLite."""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from indexer.electrum import HeaderNotice, ServerAddress
from indexer.freshness import Bound, Heard, lag_of, merged
from indexer.index import open_store
from indexer.store.heard import DEAD_AFTER, read_heard, write_heard
from indexer.tipwatch import TipWatch

H = "ab" * 32


def heard(*tips: tuple[int, float], connected: int = 1, offline: float | None = None) -> Heard:
    return Heard({h: (H, 1_700_000_000 + h, at) for h, at in tips}, 2, connected, offline)


def test_an_index_at_the_best_tip_with_a_server_does_not_lag() -> None:
    lag = lag_of(10, heard((9, 100.0), (10, 200.0)), now=1000.0)
    assert (lag.best_height, lag.lag_blocks, lag.lag_seconds) == (10, 0, 0.0)
    assert lag.best_time == 1_700_000_010 and not Bound().stale(lag)


def test_lag_seconds_count_from_the_first_block_the_index_lacks() -> None:
    lag = lag_of(8, heard((9, 100.0), (10, 200.0), (11, 300.0)), now=350.0)
    assert (lag.lag_blocks, lag.lag_seconds) == (3, 250.0)
    assert Bound(max_lag_blocks=3, max_lag_seconds=300).stale(lag) is False
    assert Bound(max_lag_blocks=2, max_lag_seconds=300).stale(lag) is True
    assert Bound(max_lag_blocks=3, max_lag_seconds=200).stale(lag) is True


def test_no_server_connected_ages_even_an_index_at_the_last_tip_heard() -> None:
    lag = lag_of(10, heard((10, 100.0), connected=0, offline=500.0), now=540.0)
    assert (lag.lag_blocks, lag.lag_seconds, lag.connected) == (0, 40.0, 0)
    assert Bound(max_lag_seconds=30).stale(lag)


def test_nothing_ever_heard_is_stale_once_the_servers_are_away_long_enough() -> None:
    lag = lag_of(None, Heard({}, 1, 0, 100.0), now=200.0)
    assert lag.best_height is None and lag.lag_seconds == 100.0 and Bound().stale(lag)
    assert Bound().stale(lag_of(5, Heard({}, 1, 1, None), now=1.0))  # connected, unknown tip


def test_watches_side_by_side_count_as_one() -> None:
    electrum = Heard({10: ("aa" * 32, 1, 50.0), 11: ("bb" * 32, 2, 80.0)}, 2, 0, 90.0)
    node = Heard({11: ("cc" * 32, 2, 70.0)}, 1, 1, None)
    both = merged([electrum, node])
    # The earlier hearing of a height wins; servers and connections add up; one connected
    # watch means the whole is online.
    assert both.tips == {10: ("aa" * 32, 1, 50.0), 11: ("cc" * 32, 2, 70.0)}
    assert (both.servers, both.connected, both.offline_since) == (3, 1, None)
    # With none connected, offline since the last of them went away.
    down = merged([electrum, Heard({}, 1, 0, 120.0)])
    assert (down.connected, down.offline_since) == (0, 120.0)
    assert merged([]) == Heard({}, 0, 0, None)


async def test_the_tips_heard_round_trip_through_the_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    store = await open_store(path)  # migrates, `heard` #1 included
    await store.close()
    state = heard((7, 10.0), (8, 20.0), offline=None)
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        assert await read_heard(conn, 30.0) is None  # never written
        await write_heard(conn, state, now=30.0)
        assert await read_heard(conn, 31.0) == state
        # Not rewritten for longer than DEAD_AFTER: the indexer is gone, so is every server.
        late = await read_heard(conn, 30.0 + DEAD_AFTER + 1)
        assert late == Heard(state.tips, 2, 0, 30.0)


def notice(height: int, nonce: int = 0) -> HeaderNotice:
    header = bytes(68) + (1_700_000_000 + height).to_bytes(4, "little") + bytes(4)
    return HeaderNotice(height, header + nonce.to_bytes(4, "little"))


async def test_the_watch_keeps_the_best_tip_any_server_announced() -> None:
    a, b = ServerAddress.parse("tcp://127.0.0.1:1"), ServerAddress.parse("tcp://127.0.0.1:2")
    clock = iter(range(100, 200))
    watch = TipWatch([a, b], clock=lambda: float(next(clock)))
    watch.record(a, notice(10))
    watch.record(b, notice(12))
    watch.record(a, notice(11))  # a lags b: b's tip stays the best
    heard = watch.heard()
    assert heard.best_height == 12 and heard.tips[12][1] == 1_700_000_012
    watch.record(b, notice(12))  # heard again: still dated when first heard
    assert watch.heard().tips[12] == heard.tips[12]
    watch.record(b, notice(11, nonce=1))  # b went back (a reorg): nobody claims 12 any more
    heard = watch.heard()
    assert heard.best_height == 11 and heard.tips[11][0] == notice(11, 1).hash_hex
