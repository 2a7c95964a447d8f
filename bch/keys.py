"""secp256k1 keys: ECDSA (strict DER, low S) and BCH Schnorr signatures, WIF.

ECDSA comes straight from coincurve (libsecp256k1, RFC6979, always low S). BCH Schnorr is not
BIP340 and no wrapper provides it, so it is built here over coincurve's point arithmetic:
`e = SHA256(R.x ‖ compressed P ‖ m)`, R.y a quadratic residue, and the RFC6979 nonce with the
extra data "Schnorr+SHA256  " that libsecp256k1's BCH fork (and so libauth) uses, which makes
signatures byte-identical to theirs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

import coincurve

from bch.hashes import hash160, hash256

# Curve constants.
P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_HALF_N = N // 2
_SCHNORR_ALGO16 = b"Schnorr+SHA256  "

_WIF_MAINNET = 0x80
_WIF_TESTNET = 0xEF
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58)}


def _int(b: bytes) -> int:
    return int.from_bytes(b, "big")


def _b32(n: int) -> bytes:
    return n.to_bytes(32, "big")


def _is_square(y: int) -> bool:
    """Euler's criterion: jacobi(y) = 1 (y a nonzero quadratic residue mod p)."""
    return pow(y, (P - 1) // 2, P) == 1


# --- RFC6979 ----------------------------------------------------------------------------------


class _HmacDrbg:
    """RFC6979 §3.2 HMAC-SHA256 DRBG, laid out like libsecp256k1's rfc6979_hmac_sha256."""

    __slots__ = ("k", "retry", "v")

    def __init__(self, seed: bytes) -> None:
        self.v = b"\x01" * 32
        self.k = b"\x00" * 32
        self.k = self._mac(self.v + b"\x00" + seed)
        self.v = self._mac(self.v)
        self.k = self._mac(self.v + b"\x01" + seed)
        self.v = self._mac(self.v)
        self.retry = False

    def _mac(self, data: bytes) -> bytes:
        return hmac.new(self.k, data, hashlib.sha256).digest()

    def generate(self) -> bytes:
        if self.retry:
            self.k = self._mac(self.v + b"\x00")
            self.v = self._mac(self.v)
        self.v = self._mac(self.v)
        self.retry = True
        return self.v


def _schnorr_nonce(secret: bytes, digest: bytes) -> int:
    """RFC6979 nonce with the 16-byte algorithm tag, retried until it is a valid scalar.

    The digest is fed as is, not reduced mod n (RFC6979's bits2octets): libauth's libsecp256k1
    fork does the same, and only then do signatures of digests ≥ n match it.
    """
    drbg = _HmacDrbg(secret + digest + _SCHNORR_ALGO16)
    while True:
        k = _int(drbg.generate())
        if 0 < k < N:
            return k


# --- DER ----------------------------------------------------------------------------------------


def is_strict_der(sig: bytes) -> bool:
    """BIP66 strict DER encoding of an ECDSA signature (without a sighash byte)."""
    n = len(sig)
    if n < 8 or n > 72 or sig[0] != 0x30 or sig[1] != n - 2:
        return False
    len_r = sig[3]
    if 5 + len_r >= n:
        return False
    len_s = sig[5 + len_r]
    if len_r + len_s + 6 != n:
        return False
    if sig[2] != 0x02 or len_r == 0 or sig[4] & 0x80:
        return False
    if len_r > 1 and sig[4] == 0 and not sig[5] & 0x80:
        return False
    s_at = len_r + 6
    if sig[s_at - 2] != 0x02 or len_s == 0 or sig[s_at] & 0x80:
        return False
    return not (len_s > 1 and sig[s_at] == 0 and not sig[s_at + 1] & 0x80)


def decode_der(sig: bytes) -> tuple[int, int]:
    """(r, s) of a strict-DER signature; ValueError otherwise."""
    if not is_strict_der(sig):
        raise ValueError("signature is not strict DER")
    len_r = sig[3]
    return _int(sig[4 : 4 + len_r]), _int(sig[6 + len_r :])


def _der_int(x: int) -> bytes:
    raw = x.to_bytes(max(1, (x.bit_length() + 7) // 8), "big")
    if raw[0] & 0x80:
        raw = b"\x00" + raw
    return b"\x02" + bytes((len(raw),)) + raw


def encode_der(r: int, s: int) -> bytes:
    """Strict DER of (r, s); both must be in 1..n-1 (any S: callers normalise if they care)."""
    if not (0 < r < N and 0 < s < N):
        raise ValueError("r and s must be in 1..n-1")
    body = _der_int(r) + _der_int(s)
    return b"\x30" + bytes((len(body),)) + body


def is_low_s_der(sig: bytes) -> bool:
    """Strict DER with S ≤ n/2 (the BCH standardness and consensus rule)."""
    try:
        _, s = decode_der(sig)
    except ValueError:
        return False
    return 0 < s <= _HALF_N


# --- public keys --------------------------------------------------------------------------------


def _parse_pubkey(pubkey: bytes) -> coincurve.PublicKey | None:
    """Compressed (33) or uncompressed (65) SEC encodings only; None if invalid."""
    if not ((len(pubkey) == 33 and pubkey[0] in (2, 3)) or (len(pubkey) == 65 and pubkey[0] == 4)):
        return None
    try:
        return coincurve.PublicKey(pubkey)
    except ValueError:
        return None


def verify_ecdsa(pubkey: bytes, digest: bytes, der_sig: bytes) -> bool:
    """ECDSA over a 32-byte digest; strict DER and low S are required."""
    if len(digest) != 32 or not is_low_s_der(der_sig):
        return False
    key = _parse_pubkey(pubkey)
    if key is None:
        return False
    try:
        return bool(key.verify(der_sig, digest, hasher=None))
    except ValueError:
        return False


def _schnorr_challenge(r_x: bytes, compressed_pubkey: bytes, digest: bytes) -> int:
    return _int(hashlib.sha256(r_x + compressed_pubkey + digest).digest()) % N


def verify_schnorr(pubkey: bytes, digest: bytes, sig64: bytes) -> bool:
    """BCH Schnorr: R = sG − eP must be finite, have a square y, and R.x must equal r."""
    if len(sig64) != 64 or len(digest) != 32:
        return False
    key = _parse_pubkey(pubkey)
    if key is None:
        return False
    r, s = _int(sig64[:32]), _int(sig64[32:])
    if r >= P or s >= N:
        return False
    e = _schnorr_challenge(sig64[:32], key.format(compressed=True), digest)
    terms: list[coincurve.PublicKey] = []
    if s:
        terms.append(coincurve.PublicKey.from_valid_secret(_b32(s)))
    if e:
        terms.append(key.multiply(_b32(N - e)))
    if not terms:
        return False  # R would be the point at infinity
    try:
        point = terms[0] if len(terms) == 1 else coincurve.PublicKey.combine_keys(terms)
    except ValueError:
        return False  # sG and eP cancel: infinity
    x, y = point.point()
    return _is_square(y) and x == r


# --- private keys -------------------------------------------------------------------------------


def _b58check_encode(payload: bytes) -> str:
    data = payload + hash256(payload)[:4]
    n = _int(data)
    out = []
    while n:
        n, rem = divmod(n, 58)
        out.append(_B58[rem])
    zeros = len(data) - len(data.lstrip(b"\x00"))
    return "1" * zeros + "".join(reversed(out))


def _b58check_decode(text: str) -> bytes:
    n = 0
    for ch in text:
        digit = _B58_INDEX.get(ch)
        if digit is None:
            raise ValueError(f"invalid base58 character {ch!r}")
        n = n * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    data = b"\x00" * zeros + body
    if len(data) < 5 or hash256(data[:-4])[:4] != data[-4:]:
        raise ValueError("base58check checksum mismatch")
    return data[:-4]


@dataclass(frozen=True, slots=True)
class PrivateKey:
    """A secp256k1 secret scalar with its compressed public key (the only form we use)."""

    secret: bytes = field(repr=False)
    public_key: bytes = field(init=False, repr=False)
    pkh: bytes = field(init=False)
    _key: coincurve.PrivateKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.secret) != 32 or not 0 < _int(self.secret) < N:
            raise ValueError("private key must be 32 bytes encoding 1..n-1")
        key = coincurve.PrivateKey(bytes(self.secret))
        public_key = key.public_key.format(compressed=True)
        object.__setattr__(self, "secret", bytes(self.secret))
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "public_key", public_key)
        object.__setattr__(self, "pkh", hash160(public_key))

    @classmethod
    def from_bytes(cls, b32: bytes) -> PrivateKey:
        return cls(b32)

    @classmethod
    def from_int(cls, n: int) -> PrivateKey:
        if not 0 < n < N:
            raise ValueError("private key must be in 1..n-1")
        return cls(_b32(n))

    @classmethod
    def generate(cls) -> PrivateKey:
        return cls.from_int(secrets.randbelow(N - 1) + 1)

    @classmethod
    def from_wif(cls, wif: str) -> PrivateKey:
        """Compressed WIF (mainnet `K`/`L`, testnet `c`); uncompressed keys are refused because
        their P2PKH hash differs from the compressed key's one this class uses."""
        data = _b58check_decode(wif)
        if len(data) == 33 and data[0] in (_WIF_MAINNET, _WIF_TESTNET):
            raise ValueError("uncompressed WIF keys are not supported")
        if len(data) != 34 or data[0] not in (_WIF_MAINNET, _WIF_TESTNET) or data[33] != 1:
            raise ValueError("not a compressed WIF private key")
        return cls(data[1:33])

    def to_wif(self, testnet: bool = False) -> str:
        version = _WIF_TESTNET if testnet else _WIF_MAINNET
        return _b58check_encode(bytes((version,)) + self.secret + b"\x01")

    def sign_ecdsa(self, digest32: bytes) -> bytes:
        """Strict DER, low S, RFC6979 deterministic: identical to libauth's output, except for
        digests ≥ n (probability ~2⁻¹²⁸), whose nonce libsecp256k1 now derives from the digest
        reduced mod n while libauth's older fork does not (both signatures are valid)."""
        if len(digest32) != 32:
            raise ValueError("digest must be 32 bytes")
        return bytes(self._key.sign(digest32, hasher=None))

    def sign_schnorr(self, digest32: bytes) -> bytes:
        """64-byte BCH Schnorr signature r ‖ s, deterministic."""
        if len(digest32) != 32:
            raise ValueError("digest must be 32 bytes")
        k = _schnorr_nonce(self.secret, digest32)
        x, y = coincurve.PublicKey.from_valid_secret(_b32(k)).point()
        if not _is_square(y):
            k = N - k  # -kG has the same x and the square y
        r_x = _b32(x)
        e = _schnorr_challenge(r_x, self.public_key, digest32)
        return r_x + _b32((k + e * _int(self.secret)) % N)
