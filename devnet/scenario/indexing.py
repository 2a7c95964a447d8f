"""What an indexer must be told to decode a scenario's chain: the oracle feed the generator
created (its category, layout and GP signer), the lending extension's deployment and its
interest-rate oracle.

Both are chain facts the indexer cannot guess (a feed is recognised by its configured category,
a deployment by its configured categories and contracts), so `ladle up` and
`ladle index --devnet-ledger` read them from the ledger.
"""

from __future__ import annotations

from devnet.scenario.ledger import Ledger
from devnet.scenario.lending import LendingExtension, configs_from_ledger, rate_feed
from protocols.lending.contracts import LendingConfig
from protocols.oracle import FeedConfig


def feed_config(ledger: Ledger) -> FeedConfig:
    """The scenario's BCH/USD feed; its signer's key verifies the GP messages."""
    oracle = ledger.oracle
    return FeedConfig(oracle.category, oracle.layout, pubkeys=(bytes.fromhex(oracle.pubkey),))


def feed_configs(ledger: Ledger) -> tuple[FeedConfig, ...]:
    """Every feed of the scenario: the BCH/USD feed, and the lending extension's interest-rate
    oracle (layout `rate`) when the scenario ran it."""
    part = ledger.extensions.get(LendingExtension.name)
    rate = None if part is None else rate_feed(part)
    return (feed_config(ledger),) if rate is None else (feed_config(ledger), rate)


def lending_configs(ledger: Ledger) -> tuple[LendingConfig, ...]:
    """The deployments of the lending extension (none when the scenario ran without it)."""
    part = ledger.extensions.get(LendingExtension.name)
    return () if part is None else configs_from_ledger(part)
