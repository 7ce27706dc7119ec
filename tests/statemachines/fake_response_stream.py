"""SageMaker's InvokeEndpointWithResponseStream, played at the HTTP boundary over a real socket.

moto does not implement this operation, and no machine here reaches AWS. This Starlette app is
what boto3 talks HTTP to (the client's `endpoint_url` points here): it verifies the request's
SigV4 signature for SageMaker (403 otherwise), forwards the body (and the caller's
CustomAttributes, header `X-Amzn-SageMaker-Custom-Attributes`) to the model container's POST
/invocations as SageMaker does, and answers each chunk the container streams as a `PayloadPart`
event in the AWS event-stream encoding (a container error becomes SageMaker's 424 ModelError). Everything
above the socket is boto3's real serializer, signer and event-stream parser.
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.statemachines.sigv4 import RequireSigV4

_STRING = 7  # event-stream header value type
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"  # passed through to the container unchanged


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value


def encode_event(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths + CRC), headers, payload, message CRC."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message))


def payload_part(chunk: bytes) -> bytes:
    return encode_event(
        {":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"}, chunk
    )


@dataclass
class FakeResponseStreamRuntime:
    """`endpoints` maps endpoint names to the model container's base HTTP URL."""

    region: str
    endpoints: dict[str, str]
    secrets: Callable[[], Mapping[str, str]]
    calls: list[dict[str, str]] = field(default_factory=list)
    rejections: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        app = Starlette(routes=[Route("/endpoints/{name}/invocations-response-stream", self._invoke, methods=["POST"])])
        app.add_middleware(
            RequireSigV4, secrets=self.secrets, region=self.region, service="sagemaker", rejections=self.rejections
        )
        return app

    async def _invoke(self, request: Request) -> Response:
        name = request.path_params["name"]
        model = self.endpoints.get(name)
        if model is None:
            return _error(400, "ValidationError", f"Endpoint {name} of account 123456789012 not found.")
        body = await request.body()
        self.calls.append({"endpoint": name, "body": body.decode()})
        # SageMaker hands the container the caller's ContentType as Content-Type.
        headers = {"content-type": request.headers.get("content-type", "application/octet-stream")}
        custom_attributes = request.headers.get(CUSTOM_ATTRIBUTES)
        if custom_attributes is not None:
            headers[CUSTOM_ATTRIBUTES] = custom_attributes
        client = httpx.AsyncClient(timeout=httpx.Timeout(120.0))
        upstream = await client.send(
            client.build_request("POST", f"{model}/invocations", content=body, headers=headers), stream=True
        )
        if upstream.status_code != 200:
            text = (await upstream.aread()).decode(errors="replace")
            await upstream.aclose()
            await client.aclose()
            return _error(424, "ModelError", f"Received client error ({upstream.status_code}) from model: {text}")

        async def events() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    if chunk:
                        yield payload_part(chunk)
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(
            events(),
            media_type="application/vnd.amazon.eventstream",
            headers={
                "x-amzn-invoked-production-variant": "AllTraffic",
                "x-amzn-sagemaker-content-type": upstream.headers.get("content-type", "application/octet-stream"),
            },
        )


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"message": message}, status_code=status, headers={"x-amzn-errortype": code})
