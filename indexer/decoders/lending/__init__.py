"""Indexing lending deployments (`decoder`) and their tables (`schema`)."""

from indexer.decoders.lending.decoder import (
    LendingContext,
    LendingDecoder,
    decode_lending_tx,
    median_time_past,
)

__all__ = ["LendingContext", "LendingDecoder", "decode_lending_tx", "median_time_past"]
