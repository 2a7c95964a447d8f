"""An index with the oracle and registry data of a devnet scenario, for the `/oracle` and
`/registry` tests (built once per process, shared by their modules).

The scenario's registries are served over the devnet's HTTP document server (`bcmr_http`) and
fetched by the indexer's real fetch job — except one token's, left unreachable — and one
off-chain source (a local file) describes SPICE under another name. Halfway through the history
the identity of Dragon Gold (the DRGN published in a later authchain link) is burned. The
oracle decoder is told the scenario's feed, as `ladle up` tells it. The ledger, the served
documents and the chain's blocks are the tests' oracle.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devnet.bcmr_http import DocumentServer
from devnet.scenario import PRESETS, Ledger, ScenarioGenerator
from devnet.service import Devnet, DevnetConfig
from indexer.decoders import create_decoders
from indexer.decoders.oracle import OracleDecoder
from indexer.registry_fetch import FetchConfig, OffchainSource, RegistryFetcher
from indexer.snapshot import PoolSnapshot
from indexer.store import Store, open_writer
from protocols.ledger import TokenEntry
from protocols.oracle import FeedConfig, FeedTable
from rest.config import RestConfig
from tests.rest.oracle import Block, Oracle

PARAMS = PRESETS["small"].replace(seed=23, tokens=7, burn_identity=True)  # a 7th token: TK1
BURNED = "Dragon Gold"  # the token whose identity the scenario burns
UNREACHABLE = "TK1"  # a generated token whose registry URI never answers
OFFCHAIN = "wellknown"
FETCHED_AT = 2_000_000_000


@dataclass(frozen=True)
class ProtocolWorld:
    db: Path
    ledger: Ledger
    oracle: Oracle  # pools and prices replayed from the ledger
    blockhash: dict[int, str]  # height -> display hex
    documents: dict[str, bytes]  # served path -> bytes
    offchain: bytes  # the off-chain source's content
    now: int  # the API's clock: a minute after the tip's running max time

    @property
    def tip_time(self) -> int:
        return self.oracle.blocks[max(self.oracle.blocks)].max_time

    def token(self, symbol: str) -> TokenEntry:
        (found,) = self.ledger.tokens_with_symbol(symbol)
        return found

    def served(self, token: TokenEntry) -> bytes | None:
        """The bytes the document server answered for the token's registry (None: none)."""
        if token.bcmr is None or token.symbol == UNREACHABLE:
            return None
        uri = token.bcmr.uri
        path = uri.replace("ipfs://", "/ipfs/") if uri.startswith("ipfs://") else None
        if path is None:
            path = "/" + uri.split("/", 3)[3]
        return self.documents[path]

    def config(self, **overrides: Any) -> RestConfig:
        base: dict[str, Any] = {
            "db_path": self.db,
            "clock": lambda: self.now,
            "rate_limit": 0,
            "warm": False,
            "usd_feed": self.ledger.oracle.category,
        }
        base.update(overrides)
        return RestConfig(**base)


async def _build(directory: Path) -> ProtocolWorld:
    http = DocumentServer()
    await http.start()
    try:
        async with Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False)) as net:
            result = await ScenarioGenerator(net, PARAMS.replace(http_base=http.url)).run()
            chain = net.nodes[0].chain
            raws = [b.raw for b in chain.blocks]
            blocks: dict[int, Block] = {}
            running = 0
            for h, rec in enumerate(chain.blocks):
                running = max(running, rec.header.time)
                positions = {tx.txid_hex: i for i, tx in enumerate(rec.txs)}
                blocks[h] = Block(h, rec.hash_hex, rec.header.time, running, positions)
        ledger = result.ledger
        (hidden,) = ledger.tokens_with_symbol(UNREACHABLE)
        assert hidden.bcmr is not None
        for path, body in result.documents.items():
            if not hidden.bcmr.uri.endswith(path.rsplit("/", 1)[-1]):
                http.publish(path, body)

        db = directory / "index.sqlite"
        snap = PoolSnapshot()
        feed = FeedConfig(
            ledger.oracle.category, "delphi", pubkeys=(bytes.fromhex(ledger.oracle.pubkey),)
        )
        decoders = [
            *create_decoders(["cauldron", "registry"], snapshot=snap),
            OracleDecoder(FeedTable([feed])),
        ]
        store = await Store.open(db, snapshot=snap, decoders=decoders)
        try:
            for h, raw in enumerate(raws):
                await store.apply_block(h, raw)
        finally:
            await store.close()

        # The off-chain list: SPICE's registry under another name.
        spice = ledger.tokens_with_symbol("SPICE")[0]
        assert spice.bcmr is not None
        doc = json.loads(result.documents[spice.bcmr.uri.replace("ipfs://", "/ipfs/")])
        for snapshot in doc["identities"][spice.category].values():
            snapshot["name"] = "Spice (well-known list)"
        offchain = json.dumps(doc).encode()
        listing = directory / "wellknown.json"
        listing.write_bytes(offchain)

        conn = await open_writer(db)
        try:
            config = FetchConfig(
                ipfs_gateway=f"{http.url}/ipfs/",
                retries=0,
                backoff=0.01,
                offchain=(OffchainSource(OFFCHAIN, str(listing)),),
            )
            fetcher = RegistryFetcher(conn, config, clock=lambda: FETCHED_AT)
            await fetcher.fetch_offchain()
            while await fetcher.run_once():
                pass
        finally:
            await conn.close()
    finally:
        await http.close()
    hashes = {h: b.hash for h, b in blocks.items()}
    world_oracle = Oracle(ledger, blocks)
    return ProtocolWorld(
        db, ledger, world_oracle, hashes, dict(result.documents), offchain, running + 60
    )


_WORLDS: dict[str, ProtocolWorld] = {}


def protocol_world(directory: Path) -> ProtocolWorld:
    """The world, built on first use in `directory` (later calls reuse it)."""
    if "world" not in _WORLDS:
        _WORLDS["world"] = asyncio.run(_build(directory))
    return _WORLDS["world"]


async def get(client: httpx.AsyncClient, url: str) -> Any:
    """The JSON of a 200 answer (any other status fails the test, showing the body)."""
    r = await client.get(url)
    assert r.status_code == 200, (url, r.text)
    return r.json()


async def error(client: httpx.AsyncClient, url: str, status: int) -> dict[str, Any]:
    """The `error` object of an answer that must have `status`."""
    r = await client.get(url)
    assert r.status_code == status, (url, r.text)
    body: dict[str, Any] = r.json()["error"]
    return body
