"""Bitcoin Cash Metadata Registries (BCMR v2): authchains, on-chain publications, registry JSON.

Facts (../shared/reference/oracle-registry-lending.md):

- An **authchain** starts at the authbase transaction; each next link spends output 0 of the
  previous one; the authhead is the link whose output 0 is unspent. A CashToken's category id is
  its authbase txid (the genesis transaction spends the authbase's output 0, so the genesis is
  the first link after it). A link whose output 0 is provably unspendable (OP_RETURN) or absent
  **burns** the identity: the chain ends there.
- A **publication** is the first output of an authchain transaction whose bytecode starts with
  `6a 04 42434d52` (`OP_RETURN "BCMR"`), then a push of sha256(registry bytes) in digest order,
  then zero or more UTF-8 URI pushes. Some publishers pushed the digest's hex text in ASCII
  (64 bytes): both are accepted. Bytecode is parsed, never a node's `asm`.
- The **hash check** compares the pushed hash with sha256 of the *raw downloaded bytes*.
- The **current snapshot** of an identity is the newest one whose timestamp has passed.

Everything here is pure: the fetch lives in `indexer.registry_fetch`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bch.encoding import DecodeError
from bch.hashes import sha256
from bch.script import OP_RETURN, push_data, pushes
from bch.tx import OutPoint, Transaction

BCMR_TAG = b"BCMR"
BCMR_HEAD = bytes((OP_RETURN,)) + push_data(BCMR_TAG)  # 6a 04 42434d52
WELL_KNOWN_PATH = "/.well-known/bitcoin-cash-metadata-registry.json"
DEFAULT_IPFS_GATEWAY = "https://ipfs.io/ipfs/"

HashEncoding = Literal["digest", "ascii-hex"]
_HEX64 = re.compile(rb"[0-9a-fA-F]{64}")
_HEX64_STR = re.compile(r"[0-9a-f]{64}")


# --- publications --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Publication:
    """A parsed `OP_RETURN "BCMR"` output."""

    output_index: int
    expected_hash: bytes  # the 32-byte digest, whatever the push encoding
    hash_encoding: HashEncoding
    uris: tuple[str, ...]  # as pushed (URIs that are not valid UTF-8 are left out)


def parse_publication(locking: bytes, output_index: int = 0) -> Publication | None:
    """The publication an output carries, or None (not BCMR, not push-only, or a hash push that
    is neither a 32-byte digest nor its 64-character hex text)."""
    if not locking.startswith(BCMR_HEAD):
        return None
    try:
        items = pushes(locking[1:])
    except (DecodeError, ValueError):
        return None
    if len(items) < 2:
        return None
    pushed = items[1]
    if len(pushed) == 32:
        digest, encoding = pushed, "digest"
    elif _HEX64.fullmatch(pushed):
        digest, encoding = bytes.fromhex(pushed.decode()), "ascii-hex"
    else:
        return None
    uris: list[str] = []
    for raw in items[2:]:
        try:
            uris.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return Publication(output_index, digest, encoding, tuple(uris))  # type: ignore[arg-type]


def find_publication(tx: Transaction) -> Publication | None:
    """Only the first BCMR output of a transaction counts."""
    for i, out in enumerate(tx.outputs):
        if out.locking.startswith(BCMR_HEAD):
            return parse_publication(out.locking, i)
    return None


def resolve_uri(uri: str, ipfs_gateway: str = DEFAULT_IPFS_GATEWAY) -> str | None:
    """The URL to fetch for a published URI: no scheme ⇒ https://; an https URI without a path
    ⇒ the well-known path; `ipfs://<cid>[/path]` ⇒ through the gateway. None: unsupported."""
    uri = uri.strip()
    if not uri:
        return None
    if uri.startswith("ipfs://"):
        rest = uri.removeprefix("ipfs://").lstrip("/")
        if not rest:
            return None
        return ipfs_gateway.rstrip("/") + "/" + rest
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, rest = "https", uri
    scheme = scheme.lower()
    if scheme not in ("https", "http"):
        return None
    host, slash, path = rest.partition("/")
    if not host:
        return None
    if scheme == "https" and not (slash and path):
        return f"https://{host}{WELL_KNOWN_PATH}"
    return f"{scheme}://{host}/{path}"


def hash_matches(expected: bytes, content: bytes) -> bool:
    """sha256 of the raw bytes equals the published digest (`expected`, 32 bytes), or the
    published value was the hex text and equals the hex of the raw bytes' sha256."""
    actual = sha256(content)
    if len(expected) == 32:
        return actual == expected
    return expected.lower() == actual.hex().encode()


