"""SageMakerTransport through the real aws-sdk-sagemaker-runtime-http2 0.12 code.

Only SageMaker's HTTP/2 service is fake, at the SDK's HTTP transport boundary
(tests/support/fake_sagemaker.py): it authenticates the SigV4 request and every event
signature, then relays payloads to the real Kokoro server over WebSocket as the sidecar does.
Credentials come from the standard chain (the environment, here).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from smithy_aws_event_stream.events import Event as WireEvent
from smithy_aws_event_stream.events import EventMessage
from smithy_core.aio.types import AsyncBytesReader
from smithy_http.aio import HTTPRequest, HTTPResponse
from smithy_http.aio.interfaces import HTTPRequest as HTTPRequestInterface
from websockets.asyncio.server import ServerConnection, serve

from tests.integration.test_client_session import SENTENCES, check_ordered_requests, until_complete
from tests.support.fake_sagemaker import FakeSageMakerConnection, FakeSageMakerRuntime
from tests.support.server import LiveServer
from voicestream.speech import Audio, BidiSession, RequestCompleted, SessionConnectError, StreamFailedError
from voicestream.speech.sagemaker import SageMakerTransport
from voicestream.wire.framing import parse_control_frame

REGION = "eu-west-1"
ENDPOINT = "kokoro-tts"
ACCESS_KEY, SECRET_KEY = "AKIAFAKEVOICESTREAM1", "fake-secret-key-for-tests"
BOUND_S = 300.0


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    """Credentials from the environment, and nothing else the chain could pick up."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield


def service(model_url: str, **options: Any) -> FakeSageMakerRuntime:
    return FakeSageMakerRuntime(
        region=REGION, credentials={ACCESS_KEY: SECRET_KEY}, endpoints={ENDPOINT: model_url}, **options
    )


def session_via(connection: Any, **options: Any) -> BidiSession:
    return BidiSession(SageMakerTransport(ENDPOINT, REGION, http_client=connection, **options), close_timeout=10.0)


async def test_three_sentences_through_the_real_sdk(kokoro_server: LiveServer) -> None:
    fake = service(kokoro_server.ws_url)
    async with asyncio.timeout(BOUND_S):
        async with session_via(fake.connection()) as session:
            request_ids = [await session.send(sentence) for sentence in SENTENCES]
            events = await until_complete(session, request_ids[-1])
        check_ordered_requests(events, request_ids)
    [stream] = fake.streams
    assert stream.endpoint_name == ENDPOINT
    assert stream.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert f"/{REGION}/sagemaker/aws4_request" in stream.headers["authorization"]
    # Our JSON went out as data_type BINARY (SageMaker's default), one payload part per message.
    assert [part.data_type for part in stream.received] == ["BINARY"] * 4
    assert [part.payload.count(b'"type":"synthesize"') for part in stream.received[:3]] == [1, 1, 1]
    assert stream.received[3].payload == b'{"type":"close"}'
    # Every event frame carried a valid signature, and the input ended with the signed empty frame.
    assert stream.verified_signatures == len(stream.received) + 1 and stream.input_ended
    assert stream.model_close_code == 1000
    # The server's control frames are text frames, so they came back as UTF8; audio as BINARY.
    assert {part.data_type for part in stream.sent if parse_control_frame(part.payload)} == {"UTF8"}
    assert {part.data_type for part in stream.sent if not parse_control_frame(part.payload)} == {"BINARY"}
    assert not fake.rejections


async def test_utf8_payloads_and_partial_parts(kokoro_server: LiveServer) -> None:
    # The service may split a big model frame into PARTIAL parts; the transport rejoins them.
    fake = service(kokoro_server.ws_url, max_part_bytes=1000)
    async with asyncio.timeout(BOUND_S), session_via(fake.connection(), frames="text") as session:
        result = await session.synthesize("Have a good trip.")
    assert len(result.audio) == result.timings.audio_bytes > 24_000
    [stream] = fake.streams
    assert {part.data_type for part in stream.received} == {"UTF8"}
    assert any(part.completion_state == "PARTIAL" for part in stream.sent)
    assert result.timings.audio_frames < sum(1 for part in stream.sent if part.data_type == "BINARY")


