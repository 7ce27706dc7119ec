"""SageMakerTransport: a bidi session over SageMaker's HTTP/2 event stream.

Built on aws-sdk-sagemaker-runtime-http2 0.12 (docs/platform-facts.md#sagemaker-bidi). SageMaker's sidecar opens a
WebSocket to the container's `/invocations-bidirectional-stream` and relays: a payload part
sent with data_type BINARY arrives as a binary frame, UTF8 as a text frame; the container's
frames come back as payload parts with the matching data type, bytes unchanged. So this
transport carries exactly what `WebSocketTransport` carries, one message per payload part
(a message the service split into PARTIAL parts is put back together here).

Rules the SDK imposes, each learned the hard way:
- the default aiohttp transport cannot duplex: use awscrt's `AWSCRTHTTPClient`;
- the runtime listens on port 8443, which the SDK's regional resolver does not know;
- never cancel a pending `receive()` (it corrupts the HTTP/2 stream): the session runs one
  reader task and only ever stops it by ending the stream;
- closing the input stream ends the session on the service side, so close only at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
from aws_sdk_sagemaker_runtime_http2.models import (
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventPayloadPart,
)
from smithy_core.exceptions import SmithyError
from smithy_http.aio.crt import AWSCRTHTTPClient
from smithy_http.aio.interfaces import HTTPClient

from .errors import (
    ConnectionLostError,
    SessionClosedError,
    SessionConnectError,
    StreamFailedError,
)
from .transport import FrameMode, Payload

logger = logging.getLogger(__name__)

RUNTIME_PORT = 8443
# How long close() waits for the service to acknowledge the end of our input before it
# tears the connection down anyway.
_CLOSE_GRACE_S = 5.0


def runtime_endpoint(region: str) -> str:
    """The SageMaker runtime HTTP/2 endpoint of a region (port 8443, not the SDK's 443)."""
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{RUNTIME_PORT}"


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or "no message"
    return f"{type(exc).__name__}: {message}"


class SageMakerTransport:
    """One InvokeEndpointWithBidirectionalStream call to a SageMaker endpoint."""

    def __init__(
        self,
        endpoint_name: str,
        region: str,
        *,
        frames: FrameMode = "binary",
        endpoint_uri: str | None = None,
        target_variant: str | None = None,
        model_invocation_path: str | None = None,
        model_query_string: str | None = None,
        http_client: HTTPClient | None = None,
    ) -> None:
        """`frames` picks the data_type of our JSON messages: "binary" → BINARY (SageMaker's
        default), "text" → UTF8. `http_client` replaces the awscrt transport (tests inject a
        fake SageMaker there); credentials come from the standard AWS chain.
        """
        if not endpoint_name:
            raise ValueError("endpoint_name must be a non-empty string")
        if not region:
            raise ValueError("region must be a non-empty string (e.g. 'us-east-1')")
        if frames not in ("binary", "text"):
            raise ValueError(f"frames must be 'binary' or 'text', not {frames!r}")
        self.endpoint_name = endpoint_name
        self.region = region
        self.frames: FrameMode = frames
        self.endpoint_uri = endpoint_uri or runtime_endpoint(region)
        self._input = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=endpoint_name,
            target_variant=target_variant,
            model_invocation_path=model_invocation_path,
            model_query_string=model_query_string,
        )
        self._http_client = http_client
        self._client: AsyncSageMakerRuntimeHTTP2Client | None = None
        self._stream: Any = None  # DuplexEventStream; its generics do not survive mypy
        self._receiver: Any = None
        self._partial: list[bytes] = []
        self._ended = False
        self._closed = False

    @property
    def description(self) -> str:
        return f"SageMaker endpoint {self.endpoint_name!r} in {self.region} via {self.endpoint_uri}"

    async def connect(self) -> None:
        if self._client is not None or self._closed:
            raise SessionClosedError(f"{self.description}: connect() may be called once")
        try:
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
                region=self.region,
                endpoint_uri=self.endpoint_uri,
                transport=self._http_client or AWSCRTHTTPClient(),
            )
            self._client = AsyncSageMakerRuntimeHTTP2Client(config=config)
            self._stream = await self._client.invoke_endpoint_with_bidirectional_stream(self._input)
            # The service answers the HTTP/2 request before any event flows; errors such as
            # a bad signature or an unknown endpoint surface here.
            _, self._receiver = await self._stream.await_output()
        except Exception as exc:  # config, credentials, TLS, HTTP status: all mean "not open"
            # A refused stream never acknowledges the end of our input: do not wait for it.
            self._stream = None
            await self.close()
            raise SessionConnectError(f"cannot open {self.description}: {_describe(exc)}") from exc

    async def send(self, payload: Payload) -> None:
        if self._stream is None or self._closed:
            raise SessionClosedError(f"{self.description} is not open")
        if isinstance(payload, str):
            data, data_type = payload.encode("utf-8"), ("BINARY" if self.frames == "binary" else "UTF8")
        else:
            data, data_type = payload, "BINARY"
        event = RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=data, data_type=data_type))
        try:
            await self._stream.input_stream.send(event)
        except (SmithyError, OSError) as exc:
            raise ConnectionLostError(f"{self.description}: sending failed: {_describe(exc)}") from exc

    async def receive(self) -> Payload | None:
        if self._receiver is None:
            raise SessionClosedError(f"{self.description} is not open")
        while True:
            try:
                event = await self._receiver.receive()
            except (ModelStreamError, InternalStreamFailure) as exc:
                self._ended = True
                raise StreamFailedError(
                    type(exc).__name__, exc.message or "no message", getattr(exc, "error_code", None)
                ) from exc
            except (SmithyError, OSError) as exc:
                self._ended = True
                if self._closed:
                    return None  # we tore the connection down ourselves
                raise ConnectionLostError(f"{self.description}: {_describe(exc)}") from exc
            if event is None:
                self._ended = True
                if self._partial:
                    raise ConnectionLostError(f"{self.description}: stream ended inside a PARTIAL message")
                return None
            if not isinstance(event, ResponseStreamEventPayloadPart):
                logger.warning("ignoring unknown SageMaker stream event %r", event)
                continue
            message = self._reassemble(event)
            if message is not None:
                return message

    def _reassemble(self, event: ResponseStreamEventPayloadPart) -> Payload | None:
        part = event.value
        self._partial.append(part.bytes_ or b"")
        if part.completion_state == "PARTIAL":
            return None
        data = b"".join(self._partial)
        self._partial.clear()
        if part.data_type == "UTF8":
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConnectionLostError(f"{self.description}: a UTF8 payload part is not UTF-8") from exc
        return data

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        stream, client = self._stream, self._client
        if stream is not None:
            # The signed empty frame tells the service our input is complete.
            with contextlib.suppress(SmithyError, OSError, RuntimeError):
                await asyncio.wait_for(stream.input_stream.close(), _CLOSE_GRACE_S)
        if client is not None:
            with contextlib.suppress(SmithyError, OSError, RuntimeError):
                await client.close()
