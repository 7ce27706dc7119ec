"""Run an ASGI app's requests as one principal (the speak function), for the IAM audit.

The app serves in the test's server thread; every request, and whatever tasks and worker
threads (asyncio.to_thread) it starts, runs with the principal set, so the AWS calls the app
makes are audited as that principal's role.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from .calls import acting_as


class ActingAs:
    def __init__(self, app: ASGIApp, principal: str) -> None:
        self.app = app
        self.principal = principal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with acting_as(self.principal):
            await self.app(scope, receive, send)
