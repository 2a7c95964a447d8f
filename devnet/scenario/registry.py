"""Token metadata registries (BCMR v2) as the scenario publishes them.

A registry is a JSON document; its on-chain publication is the first output of an authchain
transaction with `OP_RETURN "BCMR" <sha256(registry bytes)> <uri>`. The devnet serves the
documents over local HTTP: `ipfs://<cid>` URIs through its `/ipfs/` gateway path (content
addressed, so the on-chain bytes do not depend on the server's port) and `http://` URIs directly.
"""

from __future__ import annotations

import base64
import datetime
import json
from dataclasses import dataclass
from typing import Literal

from bch.hashes import sha256
from bch.script import OP_RETURN, push_data

BCMR_TAG = b"BCMR"
HashEncoding = Literal["digest", "ascii-hex"]


def iso_time(timestamp: int) -> str:
    """ISO 8601 UTC with milliseconds, as BCMR registries write their timestamps."""
    t = datetime.datetime.fromtimestamp(timestamp, tz=datetime.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def cid_v1_raw(content: bytes) -> str:
    """The IPFS CIDv1 (raw codec, sha2-256, base32) of `content`: `bafkrei…`."""
    multihash = bytes((0x12, 0x20)) + sha256(content)
    body = bytes((0x01, 0x55)) + multihash
    return "b" + base64.b32encode(body).decode().lower().rstrip("=")


def registry_document(
    *,
    category_hex: str,
    name: str,
    symbol: str,
    decimals: int,
    description: str,
    published: int,
    web: str,
) -> bytes:
    """The exact bytes of a one-identity BCMR v2 registry (stable key order, 2-space indent)."""
    when = iso_time(published)
    doc = {
        "$schema": "https://cashtokens.org/bcmr-v2.schema.json",
        "version": {"major": 1, "minor": 0, "patch": 0},
        "latestRevision": when,
        "registryIdentity": {
            "name": f"{name} registry",
            "description": f"Metadata of {name} ({symbol}) on the ladle devnet",
        },
        "identities": {
            category_hex: {
                when: {
                    "name": name,
                    "description": description,
                    "token": {"category": category_hex, "symbol": symbol, "decimals": decimals},
                    "uris": {
                        "icon": f"{web}/icon.svg",
                        "web": web,
                    },
                }
            }
        },
    }
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def publication_locking(digest: bytes, uris: list[str], encoding: HashEncoding) -> bytes:
    """`OP_RETURN "BCMR" <hash> <uri>…`; the hash as the raw digest or, as some publishers did,
    its hex string in ASCII."""
    pushed = digest if encoding == "digest" else digest.hex().encode()
    parts = [bytes((OP_RETURN,)), push_data(BCMR_TAG), push_data(pushed)]
    parts += [push_data(uri.encode()) for uri in uris]
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class Publication:
    """One token's published registry: what is on chain and what the devnet serves."""

    uri: str  # as pushed on chain
    path: str  # where the devnet's HTTP server serves it
    onchain_hash: bytes  # the digest the publication commits to
    encoding: HashEncoding
    served: bytes  # the bytes served at `path`

    @property
    def served_sha256(self) -> bytes:
        return sha256(self.served)

    @property
    def mismatch(self) -> bool:
        return self.served_sha256 != self.onchain_hash

    def locking(self) -> bytes:
        return publication_locking(self.onchain_hash, [self.uri], self.encoding)
