"""Shared-nothing replicas agree byte for byte: one devnet (`ladle devnet --preset small`), two
independent `ladle router` processes (each indexing the devnet into its own SQLite file) and
a `ladle rest` over each file. Once both indexes are at the same tip, every REST endpoint
(the table of `rest.endpoints`, with parameters taken from the answers) gives the same
status, body and ETag on both, and both routers give the same quote."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect

from rest.endpoints import ENDPOINTS
from tests.ladle.test_up import Running, start

pytestmark = pytest.mark.asyncio(loop_scope="module")

NO_HASH = "00" * 32
SETTLE = 30.0
START_TIMEOUT = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def drain(stream: asyncio.StreamReader | None) -> None:
    """Keep reading a process's output so a full pipe never stalls it."""
    while stream is not None and await stream.read(65536):
        pass


class Replica:
    def __init__(self, router: Running, rest: asyncio.subprocess.Process, port: int, ws: str):
        self.router, self.rest, self.ws = router, rest, ws
        self.web = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30)


async def start_replica(db: Path, electrum: str) -> Replica:
    router = await start(
        "router", "--port", "0", "--fee-bps", "0", "--db", str(db), "--electrum", electrum,
        "--no-progress",
    )  # fmt: skip
    ready = await asyncio.wait_for(router.ready(), START_TIMEOUT)
    port = free_port()
    rest = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ladle", "rest", "--db", str(db), "--port", str(port),
        "--rate-limit", "0", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return Replica(router, rest, port, str(ready["router"]))


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def replicas(tmp: Path) -> AsyncIterator[tuple[dict[str, Any], list[Replica]]]:
    devnet = await start("devnet", "--preset", "small", "--ports", "0")
    procs = [devnet.proc]
    drains = []
    try:
        ready = await asyncio.wait_for(devnet.ready(), START_TIMEOUT)
        drains.append(asyncio.create_task(drain(devnet.proc.stdout)))
        electrum = ready["electrum"][0]["tcp"]
        reps = []
        for name in ("a", "b"):
            rep = await start_replica(tmp / f"{name}.sqlite", electrum)
            reps.append(rep)
            procs += [rep.router.proc, rep.rest]
            drains.append(asyncio.create_task(drain(rep.router.proc.stdout)))
        yield ready, reps
        for rep in reps:
            await rep.web.aclose()
    finally:
        for proc in reversed(procs):
            await stop(proc)
        for task in drains:
            task.cancel()


async def same_tip(reps: list[Replica]) -> str:
    """Until both indexes answer at one tip that holds still, with the same token list (each
    replica's registry fetch job has stored the same documents): the tip tag of the ETags."""
    last, seen = None, 0
    for _ in range(600):
        tags = []
        for rep in reps:
            with contextlib.suppress(httpx.HTTPError):
                r = await rep.web.get("/dex/contract/count")
                listed = await rep.web.get("/dex/tokens/list_cached")
                if r.status_code == 200 and listed.status_code == 200:
                    tags.append([*r.headers["etag"].split(".")[0:2], listed.text])
        if len(tags) == 2 and tags[0] == tags[1]:
            seen = seen + 1 if tags[0] == last else 1
            last = tags[0]
            if seen >= 3:
                return ".".join(last[:2])
        await asyncio.sleep(0.5)
    raise AssertionError("the replicas never reached the same tip")


def fill(path: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


async def urls(web: httpx.AsyncClient, now: int) -> list[str]:
    """Every endpoint, with parameters from the index's own answers (a token, a pool lineage,
    a borrower, a feed), and explicit times where the default is "now"."""
    pools = (await web.get("/tokenpool/pools")).json()["pools"]
    token = pools[0]["token_id"] if pools else NO_HASH
    pool_id = pools[0]["pool_id"] if pools else f"{NO_HASH}:0"
    actions = (await web.get("/lending/v11/history")).json()
    borrower = actions[0]["borrower_hash"] if actions else NO_HASH
    values = {"token": token, "category": token, "pool_id": pool_id, "timestamp": str(now)}
    values |= {"borrower_hash": borrower, "owner_hash": borrower}
    required = {
        "ids": f"ids={token}",
        "search_query": "search_query=a",
        "q": "q=a",
        "token_id": f"token_id={token}",
        "start": f"start={now - 30 * 86_400}",
    }
    out = []
    for e in ENDPOINTS:
        query = [required[n] for n in e.query_names if n in required]
        if "end" in e.query_names:
            query.append(f"end={now}")
            if "start" not in required:
                query.append(f"start={now - 30 * 86_400}")
        url = fill(e.path, values) + ("?" + "&".join(query) if query else "")
        out.append(url)
        if "offset" in e.query_names:
            out.append(url + ("&" if query else "?") + "offset=3&limit=2")
    return out


async def test_replicas_answer_byte_identically(tmp_path: Path) -> None:
    async with replicas(tmp_path) as (_, reps):
        await same_tip(reps)
        a, b = reps
        every = await urls(a.web, int(time.time()))
        assert len(every) > len(ENDPOINTS)
        differ = []
        for url in every:
            # An answer of "now" (a default time) may cross a second, and the registry copies
            # arrive from each replica's own fetch job after the block that publishes them:
            # the two must converge, within SETTLE seconds.
            settle = time.monotonic() + SETTLE
            while True:
                ra, rb = await a.web.get(url), await b.web.get(url)
                same = (ra.status_code, ra.content, ra.headers.get("etag")) == (
                    rb.status_code, rb.content, rb.headers.get("etag"),
                )  # fmt: skip
                if same or time.monotonic() > settle:
                    break
                await asyncio.sleep(0.2)
            assert ra.status_code < 500, (url, ra.text)
            if not same:
                diff = [i for i, (x, y) in enumerate(zip(ra.text, rb.text, strict=False)) if x != y]
                at = diff[0] if diff else min(len(ra.text), len(rb.text))
                where = [
                    (r.text[max(0, at - 80) : at + 80], r.headers.get("content-encoding"))
                    for r in (ra, rb)
                ]
                etags = (ra.headers.get("etag"), rb.headers.get("etag"))
                differ.append((url, ra.status_code, rb.status_code, etags, where))
        assert not differ, json.dumps(differ, indent=1)
        # The routers: the same quote from both.
        token = (await a.web.get("/tokenpool/pools")).json()["pools"][0]["token_id"]
        request = {"sell": "bch", "buy": token, "amount": "100000"}
        replies = []
        for rep in reps:
            async with connect(rep.ws) as ws:
                await ws.send(orjson.dumps({"id": 1, "method": "quote", "params": request}))
                replies.append(await ws.recv(decode=False))
        assert b'"result"' in replies[0], replies[0][:300]
        assert replies[0] == replies[1]
