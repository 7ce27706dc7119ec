"""POST /speak when the speech server is down, dies or goes silent mid-reply: an `error` event
followed by `done`, never a crash, never a hang. Stand-in servers, no model; the helpers are
shared with tests/integration/test_speak_failures.py (bad input, unknown voice, deadline, a
caller who hangs up, against the real Kokoro server)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.server import ServerConnection, serve

from tests.support.speak_server import start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.speak.config import SpeakConfig
from voicestream.wire.errors import FAILURE_MESSAGES
from voicestream.wire.speak import AgentStart, Done, ReplyError, SentenceAudio, SpeakEvent

FAST = {"first_token_ms": 50, "tokens_per_s": 200}
# Bounds that only keep a broken implementation from hanging the suite; never asserted on.
HANG_GUARD_S = 90


def config(ws_url: str, **options: Any) -> SpeakConfig:
    return SpeakConfig(kokoro_ws_url=ws_url, service=f"speak-test-{uuid.uuid4().hex[:8]}", **options)


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


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_speech_server_down(mode: str) -> None:
    with start_speak_server(config(f"ws://127.0.0.1:{closed_port()}")) as server:
        events = await speak(server.url, {"text": "Hello there. How are you?", "mode": mode, "pace": FAST})
    error = assert_failed(events, "tts_unavailable")
    assert error.message == FAILURE_MESSAGES["tts_unavailable"]  # the detail (the URL) is logged only
    assert not [e for e in events if isinstance(e, SentenceAudio)]


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
