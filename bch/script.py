"""Script bytecode: opcodes, minimal pushes, parsing, and the standard locking templates."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum

from bch.encoding import DecodeError
from bch.hashes import hash160, hash256, sha256

OP_0 = 0x00
OP_PUSHDATA1 = 0x4C
OP_PUSHDATA2 = 0x4D
OP_PUSHDATA4 = 0x4E
OP_1NEGATE = 0x4F
OP_1 = 0x51
OP_16 = 0x60
OP_RETURN = 0x6A
OP_DUP = 0x76
OP_EQUAL = 0x87
OP_EQUALVERIFY = 0x88
OP_HASH160 = 0xA9
OP_HASH256 = 0xAA
OP_CODESEPARATOR = 0xAB
OP_CHECKSIG = 0xAC
OP_CHECKMULTISIG = 0xAE
OP_CHECKDATASIG = 0xBA


def push_data(data: bytes) -> bytes:
    """The minimal push of `data` (as the VM's minimal-push rule requires)."""
    n = len(data)
    if n == 0:
        return bytes((OP_0,))
    if n == 1:
        if 1 <= data[0] <= 16:
            return bytes((OP_1 + data[0] - 1,))
        if data[0] == 0x81:
            return bytes((OP_1NEGATE,))
    if n < OP_PUSHDATA1:
        return bytes((n,)) + data
    if n <= 0xFF:
        return bytes((OP_PUSHDATA1, n)) + data
    if n <= 0xFFFF:
        return bytes((OP_PUSHDATA2,)) + n.to_bytes(2, "little") + data
    return bytes((OP_PUSHDATA4,)) + n.to_bytes(4, "little") + data


def encode_script_number(n: int) -> bytes:
    """Minimal VM number encoding (little-endian sign-magnitude)."""
    if n == 0:
        return b""
    negative = n < 0
    magnitude = -n if negative else n
    out = bytearray(magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "little"))
    if out[-1] & 0x80:
        out.append(0x80 if negative else 0x00)
    elif negative:
        out[-1] |= 0x80
    return bytes(out)


def decode_script_number(data: bytes) -> int:
    if not data:
        return 0
    value = int.from_bytes(data, "little")
    if data[-1] & 0x80:
        return -(value & ~(0x80 << (8 * (len(data) - 1))))
    return value


def push_int(n: int) -> bytes:
    """Push a number with the shortest encoding (OP_0, OP_1NEGATE, OP_1..OP_16 or data)."""
    if n == 0:
        return bytes((OP_0,))
    if n == -1:
        return bytes((OP_1NEGATE,))
    if 1 <= n <= 16:
        return bytes((OP_1 + n - 1,))
    return push_data(encode_script_number(n))


def iter_ops(bytecode: bytes) -> Iterator[tuple[int, bytes | None]]:
    """Yield (opcode, pushed data or None) for each operation; DecodeError if truncated."""
    pos = 0
    n = len(bytecode)
    while pos < n:
        op = bytecode[pos]
        pos += 1
        if op == OP_0 or op > OP_PUSHDATA4:
            yield op, (b"" if op == OP_0 else None)
            continue
        if op < OP_PUSHDATA1:
            size = op
        else:
            width = 1 if op == OP_PUSHDATA1 else 2 if op == OP_PUSHDATA2 else 4
            if pos + width > n:
                raise DecodeError(f"truncated push length at offset {pos - 1}")
            size = int.from_bytes(bytecode[pos : pos + width], "little")
            pos += width
        if pos + size > n:
            raise DecodeError(f"push of {size} bytes at offset {pos} runs past the end")
        yield op, bytecode[pos : pos + size]
        pos += size


def is_push_only(bytecode: bytes) -> bool:
    try:
        return all(op <= OP_16 for op, _ in iter_ops(bytecode))
    except DecodeError:
        return False


def pushes(bytecode: bytes) -> list[bytes]:
    """The pushed items of a push-only script (OP_N pushes decoded to their number bytes)."""
    items: list[bytes] = []
    for op, data in iter_ops(bytecode):
        if data is not None:
            items.append(data)
        elif op == OP_1NEGATE:
            items.append(b"\x81")
        elif OP_1 <= op <= OP_16:
            items.append(bytes((op - OP_1 + 1,)))
        else:
            raise DecodeError(f"opcode {op:#04x} is not a push")
    return items


# --- standard locking bytecode templates -------------------------------------------------


def p2pkh_locking(pkh: bytes) -> bytes:
    if len(pkh) != 20:
        raise ValueError("P2PKH needs a 20-byte public key hash")
    return b"\x76\xa9\x14" + pkh + b"\x88\xac"


def p2sh20_locking(script_hash: bytes) -> bytes:
    if len(script_hash) != 20:
        raise ValueError("P2SH20 needs a 20-byte script hash")
    return b"\xa9\x14" + script_hash + b"\x87"


def p2sh32_locking(script_hash: bytes) -> bytes:
    if len(script_hash) != 32:
        raise ValueError("P2SH32 needs a 32-byte script hash")
    return b"\xaa\x20" + script_hash + b"\x87"


def p2pkh_locking_for_pubkey(pubkey: bytes) -> bytes:
    return p2pkh_locking(hash160(pubkey))


def p2sh20_locking_for_redeem(redeem: bytes) -> bytes:
    return p2sh20_locking(hash160(redeem))


def p2sh32_locking_for_redeem(redeem: bytes) -> bytes:
    return p2sh32_locking(hash256(redeem))


class ScriptKind(Enum):
    P2PKH = "p2pkh"
    P2SH20 = "p2sh20"
    P2SH32 = "p2sh32"
    OP_RETURN = "op_return"
    OTHER = "other"


def classify_locking(bytecode: bytes) -> tuple[ScriptKind, bytes]:
    """Return the template kind and its hash (empty for OP_RETURN / other)."""
    n = len(bytecode)
    if n == 25 and bytecode[:3] == b"\x76\xa9\x14" and bytecode[23:] == b"\x88\xac":
        return ScriptKind.P2PKH, bytecode[3:23]
    if n == 23 and bytecode[:2] == b"\xa9\x14" and bytecode[22] == OP_EQUAL:
        return ScriptKind.P2SH20, bytecode[2:22]
    if n == 35 and bytecode[:2] == b"\xaa\x20" and bytecode[34] == OP_EQUAL:
        return ScriptKind.P2SH32, bytecode[2:34]
    if n and bytecode[0] == OP_RETURN:
        return ScriptKind.OP_RETURN, b""
    return ScriptKind.OTHER, b""


def scripthash(locking: bytes) -> bytes:
    """Electrum's script hash in digest order: sha256 of the locking bytecode, never the token
    prefix, so a token-carrying output is found under the same hash as a plain one."""
    return sha256(locking)


def electrum_scripthash(locking: bytes) -> str:
    """The script hash as Electrum servers take it: reversed, hex."""
    return sha256(locking)[::-1].hex()
