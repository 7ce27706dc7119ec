"""POST /speak when things go wrong with the real Kokoro server behind it: bad input, an unknown
voice, the reply deadline, and a caller who hangs up mid-reply. Always a clear 4xx, or an `error`
event followed by `done`: never a crash, never a hang. A speech server that is down, dies or goes
silent (stand-in servers): tests/unit/test_speak_failures.py, whose helpers this uses."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import LiveServer
from tests.support.speak_server import SpeakServer, start_speak_server
from tests.unit.test_speak_failures import FAST, HANG_GUARD_S, assert_failed, config, speak
from voicestream.aws.function_url import call_speak
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.wire.speak import SentenceAudio


@pytest.fixture(scope="module")
def speak_server(kokoro_server: LiveServer) -> Iterator[SpeakServer]:
    with start_speak_server(config(kokoro_server.ws_url)) as server:
        yield server


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


async def test_unknown_voice_fails_the_reply(speak_server: SpeakServer) -> None:
    events = await speak(speak_server.url, {"text": "Hello there.", "voice": "xx_nobody", "pace": FAST})
    error = assert_failed(events, "synthesis_failed")
    assert "unknown_voice" in error.message and error.index == 0


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
