"""The libauth bridge: an independent judge of the transactions we build or accept.

Both the devnet (its nodes' script checks) and the broadcast service (`verify_scripts`) use it,
and tests check our own builders against it; it lives below them all so that no production
module imports the devnet to reach it.
"""

from verify.libauth import (
    SCRIPT,
    VMS,
    AsyncLibauthVerifier,
    LibauthVerifier,
    VerifierUnavailable,
    VerifyResult,
)

__all__ = [
    "SCRIPT",
    "VMS",
    "AsyncLibauthVerifier",
    "LibauthVerifier",
    "VerifierUnavailable",
    "VerifyResult",
]
