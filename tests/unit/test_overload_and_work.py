"""Issue 17 in the unit tier: bounded work per request, one session's G2P never holding up
another's, honest overload (a `queued` keepalive; refusals are `tts_unavailable`).

ServerSession and BidiSession run for real, in memory; the engine is a tone (its work is its
characters) or a tone whose work check converts text in real G2P worker processes. No test
asserts how long something took: they assert what finished, and in which order.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import (
    G2PToneEngine,
    MemoryChannel,
    MemoryTransport,
    ScriptedTransport,
    Step,
    ToneEngine,
    started_runtime,
)
from tests.support.g2p_builders import build_echo, hold
from voicestream.engine.text.g2p import G2P, G2PSettings
from voicestream.kokoro_server.session import ServerSession
from voicestream.speak.run import run_bidi
from voicestream.speak.sources import ReplayPace, ReplaySource
from voicestream.speech import (
    Audio,
    BidiSession,
    Event,
    Queued,
    RequestCompleted,
    SessionConnectError,
    SessionTimeoutError,
)
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import parse_control_frame
from voicestream.wire.speak import Done, ReplyError

BOUND_S = 20.0
FAST = ReplayPace(first_token_s=0.0, tokens_per_s=2000)


async def frames_of(channel: MemoryChannel, until: Any) -> list[dict[str, Any]]:
    """Control frames from the server until `until(frame)` is true (audio is skipped)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(BOUND_S):
        while True:
            item = await channel.from_server.get()
            assert not isinstance(item, int), f"the session closed with code {item}"
            control = parse_control_frame(item)
            if control is None:
                continue
            seen.append(control)
            if until(control):
                return seen


def send(channel: MemoryChannel, body: dict[str, Any]) -> None:
    channel.client_sends(json.dumps(body).encode())


# --- the work of one request --------------------------------------------------------------


async def test_a_request_over_the_phoneme_budget_is_refused_before_any_audio() -> None:
    runtime = await started_runtime(ToneEngine(), Limits(max_phonemes=40))  # a tone's work: its characters
    channel = MemoryChannel()
    session = asyncio.create_task(ServerSession(runtime, channel).run())
    send(channel, {"type": "synthesize", "text": "Short. " + "Too much speech here. " * 3, "request_id": "big"})
    send(channel, {"type": "synthesize", "text": "Short enough.", "request_id": "small"})
    frames = await frames_of(channel, lambda f: f["type"] == "synthesis_complete")
    kinds = [(frame["type"], frame.get("request_id")) for frame in frames]
    assert kinds == [
        ("synthesis_start", "big"),
        ("error", "big"),  # no audio came between: the whole request was measured first
        ("synthesis_start", "small"),
        ("synthesis_complete", "small"),
    ]
    error = frames[1]
    assert error["code"] == "text_too_complex" and "at most 40" in error["message"]
    assert runtime.engine.texts == ["Short enough."]  # type: ignore[attr-defined]  # nothing of "big" was spoken
    channel.client_disconnects()
    await session


async def test_a_request_of_only_invisible_characters_is_empty_text() -> None:
    runtime = await started_runtime(ToneEngine())
    channel = MemoryChannel()
    session = asyncio.create_task(ServerSession(runtime, channel).run())
    send(channel, {"type": "synthesize", "text": "\u200b\u200b\u2060", "request_id": "r1"})
    frames = await frames_of(channel, lambda f: f["type"] == "error")
    assert frames[-1]["code"] == "empty_text" and frames[-1]["request_id"] == "r1"
    channel.client_disconnects()
    await session


# --- one session's G2P never holds up another's ---------------------------------------------


@pytest.fixture(scope="module")
def g2p() -> Iterator[G2P]:
    pool = G2P(G2PSettings(workers=2, timeout_s=60), build=build_echo)
    pool.warm()
    yield pool
    pool.close()


async def test_a_text_stuck_in_g2p_does_not_delay_another_sessions_audio(g2p: G2P, tmp_path: Path) -> None:
    """Session A's text is held in G2P until the test releases it; session B's must be spoken
    meanwhile. Under the old single G2P lock B would have waited for A (here: forever)."""
    runtime = await started_runtime(G2PToneEngine(g2p))
    stuck, other = MemoryChannel(), MemoryChannel()
    sessions = [asyncio.create_task(ServerSession(runtime, channel).run()) for channel in (stuck, other)]
    release = tmp_path / "release"
    send(stuck, {"type": "synthesize", "text": hold(release), "request_id": "stuck"})
    await asyncio.sleep(0)  # A's request is queued first
    send(other, {"type": "synthesize", "text": "Hello there.", "request_id": "other"})
    spoken = await frames_of(other, lambda f: f["type"] == "synthesis_complete")
    assert spoken[-1]["request_id"] == "other"
    assert stuck.from_server.qsize() <= 1  # at most A's synthesis_start: none of its audio, no end
    release.touch()
    done = await frames_of(stuck, lambda f: f["type"] in ("synthesis_complete", "error"))
    assert done[-1] == {**done[-1], "type": "synthesis_complete", "request_id": "stuck"}
    for channel in (stuck, other):
        channel.client_disconnects()
    await asyncio.gather(*sessions)


# --- the queued keepalive -------------------------------------------------------------------


def start(request_id: str) -> str:
    return json.dumps(
        {"type": "synthesis_start", "request_id": request_id, "format": "pcm", "sample_rate": 24000, "voice": "x"}
    )


