"""A verified run: every transaction the scenario builds goes through libauth's BCH 2026 VM
(standard rules) before the node accepts it — pool trades, deposits, owner-signed withdrawals,
token geneses, registry publications, oracle updates."""

from __future__ import annotations

import pytest

from devnet.scenario.generator import ScenarioGenerator
from devnet.service import Devnet
from tests.devnet.test_scenario import SMALL, devnet_config

pytestmark = pytest.mark.node


async def test_every_generated_transaction_passes_libauth() -> None:
    net = Devnet(devnet_config(verify=True))
    await net.start()
    try:
        result = await ScenarioGenerator(net, SMALL.replace(verify=True)).run()
        verifier = net.network.verifier
        assert verifier is not None and verifier.libauth_version is not None
        ledger = result.ledger
        kinds = {t.kind for t in [*ledger.transactions, *ledger.mempool.transactions]}
        assert {
            "token_genesis",
            "bcmr_publication",
            "pool_create",
            "trade",
            "deposit",
            "withdraw",
            "oracle_genesis",
            "oracle_update",
            "decoy",
            "payment",
        } <= kinds
        # The same history as an unverified run: verification changes nothing but the checking.
        plain = Devnet(devnet_config())
        await plain.start()
        try:
            unverified = await ScenarioGenerator(plain, SMALL).run()
        finally:
            await plain.stop()
        assert unverified.ledger.events == ledger.events
    finally:
        await net.stop()
