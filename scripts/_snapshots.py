"""The synthetic pool snapshot that scripts/bench_router.py and scripts/soak_subscriptions.py
serve (this module holds no script): deterministic, 200 tokens, one big (`BIG`), reserves and
prices spread ±10 %."""

from __future__ import annotations

from bch.hashes import sha256
from bch.tx import OutPoint
from indexer.snapshot import LivePool, PoolSnapshot

TOKENS = 200
BIG = sha256(b"bench token 0").hex()  # the token with `big_pools` pools


def make_snapshot(big_pools: int = 2000, small_pools: int = 18_000) -> PoolSnapshot:
    """`BIG` with `big_pools` pools; the other tokens share `small_pools` evenly (the first
    ones one more)."""
    each, extra = divmod(small_pools, TOKENS - 1)
    pools = []
    for t in range(TOKENS):
        token = sha256(f"bench token {t}".encode()).hex()
        n = big_pools if t == 0 else each + (t <= extra)
        for i in range(n):
            h = int.from_bytes(sha256(f"{t}/{i}".encode())[:4], "big")
            sats = 1_000_000 + h % 4_000_000
            price = 50.0 * (0.9 + 0.2 * ((h >> 8) % 1000) / 1000)
            op = OutPoint(sha256(f"pool {t}/{i}".encode()), i % 4)
            pkh = sha256(f"owner {t}/{i}".encode())[:20]
            pools.append(LivePool(op, op, pkh, token, sats, int(sats / price), 800_000))
    snap = PoolSnapshot()
    snap.replace_confirmed(pools, 800_000)
    return snap
