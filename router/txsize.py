"""The transaction size model the router prices and caps routes with (bytes, worst case).

Fees are sized for the largest encodings (DER signatures, 9-byte token amounts, full-width
counts) so the signed transaction never pays below the asked rate, and the pool cap keeps every
route inside one standard transaction.
"""

from __future__ import annotations

from bch.encoding import compact_size_len
from bch.policy import MAX_STANDARD_TX_SIZE
from bch.token import MAX_TOKEN_AMOUNT
from router.pools import POOL_INPUT_SIZE, pool_output_size

TX_OVERHEAD = 4 + 4 + 3 + 3  # version, locktime, input and output counts (worst case)
# P2PKH unlocking at its largest: push of a 73-byte DER signature + sighash byte, push of a
# 33-byte key. Fees are sized for it so the signed transaction never drops below the rate.
P2PKH_UNLOCK_WORST = 1 + 73 + 1 + 1 + 33  # 109
FUNDING_INPUT_WORST = 32 + 4 + 1 + P2PKH_UNLOCK_WORST + 4  # 150
POOL_TRADE_WORST = POOL_INPUT_SIZE + pool_output_size(MAX_TOKEN_AMOUNT)  # 197
USER_OUTPUT_WORST = 8 + 1 + 35 + 34 + 9  # P2SH32 holding an FT with the largest amount: 87
FUNGIBLE_PREFIX_HEAD = 1 + 32 + 1  # a token prefix before its amount: marker, category, bitfield
USER_OUTPUTS_MAX = 5  # bought asset, two token changes, BCH change, router fee


def max_pools_for(funding_inputs: int, user_outputs: int = USER_OUTPUTS_MAX) -> int:
    """How many pools fit a standard transaction next to this much funding (worst sizes)."""
    fixed = TX_OVERHEAD + funding_inputs * FUNDING_INPUT_WORST + user_outputs * USER_OUTPUT_WORST
    return max(0, (MAX_STANDARD_TX_SIZE - fixed) // POOL_TRADE_WORST)


def output_size(locking: int, token_amount: int | None = None) -> int:
    """Bytes of an output with a `locking`-byte bytecode and, when `token_amount` is given,
    that many fungible tokens of one category (no NFT): `TxOutput.size()` without the object."""
    script = locking
    if token_amount is not None:
        script += FUNGIBLE_PREFIX_HEAD + compact_size_len(token_amount)
    return 8 + compact_size_len(script) + script
