"""What every component shares and no component owns: the usage error and its exit status,
async lifecycles, structured logs (`runtime.logs`), serving an ASGI app (one process or
`runtime.workers`), a service command's body, and the supervisor of child processes that
`ladle up` composes (`runtime.supervise`).

It sits below every service (indexer, router, rest, broadcast) and the devnet, and imports none
of them, so that they meet here instead of in the composition root (`ladle.up`).
"""

from runtime.lifecycle import Closing, Service
from runtime.supervise import READY, Child, ChildFailedError, Supervisor
from runtime.usage import EXIT_FAILURE, EXIT_USAGE, UsageError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "READY",
    "Child",
    "ChildFailedError",
    "Closing",
    "Service",
    "Supervisor",
    "UsageError",
]
