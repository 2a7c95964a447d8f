"""Indexing oracle feeds (`decoder`) and their tables (`schema`)."""

from indexer.decoders.oracle.decoder import (
    FeedUpdate,
    OracleDecoder,
    SignedMessage,
    decode_oracle_tx,
)

__all__ = ["FeedUpdate", "OracleDecoder", "SignedMessage", "decode_oracle_tx"]
