"""`ladle rest --workers 2` as a process over one index that grows under it: both workers give
the same bodies and ETags for the same index state and both move on a new block; a worker
killed with SIGKILL is restarted while the other answers; the parent's SIGTERM stops them all,
and its SIGKILL takes them down with it. `--nice N` puts every worker, a restarted one too, at
that scheduling niceness.

A request reaches the chosen worker over a kept-alive connection that worker accepted: each
worker listens on its own socket of the port (SO_REUSEPORT), so which one gets a new connection
is the kernel's choice; /proc tells which worker holds it. A `/health` probe (no side effect:
it is exempt from the rate limit) finds such a connection before the request is sent on it, and
the answer is checked to have come over that same connection."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from indexer.index import open_store
from tests.indexer.test_store_scenario import CATEGORIES, Scenario, apply_all, rev
from tests.runtime.procs import alive, children, cmdline, descendants, established_on, peers_on

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Rest:
    proc: asyncio.subprocess.Process
    url: str
    # Per worker: a client and the connection (its network stream) that worker accepted.
    clients: dict[int, tuple[httpx.AsyncClient, Any]] = field(default_factory=dict)

    def workers(self) -> list[int]:
        """The worker processes: the children of the pool's fork server."""
        for child in children(self.proc.pid):
            if any("forkserver" in part for part in cmdline(child)):
                return children(child)
        return []

    async def get(
        self, worker: int, path: str, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """`path` answered by `worker` alone."""
        for _ in range(50):  # each new connection goes to another worker at 1 − 1/N
            client, known = self.clients.pop(worker, None) or (_client(self.url), None)
            try:
                stream = (await client.get("/health")).extensions["network_stream"]
                holder = worker if stream is known else self._holder(stream, worker)
                if holder == worker:
                    response = await client.get(path, headers=headers)
                    if response.extensions["network_stream"] is stream:  # the same connection
                        self.clients[worker] = (client, stream)
                        return response
                elif holder is not None and holder not in self.clients:
                    self.clients[holder] = (client, stream)  # for a request to that worker
                    continue
            except httpx.TransportError:
                pass  # a kept-alive connection the worker closed (idle, or the worker killed)
            await client.aclose()
        raise AssertionError(f"worker {worker} never answered {path}")

    def _holder(self, stream: Any, likely: int) -> int | None:
        """The worker that accepted the connection `stream` is the client end of, if any
        (`likely` looked at first: reading a process's sockets in /proc takes a while)."""
        client_port = stream.get_extra_info("client_addr")[1]
        port = int(self.url.rsplit(":", 1)[1])
        workers = sorted(self.workers(), key=lambda w: w != likely)
        return next((w for w in workers if client_port in peers_on(w, port)), None)

    async def close_clients(self) -> None:
        for client, _ in self.clients.values():
            await client.aclose()
        self.clients.clear()


def _client(url: str) -> httpx.AsyncClient:
    """A client of one kept-alive connection at a time."""
    return httpx.AsyncClient(base_url=url, timeout=10, limits=httpx.Limits(max_connections=1))


@asynccontextmanager
async def ladle_rest(
    db: Path, workers: int = 2, nice: int = 0, rate_limit: int = 0
) -> AsyncIterator[Rest]:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "ladle", "rest", "--db", str(db), "--port", "0"),
        *("--workers", str(workers), "--rate-limit", str(rate_limit), "--stale-after", "0"),
        *("--nice", str(nice)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=ROOT,
    )
    rest = None
    try:
        assert proc.stdout is not None
        ready = orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 60))
        assert ready["workers"] == workers and ready["db"] == str(db)
        rest = Rest(proc, ready["rest"])
        assert len(rest.workers()) == workers
        yield rest
    finally:
        if rest is not None:
            await rest.close_clients()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def wait_until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)


def paths() -> list[str]:
    token = rev(CATEGORIES[0]).hex()
    return [
        "/dex/contract/count",
        f"/tokenpool/pool/active?token={token}",
        f"/dex/price/{token}/candlesticks?start=0&end=4000000000&stepsize=86400",
        "/dex/tx/latest?limit=5",
    ]


