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
from urllib.parse import urlsplit

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


def icon_svg(category_hex: str, symbol: str) -> bytes:
    """A token's registry icon: a disc in a colour taken from its category, with the symbol's
    first letter, so explorers and wallets have an image to show at `uris.icon`."""
    hue = int(category_hex[:4], 16) % 360
    letter = (symbol[:1] or "?").upper().replace("&", "&amp;").replace("<", "&lt;")
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">'
        f'<circle cx="32" cy="32" r="32" fill="hsl({hue},55%,45%)"/>'
        '<text x="32" y="43" font-family="sans-serif" font-size="30" font-weight="700" '
        f'fill="#fff" text-anchor="middle">{letter}</text></svg>'
    ).encode()


def icons(documents: dict[str, bytes]) -> dict[str, bytes]:
    """Icon paths (on the devnet's HTTP server) and their SVGs, for every served registry
    document that names an icon there."""
    out: dict[str, bytes] = {}
    for body in documents.values():
        try:
            doc = json.loads(body)
            identities = doc["identities"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(identities, dict):
            continue
        for category, history in identities.items():
            if not isinstance(history, dict):
                continue
            for snapshot in history.values():
                uri = snapshot.get("uris", {}).get("icon") if isinstance(snapshot, dict) else None
                symbol = snapshot.get("token", {}).get("symbol", "") if uri else ""
                if isinstance(uri, str) and uri.startswith("http"):
                    out[urlsplit(uri).path] = icon_svg(str(category), str(symbol))
    return out


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
