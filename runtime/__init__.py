"""What every component shares and no component owns: the `ladle up` component types, the usage
error and its exit status, async lifecycles, structured logs (`runtime.logs`), serving an ASGI
app and a service command's body.

It sits below every service (indexer, router, rest, broadcast) and the devnet, and imports none
of them, so that they meet here instead of in the composition root (`ladle.up`).
"""

from runtime.component import Component, DevnetView, Started, StartFn, UpContext
from runtime.lifecycle import Closing, Service
from runtime.usage import EXIT_FAILURE, EXIT_USAGE, UsageError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "Closing",
    "Component",
    "DevnetView",
    "Service",
    "StartFn",
    "Started",
    "UpContext",
    "UsageError",
]
