"""The scenario generator: a deterministic Cauldron history built from real transactions, and
its ledger (what the indexer and REST tests compare against). See docs/devnet.md."""

from devnet.scenario.generator import (
    ScenarioError,
    ScenarioExtension,
    ScenarioGenerator,
    ScenarioResult,
)
from devnet.scenario.params import PRESETS, ScenarioParams
from protocols.ledger import Ledger

__all__ = [
    "PRESETS",
    "Ledger",
    "ScenarioError",
    "ScenarioExtension",
    "ScenarioGenerator",
    "ScenarioParams",
    "ScenarioResult",
]
