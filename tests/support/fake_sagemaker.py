"""SageMaker's runtime HTTP/2 service, played at the SDK's HTTP transport boundary.

`FakeSageMakerRuntime` implements the SDK's `HTTPClient` interface (what `AWSCRTHTTPClient`
implements), so everything above it is the real aws-sdk-sagemaker-runtime-http2 code: request
serialization, endpoint resolution, SigV4 request signing, event signing and event-stream
encoding. Like the service it:

- authenticates the request: recomputes the SigV4 `Authorization` signature from the wire
  headers with the credentials it knows (independently of the SDK's signer) and answers 403
  when it does not match;
- verifies every event frame's `:chunk-signature` against the running signature chain
  (seeded by the request signature), including the signed empty frame that ends the input;
- plays the sidecar: opens a WebSocket to the model server's `/invocations-bidirectional-stream`
  (or, with the `X-Amzn-SageMaker-Model-Invocation-Path` header, to `/` + that path: how the
  vLLM-Omni container's `/v1/audio/speech/stream` is reached; a leading slash is refused with
  HTTP 400, as the service does), forwards each payload part's bytes as a binary frame
  (data_type BINARY) or a text frame (UTF8), and turns every frame the model sends into a
  PayloadPart event (text → UTF8, binary → BINARY, bytes unchanged), encoded with the SDK's own
  event serializer;
- ends the response when the model closes the WebSocket normally, sends a ModelStreamError
  when it closes abnormally, and closes the WebSocket when the client ends its input;
- can inject a ModelStreamError at any moment (`inject_model_stream_error`).

Everything it saw is recorded for assertions (`streams[i].received`, `.sent`, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from io import BytesIO
from typing import Any
from urllib.parse import quote

from aws_sdk_sagemaker_runtime_http2.models import (
    ModelStreamError,
    ResponsePayloadPart,
    ResponseStreamEventModelStreamError,
    ResponseStreamEventPayloadPart,
    _RequestStreamEventDeserializer,
)
from smithy_aws_event_stream._private.deserializers import EventDeserializer
from smithy_aws_event_stream._private.serializers import EventSerializer
from smithy_aws_event_stream.events import Event, EventHeaderEncoder
from smithy_core.aio.types import AsyncBytesReader
from smithy_http import Field, Fields
from smithy_http.aio import HTTPResponse
from smithy_http.aio.interfaces import HTTPRequest
from smithy_json import JSONCodec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

from tests.support.iam.calls import record_transport_call

_SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"
INVOCATION_PATH_HEADER = "x-amzn-sagemaker-model-invocation-path"
_EVENT_STREAM_HASH = "STREAMING-AWS4-HMAC-SHA256-EVENTS"
_CODEC = JSONCodec()


@dataclass(frozen=True)
class ReceivedPart:
    """One RequestStreamEvent PayloadPart as the service decoded it."""

    data_type: str | None
    completion_state: str | None
    payload: bytes


@dataclass(frozen=True)
class SentPart:
    """One ResponseStreamEvent the service emitted."""

    kind: str  # "PayloadPart" or "ModelStreamError"
    data_type: str | None = None
    completion_state: str | None = None
    payload: bytes = b""
    message: str | None = None


@dataclass
class StreamRecord:
    """What one InvokeEndpointWithBidirectionalStream call looked like from the service side."""

    endpoint_name: str
    headers: dict[str, str]
    model_url: str = ""  # the WebSocket URL the sidecar opened for this stream
    received: list[ReceivedPart] = field(default_factory=list)
    sent: list[SentPart] = field(default_factory=list)
    verified_signatures: int = 0
    input_ended: bool = False  # the signed empty frame arrived
    model_close_code: int | None = None


class SignatureMismatch(Exception):
    pass


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def _parse_authorization(value: str) -> dict[str, str]:
    algorithm, _, rest = value.partition(" ")
    if algorithm != "AWS4-HMAC-SHA256":
        raise SignatureMismatch(f"unsupported algorithm {algorithm!r}")
    parts = dict(item.strip().split("=", 1) for item in rest.split(","))
    if set(parts) != {"Credential", "SignedHeaders", "Signature"}:
        raise SignatureMismatch(f"malformed Authorization header {value!r}")
    return parts


class FakeSageMakerRuntime:
    """SageMaker's runtime service for one region and a set of endpoints.

    `connection()` hands out an `HTTPClient` for one SDK client: the SDK shares its config's
    transport and closes it with the client, as each CRT client owns its connections.
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: Mapping[str, str],
        endpoints: Mapping[str, str],
        max_part_bytes: int | None = None,
    ) -> None:
        """`credentials` maps access key ids to secret keys; `endpoints` maps endpoint names
        to the model server's WebSocket URL. `max_part_bytes` makes the service split bigger
        model frames into PARTIAL parts, as the service may."""
        self.region = region
        self.host = f"runtime.sagemaker.{region}.amazonaws.com"
        self.credentials = dict(credentials)
        self.endpoints = dict(endpoints)
        self.max_part_bytes = max_part_bytes
        self.streams: list[StreamRecord] = []
        self.rejections: list[str] = []
        self._live: list[_LiveStream] = []

    def connection(self) -> FakeSageMakerConnection:
        return FakeSageMakerConnection(self)

    def inject_model_stream_error(self, message: str, error_code: str = "ModelStreamError") -> None:
        """End every live stream with a ModelStreamError event, as when the model fails."""
        for live in self._live:
            live.fail(message, error_code)

    async def open_stream(self, request: HTTPRequest) -> tuple[HTTPResponse, _LiveStream | None]:
        try:
            record, secret_key, scope = self._authenticate(request)
        except SignatureMismatch as exc:
            self.rejections.append(str(exc))
            return _error_response(403, "InvalidSignatureException", str(exc)), None
        # IAM, which the service checks after the signature (tests/support/iam: when a test audits).
        refused = record_transport_call(
            "sagemaker", "InvokeEndpointWithBidirectionalStream", {"EndpointName": record.endpoint_name}
        )
        if refused is not None:
            self.rejections.append(refused)
            return _error_response(403, "AccessDeniedException", refused), None
        model_url = self.endpoints.get(record.endpoint_name)
        if model_url is None:
            message = f"Endpoint {record.endpoint_name} not found."
            self.rejections.append(message)
            return _error_response(400, "InputValidationError", message), None
        invocation_path = record.headers.get(INVOCATION_PATH_HEADER)
        if invocation_path is not None:
            if invocation_path.startswith("/"):
                message = f"ModelInvocationPath {invocation_path!r} must not start with '/'."
                self.rejections.append(message)
                return _error_response(400, "ValidationError", message), None
            scheme, _, rest = model_url.partition("://")
            model_url = f"{scheme}://{rest.split('/', 1)[0]}/{invocation_path}"
        record.model_url = model_url
        try:
            ws = await connect(model_url, compression=None, max_size=None)
        except OSError as exc:
            return _error_response(424, "ModelError", f"cannot reach the model container: {exc}"), None
        self.streams.append(record)
        live = _LiveStream(self, record, ws, request, secret_key, scope)
        self._live.append(live)
        live.start()
        response = HTTPResponse(
            status=200,
            fields=Fields([Field(name="content-type", values=["application/vnd.amazon.eventstream"])]),
            body=live.response_body(),
        )
        return response, live

    def _authenticate(self, request: HTTPRequest) -> tuple[StreamRecord, str, str]:
        uri = request.destination
        if (uri.scheme, uri.host, uri.port) != ("https", self.host, 8443):
            raise SignatureMismatch(f"request went to {uri.scheme}://{uri.host}:{uri.port}")
        prefix, suffix = "/endpoints/", "/invocations-bidirectional-stream"
        path = uri.path or ""
        if request.method != "POST" or not (path.startswith(prefix) and path.endswith(suffix)):
            raise SignatureMismatch(f"unexpected {request.method} {path}")
        endpoint_name = path[len(prefix) : -len(suffix)]
        headers = {f.name.lower(): f.as_string() for f in request.fields}
        # CRT adds the host header from the URI when the request has none; so does the wire.
        headers.setdefault("host", uri.netloc)
        if headers.get("content-type") != "application/vnd.amazon.eventstream":
            raise SignatureMismatch(f"content-type {headers.get('content-type')!r}")
        if headers.get("x-amz-content-sha256") != _EVENT_STREAM_HASH:
            raise SignatureMismatch("x-amz-content-sha256 does not announce signed events")
        if "authorization" not in headers:
            raise SignatureMismatch("no Authorization header")
        auth = _parse_authorization(headers["authorization"])
        access_key, day, region, service, terminator = auth["Credential"].split("/")
        secret = self.credentials.get(access_key)
        if secret is None:
            raise SignatureMismatch(f"unknown access key {access_key}")
        if (region, service, terminator) != (self.region, "sagemaker", "aws4_request"):
            raise SignatureMismatch(f"credential scope {auth['Credential']}")
        timestamp = headers["x-amz-date"]
        signed = auth["SignedHeaders"].split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            raise SignatureMismatch(f"host and x-amz-date must be signed: {signed}")
        canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)
        canonical_request = "\n".join(
            [
                "POST",
                quote(path, safe="/"),
                "",
                canonical_headers,
                ";".join(signed),
                _EVENT_STREAM_HASH,
            ]
        )
        scope = f"{day}/{region}/{service}/aws4_request"
        string_to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", timestamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
        )
        expected = hmac.new(
            _signing_key(secret, day, region, service), string_to_sign.encode(), hashlib.sha256
        ).hexdigest()
        if not hmac.compare_digest(expected, auth["Signature"]):
            raise SignatureMismatch("The request signature we calculated does not match the signature you provided.")
        record = StreamRecord(endpoint_name=endpoint_name, headers=headers)
        return record, secret, auth["Signature"]


