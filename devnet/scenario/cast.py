"""The scenario's tokens: a fixed cast covering every registry case, then generated extras."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a token publishes its registry: in its genesis transaction through the devnet's IPFS
# gateway (raw digest, or the hex string as ASCII as some publishers did); in a later authchain
# transaction over http; in its genesis over http with a deliberately wrong hash; or not at all.
BcmrMode = Literal["genesis-ipfs", "genesis-ipfs-ascii", "authchain-http", "mismatch-http", "none"]


@dataclass(frozen=True, slots=True)
class TokenSpec:
    symbol: str
    name: str
    decimals: int
    bcmr: BcmrMode
    description: str


CAST: tuple[TokenSpec, ...] = (
    # The busy token: the one with thousands of pools.
    TokenSpec("SPICE", "Spice", 8, "genesis-ipfs", "The busiest token on the devnet."),
    TokenSpec("FURU", "Furu", 0, "genesis-ipfs-ascii", "Published with its hash as hex text."),
    # Two tokens share a symbol: a symbol lookup must say it is ambiguous.
    TokenSpec("DRGN", "Dragon Coin", 2, "genesis-ipfs", "One of two tokens called DRGN."),
    TokenSpec("DRGN", "Dragon Gold", 6, "authchain-http", "The other DRGN, published later."),
    TokenSpec("LUMEN", "Lumen", 4, "mismatch-http", "Its registry was edited after publishing."),
    TokenSpec("QUIET", "Quiet Token", 3, "none", "No registry at all."),
)


def token_spec(index: int) -> TokenSpec:
    if index < len(CAST):
        return CAST[index]
    n = index - len(CAST) + 1
    return TokenSpec(f"TK{n}", f"Token {n}", (n * 3) % 9, "genesis-ipfs", f"Generated token {n}.")
