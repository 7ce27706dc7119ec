"""/ping and POST /invocations on the real app, a real socket and the real Kokoro model."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
import wave
from collections.abc import Iterator
from types import ModuleType

import av
import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.engines import FaultyEngine
from tests.support.server import LiveServer, start_server
from tests.support.session_client import collect, next_frame, send_json
from voicestream.devserver import wait_until_ready
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server import create_app
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import SSEDecoder, SSEEvent


def post(server: LiveServer, body: object, **kwargs: object) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return httpx.post(f"{server.http_url}/invocations", content=content, headers=headers, timeout=120, **kwargs)  # type: ignore[arg-type]


def sse_events(response_chunks: Iterator[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in response_chunks for event in decoder.feed(chunk)]
    decoder.close()
    return events


def test_ping_answers_200_when_ready(kokoro_server: LiveServer) -> None:
    for method in ("GET", "POST"):
        response = httpx.request(method, f"{kokoro_server.http_url}/ping")
        assert response.status_code == 200
        body = response.json()
        # The speed the server measured at start (how fast is the host's business, not the test's).
        assert isinstance(body.pop("real_time_factor"), float) and isinstance(body.pop("faster_than_real_time"), bool)
        assert body == {"status": "ready", "engine": "onnx", "device": "cpu"}


async def test_ping_is_503_until_the_engine_is_loaded_and_warm(kokoro_engine: SpeechEngine) -> None:
    gate = threading.Event()

    def slow_factory() -> SpeechEngine:
        gate.wait(60)
        return kokoro_engine

    with start_server(create_app(slow_factory, Limits()), wait_ready=False) as server:
        async with httpx.AsyncClient(base_url=server.http_url) as client:
            response = await client.get("/ping")
            assert response.status_code == 503 and response.json()["status"] == "loading"
            refused = await client.post("/invocations", json={"text": "Hi."})
            assert refused.status_code == 503 and refused.json()["code"] == "not_ready"
        async with connect(server.ws_url) as ws:
            error = await next_frame(ws)
            assert error.control is not None and error.control["code"] == "not_ready"
            assert (await next_frame(ws)).type == "session_closed"
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        gate.set()
        await asyncio.to_thread(wait_until_ready, server.http_url, 120)


def test_binary_pcm_streams_each_sentence(kokoro_server: LiveServer, asr: ModuleType) -> None:
    text = "Hello there. See you soon."
    with httpx.stream("POST", f"{kokoro_server.http_url}/invocations", json={"text": text}, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("audio/pcm")
        assert response.headers["x-sample-rate"] == "24000" and response.headers["x-request-id"]
        assert response.headers.get("transfer-encoding") == "chunked"
        chunks = list(response.iter_raw())
    audio = b"".join(chunks)
    assert len(chunks) > 1 and len(audio) % 2 == 0
    assert asr.word_error_rate(text, asr.transcribe(audio)) <= 0.2


def test_binary_wav_is_a_streaming_wav_file(kokoro_server: LiveServer) -> None:
    response = post(kokoro_server, {"text": "Hi there.", "format": "wav"})
    assert response.status_code == 200 and response.headers["content-type"] == "audio/wav"
    assert response.content[:4] == b"RIFF" and response.content[40:44] == b"\xff\xff\xff\xff"
    with wave.open(io.BytesIO(response.content)) as reader:
        assert (reader.getframerate(), reader.getnchannels(), reader.getsampwidth()) == (24000, 1, 2)
        samples = reader.readframes(10**9)
    assert len(samples) == len(response.content) - 44 > 24000  # more than half a second of speech


def test_sse_mp3_reassembles_into_speech(kokoro_server: LiveServer, asr: ModuleType) -> None:
    text = "Welcome back."
    with httpx.stream(
        "POST",
        f"{kokoro_server.http_url}/invocations",
        json={"text": text, "format": "mp3", "transport": "sse"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_raw(chunk_size=7))  # tiny reads: events split across chunks
    kinds = [event.event for event in events]
    assert kinds[0] == "audio_stream_start" and kinds[-1] == "audio_stream_end"
    assert set(kinds[1:-1]) == {"audio_chunk"}
    start, end = events[0].json(), events[-1].json()
    assert start["format"] == "mp3" and start["sample_rate"] == 24000
    chunks = [event.json() for event in events[1:-1]]
    assert [chunk["seq"] for chunk in chunks] == list(range(len(chunks)))
    mp3 = b"".join(base64.b64decode(chunk["data"]) for chunk in chunks)
    assert end["audio_bytes"] == len(mp3)
    assert end["first_audio_ms"] <= end["total_ms"] and end["synth_ms"] > 0
    with av.open(io.BytesIO(mp3), mode="r", format="mp3") as container:
        decoded = np.concatenate([frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)])
    assert asr.word_error_rate(text, asr.transcribe(decoded.astype(np.float32))) <= 0.2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"not json", 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_utf8"),
        (b"[1]", 400, "not_an_object"),
        (b"{}", 400, "missing_text"),
        (b'{"text": " "}', 400, "empty_text"),
        (b'{"text": "Hi.", "voice": "nobody"}', 400, "unknown_voice"),
        (b'{"text": "Hi.", "speed": 0}', 400, "invalid_speed"),
        (b'{"text": "Hi.", "format": "aac"}', 400, "invalid_format"),
        (b'{"text": "Hi.", "transport": "smoke"}', 400, "invalid_transport"),
        (json.dumps({"text": "a" * 2001}).encode(), 413, "text_too_long"),
        (json.dumps({"text": "a" * 70_000}).encode(), 413, "message_too_large"),
    ],
)
def test_invalid_bodies_get_a_json_error(kokoro_server: LiveServer, body: bytes, status: int, code: str) -> None:
    response = post(kokoro_server, body)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    error = response.json()
    assert error["type"] == "error" and error["code"] == code and error["message"]


def test_unknown_route_and_method(kokoro_server: LiveServer) -> None:
    assert httpx.get(f"{kokoro_server.http_url}/invocations").status_code == 405
    assert httpx.get(f"{kokoro_server.http_url}/nothing").status_code == 404


@pytest.fixture(scope="module")
def faulty_server(kokoro_engine: SpeechEngine) -> Iterator[LiveServer]:
    with start_server(create_app(FaultyEngine(kokoro_engine), Limits(), warm_up_text="Ok.")) as server:
        yield server


def test_mid_stream_failure_ends_sse_with_an_error_event(faulty_server: LiveServer) -> None:
    with httpx.stream(
        "POST",
        f"{faulty_server.http_url}/invocations",
        json={"text": "All good. Then explode now.", "transport": "sse"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        events = sse_events(response.iter_raw())
    kinds = [event.event for event in events]
    assert kinds[0] == "audio_stream_start" and "audio_chunk" in kinds
    assert kinds[-1] == "error" and "audio_stream_end" not in kinds
    assert events[-1].json()["code"] == "synthesis_failed"


def test_mid_stream_failure_aborts_the_binary_response(faulty_server: LiveServer) -> None:
    received = bytearray()
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        httpx.stream(
            "POST", f"{faulty_server.http_url}/invocations", json={"text": "All good. Then explode now."}, timeout=120
        ) as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_raw():
            received += chunk
    assert received, "the first sentence's audio came before the failure"


def test_failure_before_any_audio_is_a_500(faulty_server: LiveServer) -> None:
    response = post(faulty_server, {"text": "We explode at once."})
    assert response.status_code == 500 and response.json()["code"] == "synthesis_failed"


async def test_failure_in_a_session_is_an_error_for_that_request_only(faulty_server: LiveServer) -> None:
    async with connect(faulty_server.ws_url) as ws:
        await send_json(ws, {"text": "Fine. Then explode.", "request_id": "bad"})
        await send_json(ws, {"text": "Still here.", "request_id": "good"})
        results, others = await collect(ws, 2)
    assert others == []
    bad, good = results
    assert bad.end is not None and bad.end["type"] == "error" and bad.end["code"] == "synthesis_failed"
    assert bad.end["request_id"] == "bad" and bad.audio  # the first sentence was already sent
    assert good.end is not None and good.end["type"] == "synthesis_complete" and good.audio
