"""Honest overload on real sockets: a full Kokoro server refuses a session with `server_busy`,
the client raises SessionConnectError with that code, and the speak function reports the
documented, retryable `tts_unavailable` (before: `synthesis_failed` "[server_busy] …")."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.conftest import ServerFactory
from tests.support.session_client import send_json
from tests.support.speak_server import start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.speak.config import SpeakConfig
from voicestream.speech import BidiSession, SessionConnectError
from voicestream.wire.bidi import Limits
from voicestream.wire.speak import Done, ReplyError

HANG_GUARD_S = 90


async def test_a_full_server_refuses_with_server_busy_and_the_client_says_so(server_factory: ServerFactory) -> None:
    with server_factory(Limits(max_sessions=1)) as server:
        async with connect(server.ws_url) as holder:
            await send_json(holder, {"type": "ping"})
            await holder.recv()  # the one allowed session is open
            with pytest.raises(SessionConnectError, match="server_busy") as caught:
                async with asyncio.timeout(HANG_GUARD_S), BidiSession.websocket(server.ws_url) as session:
                    await session.send("Hello?")
                    _ = [event async for event in session.events()]
    assert caught.value.server_code == "server_busy" and caught.value.code == "tts_unavailable"


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_a_full_server_is_tts_unavailable_for_the_speak_function(
    server_factory: ServerFactory, mode: str
) -> None:
    with server_factory(Limits(max_sessions=1)) as server:
        config = SpeakConfig(kokoro_ws_url=server.ws_url, service=f"speak-busy-{uuid.uuid4().hex[:8]}")
        with start_speak_server(config) as speak:
            async with connect(server.ws_url) as holder:
                await send_json(holder, {"type": "ping"})
                await holder.recv()
                body = {"text": "Hello there. How are you?", "mode": mode, "pace": {"first_token_ms": 50}}
                async with asyncio.timeout(HANG_GUARD_S), httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
                    events = [event async for event in call_speak(client, speak.url, body, credentials=None)]
    *_, error, done = events
    assert isinstance(error, ReplyError) and error.code == "tts_unavailable" and "server_busy" in error.message
    assert isinstance(done, Done) and done.status == "error"