# --- authchains ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuthchainLink:
    """`tx` extends the authchain whose head output was `spent`."""

    spent: OutPoint
    input_index: int
    burned: bool  # the new link has no spendable output 0: the identity ends here


def authchain_link(tx: Transaction, head: OutPoint) -> AuthchainLink | None:
    """Whether `tx` is the next link after the authchain head `head` (it spends `head`, which
    must be an output 0). A link whose output 0 is missing or OP_RETURN burns the identity."""
    if head.index != 0:
        raise ValueError("an authchain head is always an output 0")
    for i, inp in enumerate(tx.inputs):
        if inp.outpoint == head:
            first = tx.outputs[0].locking if tx.outputs else b""
            burned = not tx.outputs or first[:1] == bytes((OP_RETURN,))
            return AuthchainLink(head, i, burned)
    return None


def genesis_categories(tx: Transaction) -> list[bytes]:
    """Token categories (wire order) `tx` creates: an output's category equal to the txid of an
    input spending an output 0 (the CashTokens genesis rule)."""
    candidates = {inp.outpoint.txid for inp in tx.inputs if inp.outpoint.index == 0}
    found: list[bytes] = []
    for out in tx.outputs:
        t = out.token
        if t is not None and t.category in candidates and t.category not in found:
            found.append(t.category)
    return found


# --- registry JSON (v2) --------------------------------------------------------------------------


def parse_time(text: str) -> int | None:
    """An ISO 8601 timestamp as Unix seconds (UTC when no offset is given); None if invalid."""
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.UTC)
    return int(t.timestamp())


def validate_registry(doc: Any) -> list[str]:
    """Errors against the BCMR v2 schema's structure (empty: valid). Checks what the service
    relies on: `version`, `latestRevision`, `registryIdentity`, and every identity snapshot's
    `name`, `description`, `token` and `uris` types; unknown extra keys are allowed."""
    errors: list[str] = []
    if not isinstance(doc, dict):
        return ["the registry is not a JSON object"]
    version = doc.get("version")
    if not isinstance(version, dict) or not all(
        isinstance(version.get(k), int) and not isinstance(version.get(k), bool) and version[k] >= 0
        for k in ("major", "minor", "patch")
    ):
        errors.append("version must be {major, minor, patch} non-negative integers")
    latest = doc.get("latestRevision")
    if not isinstance(latest, str) or parse_time(latest) is None:
        errors.append("latestRevision must be an ISO 8601 timestamp")
    ident = doc.get("registryIdentity")
    if isinstance(ident, str):
        if not _HEX64_STR.fullmatch(ident):
            errors.append("registryIdentity as a string must be an authbase (64 hex)")
    elif isinstance(ident, dict):
        if not isinstance(ident.get("name"), str):
            errors.append("registryIdentity.name must be a string")
    else:
        errors.append("registryIdentity must be an object or an authbase")
    identities = doc.get("identities", {})
    if not isinstance(identities, dict):
        errors.append("identities must be an object")
        return errors
    for authbase, history in identities.items():
        where = f"identities.{authbase}"
        if not _HEX64_STR.fullmatch(authbase):
            errors.append(f"{where}: the key must be a lower-case authbase (64 hex)")
        if not isinstance(history, dict) or not history:
            errors.append(f"{where}: must map timestamps to snapshots")
            continue
        for when, snap in history.items():
            if parse_time(when) is None:
                errors.append(f"{where}.{when}: not an ISO 8601 timestamp")
            errors += [f"{where}.{when}: {e}" for e in _snapshot_errors(snap)]
    return errors