async def test_workers_agree_on_bodies_and_etags_and_move_together(tmp_path: Path) -> None:
    scenario = Scenario(seed=41)
    for _ in range(16):
        scenario.next_block(actions=6)
    db = tmp_path / "index.sqlite"
    store = await open_store(db)
    try:
        await apply_all(store, scenario.blocks[:10])
        async with ladle_rest(db) as rest:
            a, b = rest.workers()
            before = {}
            for path in paths():
                ra, rb = await rest.get(a, path), await rest.get(b, path)
                assert ra.status_code == rb.status_code == 200, (path, ra.text)
                assert ra.headers["x-index-height"] == "10"
                assert (ra.content, ra.headers["etag"]) == (rb.content, rb.headers["etag"])
                before[path] = ra.headers["etag"]

            await apply_all(store, scenario.blocks[10:])

            async def both_moved() -> bool:
                heights = [(await rest.get(w, "/health")).json()["index_height"] for w in (a, b)]
                return heights == [16, 16]

            await wait_until(both_moved)
            for path in paths():
                ra, rb = await rest.get(a, path), await rest.get(b, path)
                assert (ra.content, ra.headers["etag"]) == (rb.content, rb.headers["etag"])
                assert ra.headers["x-index-height"] == "16"
                assert ra.headers["etag"] != before[path], path
                # A client holding the old ETag gets the new answer from either worker.
                old = {"If-None-Match": before[path]}
                for w in (a, b):
                    assert (await rest.get(w, path, old)).status_code == 200, path
    finally:
        await store.close()


