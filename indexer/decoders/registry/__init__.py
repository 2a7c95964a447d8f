"""Indexing token identities (authchains and BCMR publications): `decoder`, `schema`."""

from indexer.decoders.registry.decoder import (
    Link,
    PublicationRow,
    RegistryContext,
    RegistryDecoder,
    decode_registry_tx,
)

__all__ = ["Link", "PublicationRow", "RegistryContext", "RegistryDecoder", "decode_registry_tx"]