def _snapshot_errors(snap: Any) -> list[str]:
    if not isinstance(snap, dict):
        return ["a snapshot must be an object"]
    errors: list[str] = []
    if not isinstance(snap.get("name"), str):
        errors.append("name must be a string")
    if "description" in snap and not isinstance(snap["description"], str):
        errors.append("description must be a string")
    token = snap.get("token")
    if token is not None:
        if not isinstance(token, dict):
            errors.append("token must be an object")
        else:
            if not isinstance(token.get("category"), str) or not _HEX64_STR.fullmatch(
                token["category"]
            ):
                errors.append("token.category must be 64 lower-case hex")
            if not isinstance(token.get("symbol"), str):
                errors.append("token.symbol must be a string")
            decimals = token.get("decimals", 0)
            if not isinstance(decimals, int) or isinstance(decimals, bool):
                errors.append("token.decimals must be an integer")
            elif not 0 <= decimals <= 18:
                errors.append("token.decimals must be 0..18")
    uris = snap.get("uris")
    if uris is not None and (
        not isinstance(uris, dict) or not all(isinstance(v, str) for v in uris.values())
    ):
        errors.append("uris must map names to strings")
    return errors


def current_snapshot(history: Mapping[str, Any], now: int) -> tuple[str, Mapping[str, Any]] | None:
    """(timestamp, snapshot) of the newest snapshot whose timestamp is ≤ `now`."""
    best: tuple[int, str, Mapping[str, Any]] | None = None
    for when, snap in history.items():
        t = parse_time(when)
        if t is None or t > now or not isinstance(snap, Mapping):
            continue
        if best is None or t > best[0]:
            best = (t, when, snap)
    return None if best is None else (best[1], best[2])


def identity_snapshot(
    doc: Mapping[str, Any], authbase_hex: str, now: int
) -> tuple[str, Mapping[str, Any]] | None:
    """The current snapshot of one identity of a (validated) registry document."""
    identities = doc.get("identities")
    if not isinstance(identities, Mapping):
        return None
    history = identities.get(authbase_hex)
    if not isinstance(history, Mapping):
        return None
    return current_snapshot(history, now)


@dataclass(frozen=True, slots=True)
class FileMeta:
    expected_hash: str | None  # hex of the published digest (off chain: the copy's own)
    actual_hash: str | None  # hex sha256 of the raw bytes fetched
    source: str  # "onchain", or the off-chain source's name


def flatten_entry(snapshot: Mapping[str, Any], filemeta: FileMeta) -> dict[str, Any]:
    """The API's registry entry: `name, description, token.{category, symbol, decimals},
    uris.{icon, web}, filemeta.{expected_hash, actual_hash, source}`."""
    token = snapshot.get("token")
    uris = snapshot.get("uris")
    token_out: dict[str, Any] | None = None
    if isinstance(token, Mapping):
        token_out = {
            "category": token.get("category"),
            "symbol": token.get("symbol"),
            "decimals": token.get("decimals", 0),
        }
    uris_map: Mapping[str, Any] = uris if isinstance(uris, Mapping) else {}
    return {
        "name": snapshot.get("name"),
        "description": snapshot.get("description", ""),
        "token": token_out,
        "uris": {"icon": uris_map.get("icon"), "web": uris_map.get("web")},
        "filemeta": {
            "expected_hash": filemeta.expected_hash,
            "actual_hash": filemeta.actual_hash,
            "source": filemeta.source,
        },
    }


def identities_of(doc: Mapping[str, Any]) -> Sequence[str]:
    identities = doc.get("identities")
    return list(identities) if isinstance(identities, Mapping) else []
