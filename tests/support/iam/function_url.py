"""A Lambda function URL's IAM check in front of an app served as that URL (AWS_IAM auth).

The app runs in the test's server thread, where the caller's identity is not known: the test
names the caller (the principal whose code sends these requests). Every request is recorded as
that principal's `InvokeFunctionUrl` call on this URL and answered 403, as Lambda would, when
the principal's role may not make it.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from .calls import acting_as, record_transport_call


class FunctionUrlIam:
    def __init__(self, app: ASGIApp, caller: str) -> None:
        self.app = app
        self.caller = caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host, port = scope["server"]
        with acting_as(self.caller):
            refused = record_transport_call("lambda", "InvokeFunctionUrl", {"FunctionUrl": f"http://{host}:{port}"})
        if refused is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"Message": refused}).encode()
        headers = [(b"content-type", b"application/json"), (b"x-amzn-errortype", b"AccessDeniedException")]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
