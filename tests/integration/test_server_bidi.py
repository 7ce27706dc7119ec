"""The bidirectional session on the real app, a real socket and the real Kokoro model."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import av
import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.conftest import ServerFactory
from tests.support.server import LiveServer, start_server
from tests.support.session_client import collect, next_frame, roundtrip_ping, send_json
from voicestream.engine.base import SpeechEngine
from voicestream.kokoro_server.encoders import to_pcm16
from voicestream.kokoro_server.logs import capture_json_logs
from voicestream.wire.bidi import Limits


async def speak_once(ws_url: str, text: str, binary: bool) -> bytes:
    """One request in a fresh session, the way a client of either frame type does it."""
    async with connect(ws_url) as ws:
        await send_json(ws, {"type": "synthesize", "text": text}, binary=binary)
        (result,), _ = await collect(ws, 1, wait_s=60)
        assert result.end is not None and result.end["type"] == "synthesis_complete", result.end
        assert result.end["audio_bytes"] == len(result.audio) > 0
        return bytes(result.audio)


async def test_binary_and_text_frame_clients_both_get_audio(kokoro_server: LiveServer, asr: ModuleType) -> None:
    text = "Good morning."
    from_binary = await speak_once(kokoro_server.ws_url, text, binary=True)
    from_text = await speak_once(kokoro_server.ws_url, text, binary=False)
    # Same text, voice and speed: the frame type changed nothing, byte for byte (the test engine
    # decodes on its window schedule, not paced to the machine's speed: tests/conftest.py).
    assert from_text == from_binary and len(from_binary) > 24_000
    assert asr.word_error_rate(text, asr.transcribe(from_binary)) == 0.0
    assert asr.word_error_rate(text, asr.transcribe(from_text)) == 0.0


@pytest.fixture(scope="module")
def seed_like_server(kokoro_engine: SpeechEngine) -> Iterator[LiveServer]:
    """The seed sample's handler: it reads TEXT frames only (websocket.receive_text)."""

    async def handler(websocket: WebSocket) -> None:
        await websocket.accept()
        while True:
            request = json.loads(await websocket.receive_text())
            chunks = kokoro_engine.synthesize(request["text"])
            await websocket.send_text(json.dumps({"type": "synthesis_start", "request_id": "seed"}))
            audio = b"".join(to_pcm16(chunk.samples) for chunk in chunks)
            await websocket.send_bytes(audio)
            await websocket.send_text(
                json.dumps({"type": "synthesis_complete", "request_id": "seed", "audio_bytes": len(audio)})
            )

    app = Starlette(routes=[WebSocketRoute("/invocations-bidirectional-stream", handler)])
    app.state.runtime = None
    with start_server(app, wait_ready=False) as server:
        yield server


async def test_the_binary_frame_check_catches_a_text_only_handler(seed_like_server: LiveServer) -> None:
    # The seed's handler serves text-frame clients...
    assert await speak_once(seed_like_server.ws_url, "Hi.", binary=False)
    # ...and fails every binary-frame client (what SageMaker sends by default): the check that
    # our server passes above fails here.
    with pytest.raises((AssertionError, ConnectionClosed, TimeoutError)):
        await speak_once(seed_like_server.ws_url, "Hi.", binary=True)


async def test_pipelined_sentences_come_back_in_order_and_match_their_text(
    kokoro_server: LiveServer, asr: ModuleType
) -> None:
    sentences = ["The sun is bright.", "Cats like to sleep.", "We will meet at noon."]
    logs = io.StringIO()
    handler = capture_json_logs(logs)
    try:
        async with connect(kokoro_server.ws_url) as ws:
            for number, sentence in enumerate(sentences):  # all sent before any audio is read
                await send_json(ws, {"type": "synthesize", "text": sentence, "request_id": f"s{number}"})
            results, others = await collect(ws, len(sentences))
            assert others == []
            assert [result.request_id for result in results] == ["s0", "s1", "s2"]
            for sentence, result in zip(sentences, results, strict=True):
                assert result.end is not None and result.end["type"] == "synthesis_complete"
                assert result.end["audio_bytes"] == len(result.audio)
                assert result.frames >= 2  # streamed in ~40 ms frames, not one blob
                assert result.end["audio_ms"] == pytest.approx(len(result.audio) / 48, abs=1)
                assert result.end["first_audio_ms"] > 0 and result.end["synth_ms"] > 0
                heard = asr.transcribe(bytes(result.audio))
                assert asr.word_error_rate(sentence, heard) <= 0.25, (sentence, heard)
            # The session stays open and serves more.
            assert await roundtrip_ping(ws) == []
            await send_json(ws, {"text": "Yes."})
            (more,), _ = await collect(ws, 1)
            assert more.end is not None and more.end["type"] == "synthesis_complete" and more.audio
            await send_json(ws, {"type": "close"})
            assert (await next_frame(ws)).control == {"type": "session_closed", "reason": "close"}
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    finally:
        logging.getLogger("voicestream").removeHandler(handler)
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    assert lines, "no log lines"
    assert all({"time", "level", "event", "session_id", "request_id"} <= line.keys() for line in lines)
    done = [line for line in lines if line["event"] == "request_done"]
    assert [line["request_id"] for line in done][:3] == ["s0", "s1", "s2"]  # so `done` is not empty
    assert all(line["first_audio_ms"] and line["synth_ms"] for line in done)


