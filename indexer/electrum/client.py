"""`ElectrumClient`: the typed calls the chain follower, the tracker and the broadcaster use,
on top of the failover pool.

Everything returned is checked: hex is decoded, transactions hash to the txid asked for, blocks
match their merkle root (and the header, when one is given). Rostrum's extensions are used when
the active server has them; `get_block_transactions` falls back to enumerating the block by
position on Fulcrum (see `capabilities` for that mode's limits).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bch.block import Block
from bch.encoding import DecodeError
from indexer.electrum.capabilities import (
    FALLBACK_REQUESTS,
    RequestBudget,
    block_transactions_by_position,
)
from indexer.electrum.connection import ElectrumConnection
from indexer.electrum.errors import (
    BlockChanged,
    ElectrumProtocolError,
    NotSupported,
    UnknownTransaction,
)
from indexer.electrum.fetch import fetch_block, fetch_transactions
from indexer.electrum.pool import ElectrumPool
from indexer.electrum.results import (
    HEADER_SIZE,
    HeaderNotice,
    TokenFilter,
    Unspent,
    UtxoInfo,
    check_hash_hex,
    checked_transaction,
    header_bytes,
    headers_from_result,
    is_hash_hex,
    sats_per_kb,
)

HeaderCallback = Callable[[HeaderNotice], Awaitable[None] | None]
ScripthashCallback = Callable[[str, str | None], Awaitable[None] | None]
TOKEN_FILTERS = ("include_tokens", "exclude_tokens", "tokens_only")


def _status(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ElectrumProtocolError(f"scripthash status: expected a string or null, got {value!r}")


def split_block(raw: bytes, header: bytes | None = None) -> list[bytes]:
    """A raw block's transactions, after checking its merkle root (and its header, if given)."""
    if header is not None and raw[:HEADER_SIZE] != header:
        raise BlockChanged("the server's block does not have the expected header")
    try:
        block = Block(raw)
    except DecodeError as exc:
        raise ElectrumProtocolError(f"undecodable block: {exc}") from None
    if not block.has_valid_merkle_root():
        raise ElectrumProtocolError(f"block {block.hash_hex}: transactions do not match its root")
    return [block.tx_raw(i) for i in range(block.tx_count)]


