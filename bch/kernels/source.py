"""`bch`'s per-output loop, as a plain typed function: the wire bytes of fungible-token
outputs made from shared templates (`bch.tx.fungible_encodings`), a router's hundreds of
re-created pools a transaction.

`make` compiles this module with mypyc (`scripts/compile_kernels.py`; `bch.kernels` says
which build runs). It imports nothing from the project, so mypyc compiles it on its own; the
bytes are written through `librt.strings.BytesWriter`, which mypyc compiles to direct writes
into one buffer per output.
"""

from __future__ import annotations

from typing import Protocol

from librt.strings import BytesWriter, write_i64_le


class Template(Protocol):
    """What the loop reads of a `bch.tx.FungibleTemplate`."""

    @property
    def locking(self) -> bytes: ...

    @property
    def _leads(self) -> tuple[bytes, ...]: ...


def fungible_outputs(
    templates: tuple[Template, ...], values: tuple[int, ...], amounts: tuple[int, ...]
) -> list[bytes] | None:
    """Each output's wire bytes: value (8 bytes, little-endian), the template's lead for the
    amount's CompactSize width (script length, 0xef, category, bitfield), the amount's
    CompactSize, the locking bytecode. None when a value is outside 0..2^63−1 or an amount
    outside 1..2^63−1 (the caller's own loop then encodes or refuses it)."""
    n = len(values)
    if len(templates) != n or len(amounts) != n:
        raise ValueError(f"columns of {len(templates)}, {n} and {len(amounts)} outputs")
    out: list[bytes] = []
    w = BytesWriter()  # one buffer, emptied after each output
    for j in range(n):
        value = values[j]
        amount = amounts[j]
        # Within 0..2^63−1: the top bit of 64 clear (a shift, not a comparison with a
        # constant past a compiled loop's 62-bit integers).
        if value < 0 or value >> 63 or amount < 1 or amount >> 63:
            return None
        template = templates[j]
        leads = template._leads
        write_i64_le(w, value)
        if amount < 0xFD:  # the amount's CompactSize: one byte, or a marker and 2, 4, 8 bytes
            w.write(leads[0])
            w.append(amount)
        elif amount <= 0xFFFF:
            w.write(leads[1])
            w.append(0xFD)
            w.append(amount & 0xFF)
            w.append(amount >> 8)
        elif amount <= 0xFFFFFFFF:
            w.write(leads[2])
            w.append(0xFE)
            w.append(amount & 0xFF)
            w.append((amount >> 8) & 0xFF)
            w.append((amount >> 16) & 0xFF)
            w.append(amount >> 24)
        else:
            w.write(leads[3])
            w.append(0xFF)
            write_i64_le(w, amount)
        w.write(template.locking)
        out.append(w.getvalue())
        w.truncate(0)
    return out
