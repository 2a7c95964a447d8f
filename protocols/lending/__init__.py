"""The lending protocol: the public v1 layout (`v1`), this project's v11 model (`v11`), which
outputs belong to a deployment (`contracts`) and how a transaction's actions are read
(`actions`). Decoders are chosen per configured version (`LendingConfig.version`)."""

from protocols.lending.actions import (
    ACTION_KINDS,
    ActionKind,
    Loan,
    LoanAction,
    StateOutput,
    allowance_outputs,
    classify,
    loan_outputs,
    owner_hashes_present,
    state_outputs,
)
from protocols.lending.contracts import VERSIONS, LendingConfig, Version, devnet_config

__all__ = [
    "ACTION_KINDS",
    "VERSIONS",
    "ActionKind",
    "LendingConfig",
    "Loan",
    "LoanAction",
    "StateOutput",
    "Version",
    "allowance_outputs",
    "classify",
    "devnet_config",
    "loan_outputs",
    "owner_hashes_present",
    "state_outputs",
]