class ElectrumClient(ElectrumPool):
    # One for the client, made on first use: every block fetched by position shares it.
    _fallback_budget: RequestBudget | None = None

    # --- chain --------------------------------------------------------------------------------

    async def get_tip(self) -> tuple[int, bytes]:
        """(height, 80-byte header) of the server's best chain tip."""
        tip = HeaderNotice.from_json(await self.request("blockchain.headers.get_tip"))
        return tip.height, tip.header

    async def get_header(self, height: int) -> bytes:
        return header_bytes(await self.request("blockchain.block.header", height))

    async def get_headers(self, start: int, count: int) -> list[bytes]:
        """Headers `start … start+count-1`, in as many calls as the server's per-call maximum
        needs; fewer when the chain ends first."""
        out: list[bytes] = []
        while len(out) < count:
            want = count - len(out)
            result = await self.request("blockchain.block.headers", start + len(out), want)
            headers = headers_from_result(result)
            if not headers:
                break
            out.extend(headers[:want])
        return out

    async def get_block(self, block: int | str, *, timeout: float | None = None) -> bytes:
        """The raw block at a height or with a (display hex) hash; NotSupported without
        Rostrum's `blockchain.block.get`. `timeout` covers the whole transfer: a 32 MB block is
        64 MB of hex, so allow for the link's speed."""

        async def op(conn: ElectrumConnection) -> bytes:
            if conn.capabilities is None or not conn.capabilities.block_get:
                raise NotSupported(f"{conn.address} does not serve blockchain.block.get")
            return await fetch_block(conn, block, timeout=timeout)

        return await self.run(op)

    async def get_block_transactions(
        self, height: int, *, header: bytes | None = None, timeout: float | None = None
    ) -> list[bytes]:
        """The raw transactions of the block at `height`, in block order: one
        `blockchain.block.get` on Rostrum, else enumerated by position (Fulcrum).

        With `header` (the one the caller linked into its chain), BlockChanged is raised when
        the server's block at `height` is another one, e.g. after a reorg. `timeout` applies to
        the block download (Rostrum) or to each batch (fallback). The genesis block's coinbase
        is left out whatever the server: nodes do not serve it (see `capabilities`).
        """
        if header is not None and len(header) != HEADER_SIZE:
            raise ValueError(f"header must be {HEADER_SIZE} bytes")

        async def op(conn: ElectrumConnection) -> list[bytes]:
            if conn.capabilities is not None and conn.capabilities.block_get:
                txs = split_block(await fetch_block(conn, height, timeout=timeout), header)
                return txs[1:] if height == 0 else txs  # as the fallback must (see there)
            if self._fallback_budget is None:
                self._fallback_budget = RequestBudget(FALLBACK_REQUESTS)
            return await block_transactions_by_position(
                conn, height, header, timeout=timeout, budget=self._fallback_budget
            )

        return await self.run(op)

    # --- transactions -------------------------------------------------------------------------

    async def get_transaction(self, txid: str) -> bytes:
        txid = check_hash_hex(txid, "txid")
        return checked_transaction(await self.request("blockchain.transaction.get", txid), txid)

    async def get_transactions(self, txids: Sequence[str]) -> list[bytes]:
        """Raw transactions in the order of `txids`, in batches of at most `max_batch` (≤ 300)."""
        return await self.run(lambda conn: fetch_transactions(conn, txids))

    async def mempool_txids(self) -> list[str]:
        """Every txid in the server's mempool; NotSupported without Rostrum's `mempool.get`."""

        async def op(conn: ElectrumConnection) -> list[str]:
            if conn.capabilities is None or not conn.capabilities.mempool_get:
                raise NotSupported(f"{conn.address} does not serve mempool.get")
            result = await conn.request("mempool.get")
            if not isinstance(result, list) or not all(is_hash_hex(t) for t in result):
                raise ElectrumProtocolError("mempool.get: expected a list of txids")
            return [t.lower() for t in result]

        return await self.run(op)

    async def transaction_height(self, txid: str) -> int | None:
        """> 0: confirmed at that height; 0 (or -1, unconfirmed parents): in the mempool;
        None: unknown to the server — answered as null by the protocol's docs and the devnet of
        old, as error code 1 by Fulcrum (UnknownTransaction); both mean the same here."""
        try:
            result = await self.request(
                "blockchain.transaction.get_height", check_hash_hex(txid, "txid")
            )
        except UnknownTransaction:
            return None
        if result is not None and (isinstance(result, bool) or not isinstance(result, int)):
            raise ElectrumProtocolError(f"transaction.get_height answered {result!r}")
        return result

    async def broadcast(self, raw_hex: str) -> str:
        """Submit a transaction; its txid. Never retried here: a rejection is an ElectrumError
        carrying the server's code and message unchanged, and a timeout or lost connection
        (ElectrumTimeout / ElectrumConnectionError) leaves the outcome unknown."""
        result = await self.request("blockchain.transaction.broadcast", raw_hex, retry=False)
        if not is_hash_hex(result):
            raise ElectrumProtocolError(f"transaction.broadcast answered {result!r}")
        return str(result).lower()

    # --- addresses ----------------------------------------------------------------------------

    async def listunspent(
        self, scripthash: str, token_filter: TokenFilter = "include_tokens"
    ) -> list[Unspent]:
        if token_filter not in TOKEN_FILTERS:
            raise ValueError(f"token_filter must be one of {TOKEN_FILTERS}")
        result = await self.request(
            "blockchain.scripthash.listunspent",
            check_hash_hex(scripthash, "scripthash"),
            token_filter,
        )
        if not isinstance(result, list):
            raise ElectrumProtocolError(f"listunspent answered {type(result).__name__}")
        return [Unspent.from_json(u) for u in result]

    async def utxo_info(self, txid: str, vout: int) -> UtxoInfo | None:
        """The output if it is unspent (in the mempool too), else None."""
        result = await self.request("blockchain.utxo.get_info", check_hash_hex(txid, "txid"), vout)
        return None if result is None else UtxoInfo.from_json(result)

    async def relay_fee(self) -> int:
        """The server's minimum relay fee in satoshis per 1000 bytes."""
        return sats_per_kb(await self.request("blockchain.relayfee"))

    # --- subscriptions ------------------------------------------------------------------------

    async def subscribe_headers(self, callback: HeaderCallback) -> HeaderNotice:
        """The current tip; then `callback(tip)` on every new tip. Notifications may skip
        heights (and repeat after a reconnection): the follower links headers itself."""

        def listener(params: list[Any]) -> Awaitable[None] | None:
            if len(params) != 1:
                raise ElectrumProtocolError(f"headers notification with params {params!r}")
            return callback(HeaderNotice.from_json(params[0]))

        return HeaderNotice.from_json(
            await self.subscribe("blockchain.headers.subscribe", (), listener)
        )

    async def subscribe_scripthash(
        self, scripthash: str, callback: ScripthashCallback
    ) -> str | None:
        """The current status hash (None: no history); then `callback(scripthash, status)`
        whenever the history of the script changes (mempool included)."""
        sh = check_hash_hex(scripthash, "scripthash")

        def listener(params: list[Any]) -> Awaitable[None] | None:
            if len(params) != 2 or not isinstance(params[0], str):
                raise ElectrumProtocolError(f"scripthash notification with params {params!r}")
            return callback(params[0].lower(), _status(params[1]))

        return _status(await self.subscribe("blockchain.scripthash.subscribe", (sh,), listener))

    async def unsubscribe_scripthash(self, scripthash: str) -> None:
        await self.unsubscribe(
            "blockchain.scripthash.subscribe", (check_hash_hex(scripthash, "scripthash"),)
        )
