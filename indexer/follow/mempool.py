"""The mempool side of the follower: what the server's mempool holds, applied to live state.

Each refresh computes the set of txids the server has unconfirmed, then

1. evicts (`Store.evict`) the applied transactions that left it — unless the server says they
   are confirmed (a block we have not applied yet will confirm them; evicting would only make
   the live pools flicker);
2. fetches the ones never seen (batched), keeps those some decoder's prefilter matches as
   *candidates* and remembers the others as irrelevant for as long as they stay;
3. applies the candidates parents first (`Store.apply_mempool_tx`). A candidate the store
   refuses (it spends a pool that is not live yet, or conflicts with a pending transaction) is
   kept and tried again when the chain or the applied set changes.

Blocks confirm and evict through the store itself (`apply_block` drops the block's transactions
and the pending ones it double-spends); this class only mirrors the server's mempool.

Where the txids come from depends on the source (`ChainSource.mempool_txids`):

- **A BCHN node** (`getrawmempool`): the whole mempool, every round (on a ZMQ push, or every
  `interval` seconds).
- **Rostrum** (`mempool.get`): the whole mempool, on every header notification, every
  `interval` seconds, and whenever a watched pool address notifies (as below), so a pool trade
  is live within one round trip of reaching the server.
- **Fulcrum fallback** (no mempool listing): only transactions touching *known pool
  addresses* can be discovered. The follower subscribes to the Electrum scripthash of every
  owner with a live pool (`blockchain.scripthash.subscribe`) and reads the unconfirmed history
  of those that notify (`blockchain.scripthash.get_mempool`). Trades, deposits and withdraws of
  known pools therefore appear at once; a pool *created* in the mempool by an owner without a
  live pool, and any transaction of another protocol, only appears when its block arrives.

A transaction the source no longer knows left the mempool; any other failure to fetch one
(a busy server, a daemon error) fails the round, which the follower retries after a backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

from bch.tx import Transaction, hash_to_hex, hex_to_hash
from indexer.decoders import matches
from indexer.electrum import ElectrumClient, ElectrumError, ElectrumProtocolError, scripthash
from indexer.follow.source import ChainSource
from indexer.follow.source_electrum import ElectrumSource, chain_source
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from protocols.cauldron.contract import pool_locking_bytecode
from runtime.logs import fields

log = logging.getLogger("indexer.follow")

SUBSCRIBE_CONCURRENCY = 64

WakeFn = Callable[[], None]


def pool_scripthashes(snapshot: PoolSnapshot) -> set[str]:
    """Electrum scripthashes of the pool addresses of every owner with a live pool (confirmed
    or pending): what the Fulcrum fallback watches."""
    owners = {p.owner_pkh for p in snapshot.all_pools()}
    return {scripthash(pool_locking_bytecode(pkh)) for pkh in owners}


def parents_first(txs: dict[bytes, Transaction]) -> list[bytes]:
    """Txids of `txs` with every parent among them before its children (else in dict order).
    Iterative depth-first search; a cycle (impossible among valid transactions) is cut."""

    def parents(txid: bytes) -> Iterator[bytes]:
        seen = dict.fromkeys(i.outpoint.txid for i in txs[txid].inputs)
        return iter([p for p in seen if p in txs and p != txid])

    order: list[bytes] = []
    state: dict[bytes, bool] = {}  # False: on the current path; True: emitted
    for root in txs:
        if root in state:
            continue
        state[root] = False
        stack = [(root, parents(root))]
        while stack:
            txid, pending = stack[-1]
            for parent in pending:
                if parent not in state:
                    state[parent] = False
                    stack.append((parent, parents(parent)))
                    break
            else:
                stack.pop()
                state[txid] = True
                order.append(txid)
    return order


def _mempool_txids(result: object, sh: str) -> set[bytes]:
    if not isinstance(result, list):
        raise ElectrumProtocolError(f"get_mempool({sh}): expected a list")
    out: set[bytes] = set()
    for item in result:
        txid = item.get("tx_hash") if isinstance(item, dict) else None
        if not isinstance(txid, str):
            raise ElectrumProtocolError(f"get_mempool({sh}): entry without tx_hash")
        try:
            out.add(hex_to_hash(txid))
        except ValueError:
            raise ElectrumProtocolError(f"get_mempool({sh}): bad tx_hash {txid!r}") from None
    return out


class MempoolFollower:
    def __init__(
        self,
        source: ChainSource | ElectrumClient,
        store: Store,
        *,
        wake: WakeFn | None = None,
        watch: Callable[[], set[str]] | None = None,
    ) -> None:
        """`wake` is called when a watched scripthash notifies (the follower then refreshes);
        `watch` gives the scripthashes to watch on an Electrum server (default: the pool
        addresses of the owners in the store's snapshot)."""
        self.source = source = chain_source(source)
        # Pool addresses are watched on an Electrum server only (a node pushes by ZMQ).
        self.client = source.client if isinstance(source, ElectrumSource) else None
        self.store = store
        self._wake = wake
        self._watch = watch or (lambda: pool_scripthashes(store.snapshot))
        self._candidates: dict[bytes, bytes] = {}  # txid → raw: prefilter matched, not applied
        self._irrelevant: set[bytes] = set()
        self._retry = False
        # Fallback mode.
        self._subscribed: set[str] = set()
        self._dirty: set[str] = set()
        self._sh_mempool: dict[str, set[bytes]] = {}

    def chain_changed(self) -> None:
        """Blocks were applied or undone: refused candidates may fit now."""
        self._retry = True

    @property
    def candidates(self) -> int:
        return len(self._candidates)

    async def refresh(self) -> None:
        client = self.client
        if client is not None:
            # On an Electrum server the pool addresses are watched even with a listing, so a
            # trade against a live pool wakes the follower at once instead of at the next
            # poll. Without that a client's second swap, built right after its first was
            # broadcast, would be routed over the pool the first one spent: a double spend
            # the node refuses.
            await self._watch_addresses(client)
        current = await self.source.mempool_txids()
        if current is not None:
            self._dirty.clear()
            await self._mirror(current)
            return
        assert client is not None  # only the Fulcrum fallback has no listing
        # Fallback: the watched addresses' mempool; applying may reveal new addresses (a
        # pending pool of a new owner), so go round until the watched set is stable.
        for i in range(4):
            if i:
                await self._watch_addresses(client)
            await self._mirror(await self._watched_mempool(client))
            if self._watch() <= self._subscribed:
                break

    # --- mirroring ------------------------------------------------------------------------------

    async def _mirror(self, current: set[bytes]) -> None:
        applied = self.store.mempool_txids()
        gone = applied - current
        if gone:
            tip = await self.store.tip()
            gone -= await self.source.confirmed(list(gone), None if tip is None else tip.hash)
        if gone:
            evicted = await self.store.evict(gone)
            self._retry = True
            log.info(
                "mempool: evicted",
                extra=fields(event="mempool_evict", txids=sorted(hash_to_hex(t) for t in evicted)),
            )
        self._irrelevant &= current
        for txid in [t for t in self._candidates if t not in current]:
            del self._candidates[txid]
        new = current - applied - self._irrelevant - self._candidates.keys()
        fetched = await self.source.mempool_transactions(list(new))
        patterns = [p for d in self.store.decoders for p in d.patterns]
        for txid, raw in fetched.items():
            if matches(patterns, raw):
                self._candidates[txid] = raw
            else:
                self._irrelevant.add(txid)
        if self._candidates and (self._retry or fetched):
            await self._apply_candidates()
        self._retry = False

    async def _apply_candidates(self) -> None:
        parsed: dict[bytes, Transaction] = {}
        for txid, raw in list(self._candidates.items()):
            try:
                parsed[txid] = Transaction.from_bytes(raw)
            except ValueError:
                del self._candidates[txid]  # the server checked its hash; it cannot parse
                self._irrelevant.add(txid)
        used: list[str] = []
        for txid in parents_first(parsed):
            if await self.store.apply_mempool_tx(parsed[txid]):
                del self._candidates[txid]
                used.append(hash_to_hex(txid))
        if used:
            log.info("mempool: applied", extra=fields(event="mempool_apply", txids=used))

    # --- watching pool addresses (Electrum) -----------------------------------------------------

    def _notified(self, sh: str, status: str | None) -> None:
        self._dirty.add(sh)
        if self._wake is not None:
            self._wake()

    async def _watch_addresses(self, client: ElectrumClient) -> None:
        wanted = self._watch()
        stale = self._subscribed - wanted
        for sh in stale:
            await client.unsubscribe_scripthash(sh)
            self._subscribed.discard(sh)
            self._sh_mempool.pop(sh, None)
            self._dirty.discard(sh)
        new = sorted(wanted - self._subscribed)
        gate = asyncio.Semaphore(SUBSCRIBE_CONCURRENCY)

        async def subscribe(sh: str) -> None:
            async with gate:
                await client.subscribe_scripthash(sh, self._notified)
            self._subscribed.add(sh)
            self._dirty.add(sh)

        await asyncio.gather(*(subscribe(sh) for sh in new))

    async def _watched_mempool(self, client: ElectrumClient) -> set[bytes]:
        dirty = sorted(self._dirty & self._subscribed)
        self._dirty.clear()
        if dirty:
            try:
                results = await client.batch(
                    [("blockchain.scripthash.get_mempool", [sh]) for sh in dirty]
                )
            except BaseException:
                self._dirty.update(dirty)
                raise
            for sh, result in zip(dirty, results, strict=True):
                if isinstance(result, ElectrumError):
                    self._dirty.add(sh)  # try again next time
                    continue
                self._sh_mempool[sh] = _mempool_txids(result, sh)
        current: set[bytes] = set()
        for txids in self._sh_mempool.values():
            current |= txids
        return current