class FakeSageMakerConnection:
    """The `HTTPClient` one SDK client uses to reach the fake service."""

    # The SDK refuses transports that cannot stream both ways at once.
    SUPPORTS_DUPLEX_STREAMING = True
    TIMEOUT_EXCEPTIONS: tuple[type[Exception], ...] = ()

    def __init__(self, service: FakeSageMakerRuntime) -> None:
        self.service = service
        self.closed = False
        self._streams: list[_LiveStream] = []

    async def send(self, request: HTTPRequest, *, request_config: Any = None) -> HTTPResponse:
        if self.closed:
            raise OSError("connection closed")
        response, live = await self.service.open_stream(request)
        if live is not None:
            self._streams.append(live)
        return response

    async def close(self) -> None:
        self.closed = True
        for live in self._streams:
            await live.stop()


def _error_response(status: int, error_type: str, message: str) -> HTTPResponse:
    return HTTPResponse(
        status=status,
        fields=Fields(
            [
                Field(name="x-amzn-errortype", values=[error_type]),
                Field(name="content-type", values=["application/json"]),
            ]
        ),
        # "Message" is the modeled member name, which the SDK's JSON codec matches exactly.
        body=json.dumps({"Message": message}).encode(),
    )


class _LiveStream:
    """One open stream: an input pump (client → model) and an output queue (model → client)."""

    def __init__(
        self,
        service: FakeSageMakerRuntime,
        record: StreamRecord,
        ws: ClientConnection,
        request: HTTPRequest,
        secret_key: str,
        seed_signature: str,
    ) -> None:
        self.service = service
        self.record = record
        self.ws = ws
        self.request = request
        self.secret_key = secret_key
        self.prior_signature = seed_signature
        self.output: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.finished = False
        self.chain_broken = False

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._pump_input()),
            asyncio.create_task(self._pump_output()),
        ]

    async def response_body(self) -> AsyncIterator[bytes]:
        while (chunk := await self.output.get()) is not None:
            yield chunk

    def _emit(self, event: Any, sent: SentPart) -> None:
        if self.finished:
            return
        serializer = EventSerializer(payload_codec=_CODEC, is_client_mode=False)  # type: ignore[abstract]  # smithy types flush() as abstract
        event.serialize(serializer)
        message = serializer.get_result()
        assert message is not None
        self.record.sent.append(sent)
        self.output.put_nowait(message.encode())

    def _finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.output.put_nowait(None)

    def fail(self, message: str, error_code: str) -> None:
        self._emit(
            ResponseStreamEventModelStreamError(value=ModelStreamError(message=message, error_code=error_code)),
            SentPart(kind="ModelStreamError", message=message),
        )
        self._finish()
        # The model's session is over; the input pump keeps draining the client's frames.
        self.tasks.append(asyncio.get_running_loop().create_task(self._close_model(1011)))

    async def _close_model(self, code: int) -> None:
        await self.ws.close(code=code, reason="stream ended by the service")

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.ws.close()
        self._finish()

    def _verify_frame(self, frame: Event) -> bytes:
        headers = frame.message.headers
        date = headers.get(":date")
        signature = headers.get(":chunk-signature")
        if not isinstance(date, datetime.datetime) or not isinstance(signature, bytes):
            raise SignatureMismatch("event frame without :date/:chunk-signature")
        timestamp = date.strftime(_SIGV4_TIMESTAMP)
        encoder = EventHeaderEncoder()
        encoder.encode_headers({":date": date})
        scope = f"{timestamp[:8]}/{self.service.region}/sagemaker/aws4_request"
        string_to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256-PAYLOAD",
                timestamp,
                scope,
                self.prior_signature,
                hashlib.sha256(encoder.get_result()).hexdigest(),
                hashlib.sha256(frame.message.payload).hexdigest(),
            ]
        )
        key = _signing_key(self.secret_key, timestamp[:8], self.service.region, "sagemaker")
        expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise SignatureMismatch("event signature does not match the signature chain")
        self.prior_signature = signature.hex()
        self.record.verified_signatures += 1
        return frame.message.payload

    async def _pump_input(self) -> None:
        # Drain the request body to its end even after the model is gone: the client's
        # writer blocks once the body buffer is full.
        reader = AsyncBytesReader(self.request.body)
        while (frame := await Event.decode_async(reader)) is not None:
            if self.chain_broken:
                continue
            try:
                inner = self._verify_frame(frame)
            except SignatureMismatch as exc:
                self.chain_broken = True
                self.service.rejections.append(str(exc))
                self.fail(str(exc), "InvalidSignature")
                continue
            if not inner:
                self.record.input_ended = True
                continue
            event = Event.decode(BytesIO(inner))
            assert event is not None
            part = (
                _RequestStreamEventDeserializer()
                .deserialize(EventDeserializer(event=event, payload_codec=_CODEC, is_client_mode=False))
                .value
            )
            payload = part.bytes_ or b""
            self.record.received.append(ReceivedPart(part.data_type, part.completion_state, payload))
            if self.finished:
                continue
            with contextlib.suppress(ConnectionClosed):
                await self.ws.send(payload.decode("utf-8") if part.data_type == "UTF8" else payload)
        # The client ended its input: the sidecar ends the model's session.
        await self.ws.close()

    async def _pump_output(self) -> None:
        try:
            while True:
                frame = await self.ws.recv()
                data_type = "UTF8" if isinstance(frame, str) else "BINARY"
                data = frame.encode("utf-8") if isinstance(frame, str) else frame
                for chunk, state in self._split(data):
                    self._emit(
                        ResponseStreamEventPayloadPart(
                            value=ResponsePayloadPart(bytes_=chunk, data_type=data_type, completion_state=state)
                        ),
                        SentPart("PayloadPart", data_type, state, chunk),
                    )
        except ConnectionClosedOK as exc:
            self.record.model_close_code = exc.rcvd.code if exc.rcvd else None
            self._finish()
        except ConnectionClosed as exc:
            self.record.model_close_code = exc.rcvd.code if exc.rcvd else None
            self.fail(f"Model container closed the stream: {exc}", "ModelStreamError")

    def _split(self, data: bytes) -> list[tuple[bytes, str]]:
        size = self.service.max_part_bytes
        if size is None or len(data) <= size:
            return [(data, "COMPLETE")]
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        return [(chunk, "PARTIAL") for chunk in chunks[:-1]] + [(chunks[-1], "COMPLETE")]
