"""The Cauldron pool contract: its redeem script, locking bytecode, addresses and unlocking.

One owner pkh gives one redeem script and so one P2SH32 locking bytecode shared by all that
owner's pools (every token); a pool's identity is its outpoint, never this bytecode.
"""

from __future__ import annotations

from functools import lru_cache

from bch.cashaddr import Address, AddressKind
from bch.hashes import hash256
from bch.script import p2sh32_locking, push_data

# `OP_DEPTH OP_IF OP_DUP OP_HASH160 <pkh:20>`: the owner's key hash is spliced in after this.
REDEEM_PREFIX = bytes.fromhex("746376a914")
# Everything after the pkh: the withdraw branch's tail, then the whole trade branch.
REDEEM_SUFFIX = bytes.fromhex(
    "88ac67c0d1c0ce88c25288c0cdc0c788c0c6c0d095c0c6c0cc9490539502e80396c0cc7c94c0d3957ca268"
)
PKH_LEN = 20
REDEEM_LEN = len(REDEEM_PREFIX) + PKH_LEN + len(REDEEM_SUFFIX)  # 68
TRADE_UNLOCK_LEN = 1 + REDEEM_LEN  # one direct push (0x44) of the redeem script: 69


def _check_pkh(pkh: bytes) -> None:
    if len(pkh) != PKH_LEN:
        raise ValueError(f"owner pkh must be {PKH_LEN} bytes, got {len(pkh)}")


def redeem_script(owner_pkh: bytes) -> bytes:
    """The 68-byte pool redeem script for `owner_pkh`."""
    _check_pkh(owner_pkh)
    return REDEEM_PREFIX + owner_pkh + REDEEM_SUFFIX


@lru_cache(maxsize=4096)
def pool_locking_bytecode(owner_pkh: bytes) -> bytes:
    """P2SH32 `aa20 <hash256(redeem)> 87` (cached: the indexer asks for the same owners often)."""
    return p2sh32_locking(hash256(redeem_script(owner_pkh)))


def trade_unlocking(owner_pkh: bytes) -> bytes:
    """Trade/deposit-path unlocking bytecode: just the redeem push (`44 ‖ redeem`, 69 bytes).

    No signature: any extra push would make OP_DEPTH non-zero and select the owner's branch.
    """
    return push_data(redeem_script(owner_pkh))


def pool_address(owner_pkh: bytes, prefix: str = "bitcoincash") -> str:
    """Token-aware P2SH32 CashAddr of the owner's pools (pools hold tokens, so `r…`)."""
    script_hash = hash256(redeem_script(owner_pkh))
    return Address(AddressKind.P2SH32, script_hash, token_aware=True, prefix=prefix).encode()


def owner_address(owner_pkh: bytes, prefix: str = "bitcoincash") -> str:
    """The owner's token-aware P2PKH CashAddr (`z…`), as the API's `owner_p2pkh_addr`."""
    _check_pkh(owner_pkh)
    return Address(AddressKind.P2PKH, owner_pkh, token_aware=True, prefix=prefix).encode()
