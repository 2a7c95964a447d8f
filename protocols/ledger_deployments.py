"""What an indexer must be told to decode a scenario's chain: the oracle feed the generator
created (its category, layout and GP signer), the lending extension's deployment and its
interest-rate oracle.

Both are chain facts the indexer cannot guess (a feed is recognised by its configured category,
a deployment by its configured categories and contracts), so `ladle up` and
`ladle index --devnet-ledger` read them from the ledger. The ledger's model and this reader
live here, below the indexer, so that no production module imports the devnet that writes it.
"""

from __future__ import annotations

from typing import Any

from protocols.ledger import Ledger
from protocols.lending.contracts import LendingConfig, devnet_config
from protocols.oracle import RATE_FEED_NAME, FeedConfig

LENDING_PART = "lending"  # the ledger extension part the scenario's lending extension writes


def feed_config(ledger: Ledger) -> FeedConfig:
    """The scenario's BCH/USD feed; its signer's key verifies the GP messages."""
    oracle = ledger.oracle
    return FeedConfig(oracle.category, oracle.layout, pubkeys=(bytes.fromhex(oracle.pubkey),))


def feed_configs(ledger: Ledger) -> tuple[FeedConfig, ...]:
    """Every feed of the scenario: the BCH/USD feed, and the lending extension's interest-rate
    oracle (layout `rate`) when the scenario ran it."""
    part = ledger.extensions.get(LENDING_PART)
    rate = None if part is None else rate_feed(part)
    return (feed_config(ledger),) if rate is None else (feed_config(ledger), rate)


def lending_configs(ledger: Ledger) -> tuple[LendingConfig, ...]:
    """The deployments of the lending extension (none when the scenario ran without it)."""
    part = ledger.extensions.get(LENDING_PART)
    return () if part is None else configs_from_ledger(part)


def configs_from_ledger(part: Any) -> tuple[LendingConfig, ...]:
    """The decoder configuration matching a ledger's lending part (a ledger written before the
    scenario had a rate oracle names the price oracle in its place)."""
    return tuple(
        devnet_config(
            c["version"],
            part["stablecoin"],
            part["price_oracle"],
            part.get("rate_oracle", part["price_oracle"]),
            part["agent"],
        )
        for c in part["configs"]
    )


def rate_feed(part: Any) -> FeedConfig | None:
    """The oracle decoder's configuration of a ledger's rate oracle (None: an older ledger)."""
    category = part.get("rate_oracle")
    return None if category is None else FeedConfig(category, "rate", RATE_FEED_NAME)
