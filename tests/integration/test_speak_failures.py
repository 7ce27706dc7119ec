"""POST /speak when things go wrong: bad input, a speech server that is down, dies or goes silent,
an unknown voice, and a caller who hangs up mid-reply. Always a clear 4xx, or an `error` event
followed by `done`: never a crash, never a hang."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.server import ServerConnection, serve

from tests.support.server import LiveServer
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.speak.config import SpeakConfig
from voicestream.wire.errors import FAILURE_MESSAGES
from voicestream.wire.speak import AgentStart, Done, ReplyError, SentenceAudio, SpeakEvent

FAST = {"first_token_ms": 50, "tokens_per_s": 200}
# Bounds that only keep a broken implementation from hanging the suite; never asserted on.
HANG_GUARD_S = 90


def config(ws_url: str, **options: Any) -> SpeakConfig:
    return SpeakConfig(kokoro_ws_url=ws_url, service=f"speak-test-{uuid.uuid4().hex[:8]}", **options)


@pytest.fixture(scope="module")
def speak_server(kokoro_server: LiveServer) -> Iterator[SpeakServer]:
    with start_speak_server(config(kokoro_server.ws_url)) as server:
        yield server


async def speak(url: str, body: dict[str, Any]) -> list[SpeakEvent]:
    async with asyncio.timeout(HANG_GUARD_S), httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
        return [event async for event in call_speak(client, url, body, credentials=None)]


def assert_failed(events: list[SpeakEvent], code: str) -> ReplyError:
    assert isinstance(events[0], AgentStart)
    *_, error, done = events
    assert isinstance(error, ReplyError) and error.code == code, events[-3:]
    assert isinstance(done, Done) and done.status == "error"
    assert error.message
    return error


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- bad input: clear 4xx ------------------------------------------------------------------------


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"\xff\xfe", 400, "invalid_utf8"),
        (b"[1, 2]", 400, "not_an_object"),
        (b"{}", 400, "missing_input"),
        (json.dumps({"text": "hi", "prompt": "hi"}).encode(), 400, "missing_input"),
        (json.dumps({"text": "   ...  "}).encode(), 400, "empty_text"),
        (json.dumps({"text": 5}).encode(), 400, "missing_text"),
        (json.dumps({"text": "a " * 1500}).encode(), 413, "text_too_long"),
        (json.dumps({"text": "hi", "mode": "stream"}).encode(), 400, "invalid_mode"),
        (json.dumps({"text": "hi", "transport": "websocket"}).encode(), 400, "invalid_transport"),
        (json.dumps({"text": "hi", "format": "ogg"}).encode(), 400, "invalid_format"),
        (json.dumps({"text": "hi", "speed": 9}).encode(), 400, "invalid_speed"),
        (json.dumps({"text": "hi", "speed": True}).encode(), 400, "invalid_speed"),
        (json.dumps({"text": "hi", "voice": ""}).encode(), 400, "invalid_voice"),
        (json.dumps({"text": "hi", "mdoe": "batch"}).encode(), 400, "unknown_field"),
        (json.dumps({"text": "hi", "pace": {"tokens_per_s": 0}}).encode(), 400, "invalid_pace"),
        (json.dumps({"text": "hi", "pace": [1]}).encode(), 400, "invalid_pace"),
        (b'{"text": "' + b"a" * 70_000 + b'"}', 413, "message_too_large"),
    ],
)
async def test_bad_input_is_a_clear_4xx(speak_server: SpeakServer, body: bytes, status: int, code: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{speak_server.url}/speak", content=body, headers=JSON)
    assert response.status_code == status
    assert response.json()["code"] == code
    assert response.json()["message"]
    assert response.headers["x-correlation-id"]


async def test_wrong_method_and_path_are_json_errors(speak_server: SpeakServer) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        wrong_method = await client.get(f"{speak_server.url}/speak")
        wrong_path = await client.post(f"{speak_server.url}/nope", json={"text": "hi"})
        health = await client.get(f"{speak_server.url}/health")
    assert wrong_method.status_code == 405 and wrong_method.json()["code"] == "http_error"
    assert wrong_path.status_code == 404 and wrong_path.json()["code"] == "http_error"
    assert health.json()["status"] == "ok" and health.json()["agent"] == "replay"


# --- upstream failures: error event, clean end ---------------------------------------------------


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_speech_server_down(mode: str) -> None:
    with start_speak_server(config(f"ws://127.0.0.1:{closed_port()}")) as server:
        events = await speak(server.url, {"text": "Hello there. How are you?", "mode": mode, "pace": FAST})
    error = assert_failed(events, "tts_unavailable")
    assert error.message == FAILURE_MESSAGES["tts_unavailable"]  # the detail (the URL) is logged only
    assert not [e for e in events if isinstance(e, SentenceAudio)]


async def test_unknown_voice_fails_the_reply(speak_server: SpeakServer) -> None:
    events = await speak(speak_server.url, {"text": "Hello there.", "voice": "xx_nobody", "pace": FAST})
    error = assert_failed(events, "synthesis_failed")
    assert "unknown_voice" in error.message and error.index == 0


@contextlib.asynccontextmanager
async def misbehaving_server(behaviour: str) -> AsyncIterator[str]:
    """A WebSocket server on the bidi route that accepts the session, then breaks the contract."""

    async def handler(ws: ServerConnection) -> None:
        await ws.recv()  # the first synthesize
        if behaviour == "dies":
            await ws.close(code=1011, reason="model crashed")
        else:  # "silent": never answers, until the client goes away
            await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}"


@pytest.mark.parametrize("behaviour", ["dies", "silent"])
async def test_speech_server_breaking_mid_reply(behaviour: str) -> None:
    async with misbehaving_server(behaviour) as url:
        # The speak server runs in its own thread and loop; the fake runs on this test's loop.
        with start_speak_server(config(url, silence_timeout_s=1.0)) as server:
            events = await speak(server.url, {"text": "Hello there. How are you today?", "pace": FAST})
    error = assert_failed(events, "tts_error")
    assert error.message == FAILURE_MESSAGES["tts_error"]


async def test_reply_deadline(kokoro_server: LiveServer) -> None:
    # A model that never finishes (a very slow replay) against a deadline of one second.
    with start_speak_server(config(kokoro_server.ws_url, max_duration_s=1.0)) as server:
        events = await speak(server.url, {"text": "one two three four five", "pace": {"tokens_per_s": 0.5}})
    assert_failed(events, "timeout")


# --- the caller hangs up ---------------------------------------------------------------------------


def server_stats(server: LiveServer) -> tuple[int, int, int]:
    stats = server.runtime.stats
    return server.on_loop(lambda: (stats.sessions_active, stats.steps_running, stats.sentences_started))


@pytest.mark.parametrize("transport", ["sse", "binary"])
async def test_disconnect_cancels_the_session_on_the_speech_server(
    speak_server: SpeakServer, kokoro_server: LiveServer, transport: str
) -> None:
    kokoro_server.wait_until(lambda s: server_stats(s)[:2] == (0, 0))
    _, _, started_before = server_stats(kokoro_server)
    logs = io.StringIO()
    handler = capture_json_logs(logs)
    try:
        # The canned 7-sentence reply (a prompt without a model configured), at an LLM's pace.
        body = {"prompt": "Tell me about the museum.", "transport": transport, "pace": {"tokens_per_s": 50}}
        async with httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
            stream = call_speak(client, speak_server.url, body, credentials=None)
            async for event in stream:
                if isinstance(event, SentenceAudio):
                    break  # hang up at the first audio
            await stream.aclose()  # closes the HTTP response: the connection drops

        # The speech server sees the session cancelled and closed, and stops working.
        deadline = time.monotonic() + HANG_GUARD_S
        while '"session_end"' not in logs.getvalue():
            assert time.monotonic() < deadline, "the speech server never saw the session end"
            await asyncio.sleep(0.05)
        kokoro_server.wait_until(lambda s: server_stats(s)[:2] == (0, 0))
    finally:
        import logging

        logging.getLogger("voicestream").removeHandler(handler)

    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    [end] = [line for line in lines if line["event"] == "session_end"]
    cancels = [line for line in lines if line["event"] == "cancelled" and line["session_id"] == end["session_id"]]
    assert cancels and cancels[0]["request_ids"], "the queued sentences were dropped"
    assert end["reason"] == "close"
    _, _, started_after = server_stats(kokoro_server)
    assert started_after - started_before < 7, "not every sentence of the reply was synthesized"