def complete(request_id: str) -> str:
    body = {"type": "synthesis_complete", "request_id": request_id, "audio_bytes": 2, "audio_ms": 0.1}
    return json.dumps(body | {"first_audio_ms": 1.0, "synth_ms": 1.0})


def queued(request_id: str) -> str:
    return json.dumps({"type": "queued", "request_id": request_id, "waited_ms": 150.0})


async def test_queued_frames_count_as_progress_for_the_silence_timeout() -> None:
    # Nine pauses of 0.15 s: 1.35 s in all without audio, against a silence timeout of 0.4 s.
    script: list[Step] = [start("req-1")]
    for _ in range(9):
        script += [0.15, queued("req-1")]
    script += [b"\x00\x01", complete("req-1")]
    async with BidiSession(ScriptedTransport(script), silence_timeout=0.4, close_timeout=0.2) as session:
        await session.send("Queued behind others.")
        events = [event async for event in _until_complete(session)]
    assert [type(event).__name__ for event in events].count("Queued") == 9
    assert isinstance(events[-1], RequestCompleted)


async def test_the_same_wait_without_queued_frames_is_a_silence_timeout() -> None:
    script: list[Step] = [start("req-1"), 1.35, b"\x00\x01", complete("req-1")]
    async with BidiSession(ScriptedTransport(script), silence_timeout=0.4, close_timeout=0.2) as session:
        await session.send("Queued behind others.")
        with pytest.raises(SessionTimeoutError):
            _ = [event async for event in _until_complete(session)]


async def _until_complete(session: BidiSession) -> Any:
    async with asyncio.timeout(BOUND_S):
        async for event in session.events():
            yield event
            if isinstance(event, RequestCompleted):
                return


# One synthesis worker and an engine step of 0.6 s: B's request waits for A's step in progress,
# then for its own, longer than B's silence timeout (0.4 s) without a frame.
def slow_engine() -> ToneEngine:
    return ToneEngine(step_delay_s=0.6, chunk_ms=1000)


async def test_a_request_waiting_for_a_busy_worker_is_kept_alive() -> None:
    """The server's `queued` frames keep B's session alive, and B completes."""
    runtime = await started_runtime(slow_engine(), Limits(keepalive_s=0.1), workers=1)
    first = BidiSession(MemoryTransport(runtime), silence_timeout=5.0)
    second = BidiSession(MemoryTransport(runtime), silence_timeout=0.4)
    async with first, second:
        await first.send("x" * 150)  # 1.5 s of tone: two steps of 0.6 s
        await asyncio.sleep(0.05)
        await second.send("Me too.")
        seen: list[Event] = [event async for event in _until_complete(second)]
        await anext(_until_complete(first))
    keepalives = [event for event in seen if isinstance(event, Queued)]
    assert keepalives and all(event.request_id == "req-1" and event.waited_ms > 0 for event in keepalives)
    assert any(isinstance(event, Audio) for event in seen) and isinstance(seen[-1], RequestCompleted)


async def test_without_the_keepalive_that_wait_fails_the_waiting_session() -> None:
    runtime = await started_runtime(slow_engine(), Limits(keepalive_s=60), workers=1)
    first = BidiSession(MemoryTransport(runtime), silence_timeout=5.0)
    second = BidiSession(MemoryTransport(runtime), silence_timeout=0.4)
    async with first, second:
        await first.send("x" * 150)
        await asyncio.sleep(0.05)
        await second.send("Me too.")
        with pytest.raises(SessionTimeoutError):
            _ = [event async for event in _until_complete(second)]


# --- refusals are retryable -------------------------------------------------------------------

REFUSAL: list[Step] = [
    json.dumps({"type": "error", "code": "server_busy", "message": "32 sessions are open: try again later"}),
    json.dumps({"type": "session_closed", "reason": "server_busy"}),
    "end",
]


async def test_a_refused_session_is_a_connect_error_with_the_servers_code() -> None:
    async with BidiSession(ScriptedTransport(list(REFUSAL)), close_timeout=0.2) as session:
        await session.send("Hello?")
        with pytest.raises(SessionConnectError, match="server_busy") as caught:
            _ = [event async for event in session.events()]
    assert caught.value.server_code == "server_busy" and caught.value.code == "tts_unavailable"


async def test_a_refused_session_is_tts_unavailable_for_the_speak_function() -> None:
    """Before: `synthesis_failed` "[server_busy] …", which reads as a bad sentence, not a busy server."""

    def refused() -> BidiSession:
        return BidiSession(ScriptedTransport(list(REFUSAL)), close_timeout=0.2)

    async with asyncio.timeout(BOUND_S):
        events = [event async for event in run_bidi(ReplaySource("Hello there. How are you?", FAST), refused)]
    error, done = events[-2:]
    assert isinstance(error, ReplyError) and error.code == "tts_unavailable" and "server_busy" in error.message
    assert isinstance(done, Done) and done.status == "error"


async def test_a_1013_close_from_the_in_memory_server_is_a_connect_error() -> None:
    runtime = await started_runtime(ToneEngine())
    transport = MemoryTransport(runtime)
    await transport.connect()
    await transport.channel.close(1013, "server_busy")
    with pytest.raises(SessionConnectError) as caught:
        while await transport.receive() is not None:
            pass
    assert caught.value.server_code == "server_busy"
    await transport.close()