async def test_every_bad_input_gets_its_code_and_the_session_keeps_working(kokoro_server: LiveServer) -> None:
    limits = kokoro_server.runtime.limits
    bad: list[tuple[bytes | str, str]] = [
        (b"\xff\xfe\x00garbage", "invalid_utf8"),
        (b'{"text": "caf\xc3"}', "invalid_utf8"),
        ("hello", "invalid_json"),
        (b"", "invalid_json"),
        ("[1, 2, 3]", "not_an_object"),
        ('"just a string"', "not_an_object"),
        ('{"type": "dance"}', "unknown_type"),
        ("{}", "unknown_type"),
        ('{"type": "synthesize"}', "missing_text"),
        ('{"type": "synthesize", "text": 42}', "missing_text"),
        ('{"text": "   "}', "empty_text"),
        (json.dumps({"text": "a" * (limits.max_text_chars + 1)}), "text_too_long"),
        ('{"text": "Hi.", "voice": "xx_nobody"}', "unknown_voice"),
        ('{"text": "Hi.", "voice": "af_heart:0.5,xx_nobody:0.5"}', "unknown_voice"),
        ('{"text": "Hi.", "speed": 7}', "invalid_speed"),
        ('{"text": "Hi.", "speed": "fast"}', "invalid_speed"),
        ('{"text": "Hi.", "format": "ogg"}', "invalid_format"),
        ('{"type": "config", "format": "flac"}', "invalid_format"),
        ('{"type": "config", "voice": "nobody"}', "unknown_voice"),
        ('{"text": "Hi.", "request_id": ""}', "invalid_request_id"),
    ]
    async with connect(kokoro_server.ws_url) as ws:
        for payload, code in bad:
            for as_binary in (True, False):
                if not as_binary and isinstance(payload, bytes):
                    continue  # a TEXT frame cannot carry invalid UTF-8
                frame = payload.encode() if as_binary and isinstance(payload, str) else payload
                await ws.send(frame)
                reply = await next_frame(ws)
                assert reply.control is not None and reply.control["type"] == "error", (payload, reply)
                assert reply.control["code"] == code, (payload, reply.control)
                assert reply.control["message"]
        # WebSocket-level pings are answered too (SageMaker's keepalive).
        pong = await ws.ping()
        await asyncio.wait_for(pong, 10)
        # After all of that the session still works.
        await send_json(ws, {"text": "Okay.", "request_id": "after"})
        (result,), _ = await collect(ws, 1)
        assert result.request_id == "after" and result.end is not None
        assert result.end["type"] == "synthesis_complete" and result.audio


async def test_queue_limit_and_duplicate_request_id(server_factory: ServerFactory) -> None:
    with server_factory(Limits(max_queued=2)) as server:
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"text": "One.", "request_id": "a"})
            await send_json(ws, {"text": "Two.", "request_id": "a"})
            await send_json(ws, {"text": "Three.", "request_id": "b"})
            await send_json(ws, {"text": "Four.", "request_id": "c"})
            results, others = await collect(ws, 2)
            assert [result.request_id for result in results] == ["a", "b"]
            assert [(other["code"], other.get("request_id")) for other in others] == [
                ("duplicate_request_id", None),  # an id here would read as the end of request "a"
                ("queue_full", "c"),
            ]
            assert all(result.end is not None and result.end["type"] == "synthesis_complete" for result in results)


async def test_cancel_mid_synthesis_stops_the_request_and_drops_the_queue(kokoro_server: LiveServer) -> None:
    long_text = "First one is here. Second one follows. Third one now. Fourth one last. Fifth one too."
    sentences_before = kokoro_server.runtime.stats.sentences_started
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"text": long_text, "request_id": "long"})
        await send_json(ws, {"text": "Queued behind it.", "request_id": "queued"})
        first = await next_frame(ws)
        assert first.type == "synthesis_start" and first.control is not None
        assert first.control["request_id"] == "long"
        assert (await next_frame(ws)).control is None  # audio is flowing: cancel mid-request
        await send_json(ws, {"type": "cancel"})
        while (frame := await next_frame(ws)).type != "cancelled":
            assert frame.control is None, f"nothing but audio may come before cancelled: {frame}"
        assert frame.control == {"type": "cancelled", "request_ids": ["long", "queued"]}
        await kokoro_server.until(lambda server: server.runtime.stats.steps_running == 0)
        # Neither the rest of the long request nor the queued one was synthesized.
        assert kokoro_server.runtime.stats.sentences_started - sentences_before < 5
        # Nothing of the cancelled requests follows, and the session serves new requests.
        assert await roundtrip_ping(ws) == []
        await send_json(ws, {"text": "Fine.", "request_id": "next"})
        (result,), others = await collect(ws, 1)
        assert result.request_id == "next" and result.end is not None and others == []


