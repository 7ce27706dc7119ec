"""What an AWS front door does first: check a request's SigV4 signature.

The fakes in front of real local servers (a Lambda function URL with AuthType AWS_IAM, the
SageMaker response-stream runtime) use this to answer 403 as AWS does when a request is unsigned,
signed for the wrong service or region, or signed with a key they do not know. The signature is
recomputed with botocore's signer from only the headers the client says it signed.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class SignatureRejected(Exception):
    pass


def verify(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    secrets: Mapping[str, str],
    region: str,
    service: str,
) -> None:
    """Raise `SignatureRejected` unless the request carries a valid SigV4 signature."""
    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "")
    algorithm, _, rest = authorization.partition(" ")
    if algorithm != "AWS4-HMAC-SHA256":
        raise SignatureRejected("missing or non-SigV4 Authorization header")
    parts = dict(item.strip().split("=", 1) for item in rest.split(","))
    access_key, _day, signed_region, signed_service, _ = parts["Credential"].split("/")
    if (signed_region, signed_service) != (region, service):
        raise SignatureRejected(f"signed for {signed_service} in {signed_region}, not {service} in {region}")
    secret = secrets.get(access_key)
    if secret is None:
        raise SignatureRejected(f"unknown access key {access_key}")
    signed = parts["SignedHeaders"].split(";")
    request = AWSRequest(method=method, url=url, data=body, headers={h: lowered[h] for h in signed if h in lowered})
    request.context["timestamp"] = lowered.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(access_key, secret, lowered.get("x-amz-security-token")), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if not hmac.compare_digest(expected, parts["Signature"]):
        raise SignatureRejected("The request signature we calculated does not match the signature you provided.")


class RequireSigV4:
    """ASGI middleware: HTTP requests must be SigV4-signed for `service` (else 403, as AWS)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secrets: Callable[[], Mapping[str, str]],
        region: str,
        service: str,
        rejections: list[str] | None = None,
    ) -> None:
        self.app = app
        self.secrets = secrets
        self.region = region
        self.service = service
        self.rejections = rejections if rejections is not None else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        query = scope.get("query_string", b"").decode()
        url = f"{scope['scheme']}://{host}{scope['path']}" + (f"?{query}" if query else "")
        try:
            verify(
                scope["method"], url, headers, body, secrets=self.secrets(), region=self.region, service=self.service
            )
        except (SignatureRejected, KeyError, ValueError) as exc:
            self.rejections.append(str(exc))
            await _forbidden(send, str(exc))
            return
        await self.app(scope, _replay(messages, receive), send)


def _replay(messages: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _forbidden(send: Send, message: str) -> None:
    body = ('{"Message":"' + message.replace('"', "'") + '"}').encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"application/json"), (b"x-amzn-errortype", b"AccessDeniedException")],
        }
    )
    await send({"type": "http.response.body", "body": body})
