"""The bidi client against servers that misbehave: silence, refusal, drops, broken contract.

Each stand-in server here is a real WebSocket (or TCP) server on 127.0.0.1 playing one broken
server; the client under test is the real `BidiSession` + `WebSocketTransport`. Every test is
bounded by `asyncio.timeout`, so a regression shows up as a failure, never as a hung run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from websockets.asyncio.server import ServerConnection, serve

from voicestream.speech import (
    Audio,
    BidiSession,
    ConnectionLostError,
    Event,
    ProtocolViolationError,
    SessionClosedError,
    SessionConnectError,
    SessionTimeoutError,
    SynthesisStart,
)

Handler = Callable[[ServerConnection], Awaitable[None]]
BOUND_S = 20.0  # generous upper bound per test: only a hang would reach it


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A real WebSocket server on a free port, alive for the block (on the test's own loop)."""
    async with serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        yield f"ws://127.0.0.1:{port}"


async def _never_answers(ws: ServerConnection) -> None:
    async for _ in ws:  # reads every message, answers none (WebSocket pings still answered)
        pass


async def _collect(session: BidiSession) -> list[Event]:
    seen: list[Event] = []
    async for event in session.events():
        seen.append(event)
    return seen


async def test_silent_server_raises_timeout_instead_of_hanging() -> None:
    async with (
        asyncio.timeout(BOUND_S),
        serving(_never_answers) as url,
        BidiSession.websocket(url, silence_timeout=0.5, close_timeout=1.0) as session,
    ):
        await session.send("Hello there.")
        with pytest.raises(SessionTimeoutError, match=r"1 request\(s\) outstanding"):
            await _collect(session)
        # The failure sticks: the session refuses more work with a clear error.
        with pytest.raises(SessionClosedError, match="failed earlier"):
            await session.send("Anyone?")


async def test_unanswered_ping_also_times_out() -> None:
    async with (
        asyncio.timeout(BOUND_S),
        serving(_never_answers) as url,
        BidiSession.websocket(url, silence_timeout=0.5, close_timeout=1.0) as session,
    ):
        await session.ping()
        with pytest.raises(SessionTimeoutError):
            await _collect(session)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_refused_connection_is_a_connect_error() -> None:
    async with asyncio.timeout(BOUND_S):
        session = BidiSession.websocket(f"ws://127.0.0.1:{_free_port()}")
        with pytest.raises(SessionConnectError, match="cannot open websocket"):
            await session.connect()
        with pytest.raises(SessionClosedError):
            await session.send("too late")


async def test_handshake_that_never_completes_hits_the_connect_timeout() -> None:
    # A TCP server that accepts and then says nothing: the WebSocket handshake never ends.
    accepted: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(BOUND_S):
            session = BidiSession.websocket(f"ws://127.0.0.1:{port}", connect_timeout=0.5)
            with pytest.raises(SessionConnectError, match=r"within 0\.5 s"):
                await session.connect()
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_server_dropping_mid_request_is_connection_lost() -> None:
    async def crash(ws: ServerConnection) -> None:
        message = json.loads(await ws.recv())
        await ws.send(
            json.dumps(
                {
                    "type": "synthesis_start",
                    "request_id": message["request_id"],
                    "format": "pcm",
                    "sample_rate": 24000,
                    "voice": "af_heart",
                }
            )
        )
        await ws.send(b"\x01\x02" * 100)
        await ws.close(code=1011, reason="engine exploded")

    async with asyncio.timeout(BOUND_S):
        async with serving(crash) as url, BidiSession.websocket(url, close_timeout=1.0) as session:
            rid = await session.send("Hello.")
            seen: list[Event] = []
            with pytest.raises(ConnectionLostError, match=r"1011.*engine exploded"):
                async for event in session.events():
                    seen.append(event)
            assert isinstance(seen[0], SynthesisStart)
            assert seen[1] == Audio(request_id=rid, data=b"\x01\x02" * 100)
            assert session.timings[rid].outcome == "pending"
            assert session.timings[rid].first_audio_at is not None


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        ("this is not json", "text frame is not a JSON object"),
        (b"\x00\x01audio-before-start", "before any synthesis_start"),
        ('{"type":"synthesis_complete","request_id":"nobody","audio_bytes":1}', "malformed control frame"),
        (
            '{"type":"synthesis_start","request_id":"stranger","format":"pcm","sample_rate":24000,"voice":"x"}',
            "never sent",
        ),
    ],
)
async def test_contract_violations_are_reported(frame: str | bytes, match: str) -> None:
    async def rogue(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send(frame)
        await _never_answers(ws)

    async with asyncio.timeout(BOUND_S):
        async with serving(rogue) as url, BidiSession.websocket(url, close_timeout=1.0) as session:
            await session.send("Hello.")
            with pytest.raises(ProtocolViolationError, match=match):
                await _collect(session)


async def test_unknown_server_message_types_are_skipped() -> None:
    # Forward compatibility: a newer server may add control messages.
    async def newer(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.send('{"type":"progress","percent":50}')
        await ws.send('{"type":"pong"}')
        await _never_answers(ws)

    async with asyncio.timeout(BOUND_S):
        async with serving(newer) as url, BidiSession.websocket(url, close_timeout=1.0) as session:
            await session.ping()
            async for event in session.events():
                assert type(event).__name__ == "Pong"
                break


async def test_bad_arguments_fail_before_anything_is_sent() -> None:
    async with asyncio.timeout(BOUND_S), serving(_never_answers) as url:
        async with BidiSession.websocket(url, close_timeout=1.0) as session:
            with pytest.raises(ValueError, match="non-empty"):
                await session.send("   ")
            with pytest.raises(ValueError, match="not valid Unicode"):
                await session.send("broken \ud800 surrogate")
            await session.send("first", request_id="a")
            with pytest.raises(ValueError, match="already used"):
                await session.send("again", request_id="a")
        with pytest.raises(SessionClosedError):
            await session.send("after close")
    with pytest.raises(ValueError, match="silence_timeout"):
        BidiSession.websocket("ws://127.0.0.1:1", silence_timeout=0)
    with pytest.raises(ValueError, match="frames"):
        BidiSession.websocket("ws://127.0.0.1:1", frames="json")  # type: ignore[arg-type]