async def test_cancel_with_nothing_pending_answers_an_empty_list(kokoro_server: LiveServer) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"type": "cancel"})
        assert (await next_frame(ws)).control == {"type": "cancelled", "request_ids": []}


async def test_disconnect_mid_synthesis_stops_the_work(kokoro_server: LiveServer) -> None:
    runtime = kokoro_server.runtime
    await kokoro_server.until(lambda server: server.runtime.stats.sessions_active == 0)
    sentences_before = runtime.stats.sentences_started
    tasks_before = kokoro_server.task_names()
    text = " ".join(f"This is sentence number {n}." for n in range(1, 9))
    ws = await connect(kokoro_server.ws_url)
    await send_json(ws, {"text": text})
    assert (await next_frame(ws)).type == "synthesis_start"
    assert (await next_frame(ws)).control is None  # the first sentence's audio arrived
    ws.transport.abort()  # the client vanishes without a closing handshake
    await kokoro_server.until(
        lambda server: server.runtime.stats.sessions_active == 0 and server.runtime.stats.steps_running == 0
    )
    started = runtime.stats.sentences_started - sentences_before
    assert 1 <= started < 8, f"{started} of 8 sentences were synthesized for a client that had gone"
    await kokoro_server.until(lambda server: server.task_names() == tasks_before, wait_s=10)


async def test_idle_timeout_closes_the_session(server_factory: ServerFactory) -> None:
    with server_factory(Limits(idle_timeout_s=0.5)) as server:
        async with connect(server.ws_url) as ws:
            assert await roundtrip_ping(ws) == []
            error = await next_frame(ws, wait_s=30)
            assert error.control is not None and error.control["code"] == "idle_timeout"
            assert (await next_frame(ws)).control == {"type": "session_closed", "reason": "idle_timeout"}
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        await server.until(lambda live: live.runtime.stats.sessions_active == 0 and not live.session_tasks())


async def test_session_duration_limit(server_factory: ServerFactory) -> None:
    with server_factory(Limits(max_session_s=1.0)) as server:
        async with connect(server.ws_url) as ws:
            with contextlib.suppress(ConnectionClosed):
                while True:  # keep the session busy with pings: only the duration limit can end it
                    await send_json(ws, {"type": "ping"})
                    await asyncio.sleep(0.1)
            frames: list[dict[str, Any]] = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frame = await next_frame(ws, wait_s=30)
                    assert frame.control is not None
                    frames.append(frame.control)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            assert {"type": "pong", "engine": "onnx", "device": "cpu"} in frames
            ending = [frame for frame in frames if frame["type"] != "pong"]
            assert [frame.get("code") or frame["type"] for frame in ending] == ["session_timeout", "session_closed"]


async def test_max_sessions_refuses_the_extra_one(server_factory: ServerFactory) -> None:
    with server_factory(Limits(max_sessions=1)) as server:
        async with connect(server.ws_url) as first:
            assert await roundtrip_ping(first) == []
            async with connect(server.ws_url) as second:
                busy = await next_frame(second)
                assert busy.control is not None and busy.control["code"] == "server_busy"
                assert (await next_frame(second)).type == "session_closed"
                with pytest.raises(ConnectionClosed) as closed:
                    await second.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
            assert await roundtrip_ping(first) == []  # the open session is unaffected
        await server.until(lambda live: live.runtime.stats.sessions_active == 0)
        async with connect(server.ws_url) as third:
            assert await roundtrip_ping(third) == []


async def test_config_sets_session_defaults_and_engine_errors_end_only_their_request(
    kokoro_server: LiveServer,
) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"type": "config", "format": "mp3", "voice": "bm_george", "speed": 1.2})
        await send_json(ws, {"text": "Hello.", "request_id": "mp3"})
        # Over the phoneme budget: refused when its synthesis starts, like any engine error.
        await send_json(ws, {"text": "9" * 2000, "request_id": "heavy"})
        (mp3, heavy), others = await collect(ws, 2)
        assert others == []
        assert mp3.start["format"] == "mp3" and mp3.start["voice"] == "bm_george"
        assert mp3.end is not None and mp3.end["type"] == "synthesis_complete"
        with av.open(io.BytesIO(bytes(mp3.audio)), mode="r", format="mp3") as container:
            decoded = [frame.samples for frame in container.decode(audio=0)]
        assert sum(decoded) > 12_000  # half a second at 24 kHz, give or take
        assert heavy.end is not None and heavy.end["type"] == "error"
        assert heavy.end["code"] == "text_too_complex" and heavy.end["request_id"] == "heavy"
        assert await roundtrip_ping(ws) == []
