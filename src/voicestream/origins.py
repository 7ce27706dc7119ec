"""Who may talk to a server voicestream runs on someone's machine: Host and Origin rules.

A web page the user happens to open can reach a server on their loopback interface: a
`fetch(..., {mode: "no-cors"})` or a WebSocket needs no permission, and DNS rebinding (the
page's own host name re-pointed at 127.0.0.1) even lets the page read the answers. Two checks
close that, in `RequestGuard`, an ASGI middleware:

- Host allow-list (the local stack and the signing proxy): the Host header must name the server
  as bound (`allowed_hosts`: loopback names, the bound address, what the operator adds), else
  421 misdirected_request. A rebound name is never on the list.
- Origin: a request without one (curl, SDKs, SageMaker's sidecar) passes. One with an Origin
  passes when it is the same origin as the request (`http(s)://<its allowed Host>`, only where
  Hosts are checked) or is listed in `origins`; anything else is 403 forbidden_origin. A
  WebSocket handshake is refused the same way (before it is accepted, so uvicorn answers 403).

The Kokoro server itself (the container) checks no Host: SageMaker and load balancers send
their own. It refuses WebSocket handshakes and requests from any Origin not configured.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from voicestream.wire.errors import CodedError, ErrorCode

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether a bind address (or name) stays on this machine."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_with_port(host: str, port: int) -> str:
    host = host.lower()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


def allowed_hosts(bind_host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host headers that name a server bound to `bind_host:port`: the loopback names, the
    bound address itself (not a wildcard), and `extra` names (host or host:port)."""
    names = [*LOOPBACK_NAMES, *([] if bind_host in WILDCARDS else [bind_host])]
    hosts = {_host_with_port(name, port) for name in names}
    hosts |= {_host_with_port(name, port) for name in extra}
    if port == 80:  # browsers leave the default port out of Host
        hosts |= {host.rsplit(":", 1)[0] for host in hosts}
    return frozenset(hosts)


class RequestGuard:
    """ASGI middleware: the Host and Origin rules of the module docstring.

    `hosts`: the allowed Host headers (`allowed_hosts`), or None to accept any Host.
    `origins`: origins (scheme://host[:port]) allowed besides the request's own.
    `http_origins`: False to check the Origin of WebSocket handshakes only (the Kokoro server,
    whose HTTP routes take JSON only: a page cannot send that without a preflight)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: Collection[str] | None = None,
        origins: Collection[str] = (),
        http_origins: bool = True,
    ) -> None:
        self.app = app
        self.hosts = None if hosts is None else frozenset(host.lower() for host in hosts)
        self.origins = frozenset(origin.lower().rstrip("/") for origin in origins)
        self.http_origins = http_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            # Closing before accepting makes uvicorn answer the handshake with 403.
            await send({"type": "websocket.close", "code": 1008, "reason": refusal.code})
        else:
            body = json.dumps(refusal.body()).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

    def refusal(self, scope: Scope) -> CodedError | None:
        """Why this request is refused, or None when it may pass."""
        headers = _headers(scope)
        host = headers.get("host", "").lower()
        if self.hosts is not None and host not in self.hosts:
            return CodedError(
                "this server does not answer for that Host (it is reached by its own address)",
                code=ErrorCode.MISDIRECTED_REQUEST,
                status=421,
            )
        origin = headers.get("origin")
        if origin is None or (scope["type"] == "http" and not self.http_origins):
            return None
        origin = origin.lower().rstrip("/")
        if origin in self.origins:
            return None
        if self.hosts is not None and origin in (f"http://{host}", f"https://{host}"):
            return None
        return CodedError(
            "requests from web pages of other origins are refused", code=ErrorCode.FORBIDDEN_ORIGIN, status=403
        )


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
