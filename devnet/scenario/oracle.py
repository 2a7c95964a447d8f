"""Oracle data the scenario publishes: Delphi NFT commitments and signed GP price messages.

The layouts and the GPPM publication are pure protocol code, kept in `protocols.oracle` (the
indexer decodes them with the same functions); this module re-exports what the scenario uses.
See ../shared/reference/oracle-registry-lending.md and docs/devnet.md.
"""

from __future__ import annotations

from protocols.oracle import (
    GP_TAG,
    METADATA_SCALING,
    DelphiCommitment,
    GpMessage,
    gp_publication,
    parse_gp_publication,
    verify_message,
)

__all__ = [
    "GP_TAG",
    "METADATA_SCALING",
    "DelphiCommitment",
    "GpMessage",
    "gp_publication",
    "parse_gp_publication",
    "verify_message",
]