async def test_connections_are_spread_over_the_workers(tmp_path: Path) -> None:
    """A burst of connections (a load balancer's pool, a benchmark's) lands on every worker,
    not on whichever wakes first: each worker listens on its own socket of the port. The
    burst arrives while both workers are stopped, so it waits whole in the kernel's queues."""
    db = tmp_path / "index.sqlite"
    store = await open_store(db)
    await store.close()
    async with ladle_rest(db) as rest:
        host, port = rest.url.removeprefix("http://").rsplit(":", 1)
        workers = rest.workers()
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        try:
            burst = [await asyncio.open_connection(host, int(port)) for _ in range(16)]
            for _, writer in burst:
                writer.write(f"GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        finally:
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
        try:
            for reader, _ in burst:
                status = await asyncio.wait_for(reader.readline(), 10)
                assert status.startswith(b"HTTP/1.1 200"), status
            held = [established_on(w, int(port)) for w in workers]
            # Each connection is held by the worker that accepted it: all 16, on both (every
            # one on the same worker: a chance of 2 in 65,536 if the kernel spreads them).
            assert sum(held) == 16 and min(held) >= 1, held
        finally:
            for _, writer in burst:
                writer.close()


async def test_the_rate_limit_is_one_for_all_workers(tmp_path: Path) -> None:
    """A client gets `--rate-limit` requests a minute from the server, not from each worker:
    a burst of connections spread over both workers passes the limit's burst and no more, and
    a worker that replaces a killed one goes on with the same buckets (the parent's table
    file, mapped by every worker and removed when the server stops). The client is the
    connection's peer: an X-Forwarded-For of its own choosing (without --trust-forwarded)
    gets it no other bucket."""
    scenario = Scenario(seed=43)
    scenario.next_block(actions=4)
    db = tmp_path / "index.sqlite"
    store = await open_store(db)
    await apply_all(store, scenario.blocks)
    await store.close()
    limit = 3  # a minute: a token back every 20 s
    async with ladle_rest(db, rate_limit=limit) as rest:
        host, port = rest.url.removeprefix("http://").rsplit(":", 1)
        workers = rest.workers()
        began = time.monotonic()
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        try:
            burst = [await asyncio.open_connection(host, int(port)) for _ in range(10 * limit)]
            for i, (_, writer) in enumerate(burst):
                request = (
                    f"GET /dex/contract/count HTTP/1.1\r\nHost: {host}\r\n"
                    f"X-Forwarded-For: 198.51.100.{i}\r\n\r\n"
                )
                writer.write(request.encode())
        finally:
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
        try:
            answers = [await asyncio.wait_for(_head(reader), 10) for reader, _ in burst]
            held = [established_on(w, int(port)) for w in workers]
        finally:
            for _, writer in burst:
                writer.close()
        assert min(held) >= 1, held  # both workers answered
        statuses = [status for status, _ in answers]
        assert set(statuses) == {200, 429}, statuses
        assert all(int(h["retry-after"]) >= 1 for status, h in answers if status == 429)
        passed = statuses.count(200)
        # The burst's `limit` tokens, plus what refilled meanwhile (at limit/60 a second).
        assert limit <= passed <= limit + (time.monotonic() - began) * limit / 60, statuses

        victim = workers[0]
        os.kill(victim, signal.SIGKILL)

        # Decided on one reading of the pool's processes: two readings can differ while the
        # fork server is between forks.
        new: list[int] = []

        async def replaced() -> bool:
            now = rest.workers()
            new[:] = [w for w in now if w not in (victim, workers[1])]
            return len(now) == 2 and victim not in now and len(new) == 1

        await wait_until(replaced)
        replacement = new[0]
        for _ in range(limit):
            if (await rest.get(replacement, "/dex/contract/count")).status_code == 200:
                passed += 1
        assert passed <= limit + (time.monotonic() - began) * limit / 60

        # One table: the file the parent made, mapped by every worker, removed at the end.
        table = _table_of(rest.proc.pid)
        assert all(str(table) in Path(f"/proc/{w}/maps").read_text() for w in rest.workers())
        rest.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(rest.proc.wait(), 30) == 0
        assert not table.exists()


def _table_of(pid: int) -> Path:
    """The rate limit's bucket table file that process `pid` holds open."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = Path(os.readlink(fd))
        if target.name.startswith("ladle-ratelimit-"):
            return target
    raise AssertionError(f"process {pid} holds no bucket table")


async def _head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """An HTTP answer's status and headers (lower-case names)."""
    status = int((await reader.readline()).split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def test_a_killed_worker_is_replaced_while_the_other_answers(tmp_path: Path) -> None:
    scenario = Scenario(seed=42)
    for _ in range(6):
        scenario.next_block(actions=4)
    db = tmp_path / "index.sqlite"
    store = await open_store(db)
    await apply_all(store, scenario.blocks)
    await store.close()
    async with ladle_rest(db) as rest:
        victim, survivor = rest.workers()
        failures = 0
        answered = 0
        async with httpx.AsyncClient(base_url=rest.url, timeout=10) as client:
            os.kill(victim, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    r = await client.get("/dex/contract/count")
                    assert r.status_code == 200
                    answered += 1
                except httpx.TransportError:
                    failures += 1  # at most the request the victim held
                workers = rest.workers()
                if len(workers) == 2 and victim not in workers and answered >= 20:
                    break
        assert failures <= 1 and answered >= 20
        replacement = next(w for w in rest.workers() if w != survivor)
        assert replacement != victim and not alive(victim)
        r = await rest.get(replacement, "/dex/contract/count")
        assert r.status_code == 200
        # SIGTERM: the parent stops every worker and exits 0.
        tree = descendants(rest.proc.pid)
        rest.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(rest.proc.wait(), 30) == 0
        await wait_until(lambda: _none_alive(tree))


async def test_workers_run_at_the_given_niceness_also_when_restarted(tmp_path: Path) -> None:
    # A process cannot lower its niceness: under a niced test run, that one is the floor.
    expected = max(7, os.getpriority(os.PRIO_PROCESS, 0))
    async with ladle_rest(tmp_path / "index.sqlite", nice=7) as rest:
        first = rest.workers()
        assert [os.getpriority(os.PRIO_PROCESS, w) for w in first] == [expected, expected]
        os.kill(first[0], signal.SIGKILL)

        async def replaced() -> bool:
            workers = rest.workers()
            return len(workers) == 2 and first[0] not in workers

        await wait_until(replaced)
        assert [os.getpriority(os.PRIO_PROCESS, w) for w in rest.workers()] == [expected] * 2


async def test_a_niceness_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "ladle", "rest", "--db", str(tmp_path / "i.sqlite")),
        *("--port", "0", "--nice", "20"),
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert b"--nice must be from 0 to 19, got 20" in err


async def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    async with ladle_rest(db, workers=2) as rest:
        tree = descendants(rest.proc.pid)
        assert len(tree) >= 3  # the fork server and two workers
        rest.proc.kill()
        await rest.proc.wait()
        await wait_until(lambda: _none_alive(tree))


async def _none_alive(pids: list[int]) -> bool:
    return not any(alive(pid) for pid in pids)