async def test_model_stream_error_mid_session_is_a_clear_exception(kokoro_server: LiveServer) -> None:
    fake = service(kokoro_server.ws_url)
    async with asyncio.timeout(BOUND_S), session_via(fake.connection()) as session:
        for sentence in SENTENCES:
            await session.send(sentence)
        heard = 0
        with pytest.raises(StreamFailedError, match=r"ModelStreamError \[ModelStreamError\]: Model crashed") as caught:
            async for event in session.events():
                if isinstance(event, Audio):
                    heard += 1
                    if heard == 1:
                        fake.inject_model_stream_error("Model crashed while streaming")
                assert not isinstance(event, RequestCompleted) or event.request_id == "req-1"
        assert caught.value.service_message == "Model crashed while streaming"
        assert heard >= 1


# --- authentication: the fake really checks, so a wrong signature cannot pass -----------------


@contextlib.asynccontextmanager
async def silent_model() -> AsyncIterator[str]:
    async def handler(ws: ServerConnection) -> None:
        async for _ in ws:
            pass

    async with serve(handler, "127.0.0.1", 0) as server:
        yield f"ws://127.0.0.1:{next(iter(server.sockets)).getsockname()[1]}"


async def test_wrong_secret_key_is_rejected_at_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-right-secret")
    async with asyncio.timeout(BOUND_S), silent_model() as model_url:
        fake = service(model_url)
        session = session_via(fake.connection())
        with pytest.raises(SessionConnectError, match="403"):
            await session.connect()
    assert fake.rejections == ["The request signature we calculated does not match the signature you provided."]
    assert not fake.streams


async def test_unknown_endpoint_is_rejected_at_connect() -> None:
    async with asyncio.timeout(BOUND_S), silent_model() as model_url:
        fake = FakeSageMakerRuntime(region=REGION, credentials={ACCESS_KEY: SECRET_KEY}, endpoints={"other": model_url})
        with pytest.raises(SessionConnectError, match="InputValidationError: Endpoint kokoro-tts not found"):
            await session_via(fake.connection()).connect()


async def test_unreachable_endpoint_through_the_real_crt_transport() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = SageMakerTransport(ENDPOINT, REGION, endpoint_uri=f"https://127.0.0.1:{port}")
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(SessionConnectError, match=f"cannot open SageMaker endpoint 'kokoro-tts'.*127.0.0.1:{port}"):
            await BidiSession(transport, connect_timeout=30).connect()


class TamperingConnection(FakeSageMakerConnection):
    """A man in the middle that rewrites the second event's payload but keeps its signature."""

    async def send(self, request: HTTPRequestInterface, *, request_config: Any = None) -> HTTPResponse:
        original = AsyncBytesReader(request.body)

        async def tampered() -> AsyncIterator[bytes]:
            count = 0
            while (frame := await WireEvent.decode_async(original)) is not None:
                count += 1
                message = frame.message
                if count == 2:
                    payload = message.payload.replace(b"second", b"SECOND")
                    message = EventMessage(headers=message.headers, payload=payload)
                yield message.encode()

        forged = HTTPRequest(
            destination=request.destination, method=request.method, fields=request.fields, body=tampered()
        )
        return await super().send(forged, request_config=request_config)


async def test_tampered_event_breaks_the_signature_chain() -> None:
    async with asyncio.timeout(BOUND_S), silent_model() as model_url:
        fake = service(model_url)
        async with session_via(TamperingConnection(fake)) as session:
            await session.send("first")
            await session.send("second")
            with pytest.raises(StreamFailedError, match="event signature does not match"):
                async for _ in session.events():
                    pass
    [stream] = fake.streams
    assert [part.payload for part in stream.received][:1] == [
        b'{"type":"synthesize","text":"first","request_id":"req-1"}'
    ]
    assert fake.rejections == ["event signature does not match the signature chain"]
