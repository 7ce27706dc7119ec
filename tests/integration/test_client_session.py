"""BidiSession + WebSocketTransport against the real server with the real Kokoro-82M engine."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Literal

import pytest

from tests.support.server import LiveServer
from voicestream.speech import (
    Audio,
    BidiSession,
    Cancelled,
    Event,
    Pong,
    Queued,
    RequestCompleted,
    RequestFailedError,
    SessionClosed,
    SynthesisStart,
)
from voicestream.wire.errors import ErrorMessage

SENTENCES = ("Thanks for waiting.", "Your flight leaves at nine.", "Have a good trip.")
BOUND_S = 300.0  # only a hang reaches this; the model on a shared CPU is slow, never this slow


async def until_complete(session: BidiSession, last_request_id: str) -> list[Event]:
    """Every event up to and including the `synthesis_complete` of `last_request_id`, less the
    `queued` keepalives: the server sends one whenever a request has waited a while for a worker,
    which on a loaded machine may happen anywhere in the stream, and says nothing of order."""
    seen: list[Event] = []
    async for event in session.events():
        if isinstance(event, Queued):
            continue
        seen.append(event)
        if isinstance(event, RequestCompleted | ErrorMessage) and event.request_id == last_request_id:
            break
    return seen


def check_ordered_requests(events: list[Event], request_ids: list[str]) -> dict[str, bytes]:
    """Each request is start, audio..., complete, in send order, never interleaved."""
    audio: dict[str, bytes] = {}
    position = 0
    for rid in request_ids:
        start = events[position]
        assert isinstance(start, SynthesisStart) and start.request_id == rid, (rid, start)
        assert (start.format, start.sample_rate) == ("pcm", 24_000)
        position += 1
        chunks: list[bytes] = []
        while isinstance(events[position], Audio):
            frame = events[position]
            assert isinstance(frame, Audio) and frame.request_id == rid
            chunks.append(frame.data)
            position += 1
        complete = events[position]
        assert isinstance(complete, RequestCompleted) and complete.request_id == rid, (rid, complete)
        position += 1
        audio[rid] = b"".join(chunks)
        assert len(audio[rid]) == complete.audio_bytes > 24_000  # over half a second of speech
        timings = complete.timings
        assert timings.outcome == "complete" and timings.audio_bytes == complete.audio_bytes
        assert timings.started_at is not None and timings.first_audio_at is not None
        assert timings.completed_at is not None
        assert timings.sent_at <= timings.started_at <= timings.first_audio_at <= timings.completed_at
    assert position == len(events)
    return audio


@pytest.mark.parametrize("frames", ["binary", "text"])
async def test_pipelined_sentences_come_back_in_order_as_speech(
    kokoro_server: LiveServer, asr: ModuleType, frames: Literal["binary", "text"]
) -> None:
    async with asyncio.timeout(BOUND_S), BidiSession.websocket(kokoro_server.ws_url, frames=frames) as session:
        # All three go out before any audio comes back: send() does not wait.
        request_ids = [await session.send(sentence) for sentence in SENTENCES]
        assert list(session.timings) == request_ids
        assert all(t.started_at is None for t in session.timings.values())
        events = await until_complete(session, request_ids[-1])
    audio = check_ordered_requests(events, request_ids)
    assert isinstance(session.connect_s, float)
    if frames == "binary":  # one speech check is enough: the bytes path is the same
        transcript = asr.transcribe(b"".join(audio[rid] for rid in request_ids))
        assert asr.word_error_rate(" ".join(SENTENCES), transcript) <= 0.25, transcript


async def test_cancel_drops_the_rest_and_the_session_lives_on(kokoro_server: LiveServer) -> None:
    async with asyncio.timeout(BOUND_S), BidiSession.websocket(kokoro_server.ws_url) as session:
        first, *rest = [await session.send(sentence) for sentence in SENTENCES]
        barged_in = False
        answer: Cancelled | None = None
        async for event in session.events():
            if isinstance(event, Audio) and not barged_in:
                await session.cancel()  # barge-in as soon as the user hears something
                barged_in = True
            elif isinstance(event, Cancelled):
                answer = event
                break
        assert answer is not None, "no cancelled answer"
        assert set(rest) <= set(answer.request_ids), answer
        outcomes = {rid: session.timings[rid].outcome for rid in [first, *rest]}
        assert all(outcome in ("cancelled", "complete") for outcome in outcomes.values()), outcomes
        assert all(outcomes[rid] == "cancelled" for rid in rest), outcomes
        # Nothing is outstanding, and the same session still speaks.
        result = await session.synthesize("Still here.")
        assert len(result.audio) > 12_000 and result.timings.outcome == "complete"


async def test_errors_pings_and_a_polite_close(kokoro_server: LiveServer) -> None:
    async with asyncio.timeout(BOUND_S):
        session = BidiSession.websocket(kokoro_server.ws_url)
        async with session:
            bad = await session.send("Hello.", voice="no_such_voice")
            await session.ping()
            seen: list[Event] = []
            async for event in session.events():
                seen.append(event)
                if isinstance(event, Pong):
                    break
            error = next(event for event in seen if isinstance(event, ErrorMessage))
            assert (error.code, error.request_id) == ("unknown_voice", bad)
            assert session.timings[bad].outcome == "error"
            with pytest.raises(RequestFailedError, match="invalid_speed"):
                await session.synthesize("Too fast.", speed=9.0)
            await session.close()
            tail = [event async for event in session.events()]
        assert [type(event) for event in tail] == [SessionClosed], tail
    await kokoro_server.until(lambda server: not server.session_tasks(), wait_s=30)
