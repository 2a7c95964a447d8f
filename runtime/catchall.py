"""The outermost ASGI layer of both HTTP services: an exception nothing else handled is logged
with its traceback and answered with a JSON error the service chooses — never a bare 500."""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class CatchAll:
    def __init__(
        self, app: ASGIApp, *, answer: Callable[[Scope], ASGIApp], logger: logging.Logger
    ) -> None:
        self.app = app
        self.answer = answer
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            self.logger.exception("unhandled error answering %s %s", scope["method"], scope["path"])
            if started:
                return  # the status line is out: nothing better than cutting the body short
            await self.answer(scope)(scope, receive, send)
