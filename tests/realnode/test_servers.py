"""The tier itself: the servers it starts are what the other tests rely on."""

from __future__ import annotations

from indexer.electrum import ElectrumClient
from tests.realnode.nodes import RealNodes

REGTEST_GENESIS = "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"


async def test_fulcrum_serves_the_regtest_chain(nodes: RealNodes) -> None:
    client = ElectrumClient([nodes.electrum_url], retries=0)
    try:
        height, _ = await client.get_tip()
        caps = await client.capabilities()
    finally:
        await client.close()
    assert height == nodes.bitcoind.rpc("getblockcount")
    assert caps.genesis_hash == REGTEST_GENESIS
    assert not caps.block_get and not caps.mempool_get  # Fulcrum has no Rostrum extensions
