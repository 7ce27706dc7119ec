"""BidiSession, the client, against the real ServerSession in memory, and against scripted servers.

The in-memory transport keeps frame kinds and close codes, so everything the client does on a
WebSocket it does here, in milliseconds; tests/integration repeats the important cases over
real sockets with the real model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.support.fakes import MemoryTransport, ScriptedTransport, Step, ToneEngine, started_runtime
from voicestream.speech import (
    Audio,
    BidiSession,
    Cancelled,
    ConnectionLostError,
    Event,
    Flushed,
    Pong,
    ProtocolViolationError,
    RequestCompleted,
    RequestFailedError,
    SessionClosed,
    SessionClosedError,
    SessionConnectError,
    SessionState,
    SessionTimeoutError,
    SynthesisStart,
)
from voicestream.wire.errors import ErrorMessage

BOUND_S = 10.0


async def memory_session(engine: ToneEngine | None = None, **options: Any) -> tuple[BidiSession, MemoryTransport]:
    runtime = await started_runtime(engine or ToneEngine())
    transport = MemoryTransport(runtime)
    return BidiSession(transport, **options), transport


async def events_until(session: BidiSession, done: type, request_id: str | None = None) -> list[Event]:
    seen: list[Event] = []
    async with asyncio.timeout(BOUND_S):
        async for event in session.events():
            seen.append(event)
            if isinstance(event, done) and (request_id is None or getattr(event, "request_id", None) == request_id):
                return seen
    raise AssertionError(f"the session ended before {done.__name__}: {seen}")


async def test_pipelined_requests_arrive_in_order_with_their_timings() -> None:
    session, transport = await memory_session()
    async with session:
        ids = [await session.send(text) for text in ("One.", "Two, a bit longer.", "Three.")]
        assert ids == ["req-1", "req-2", "req-3"]
        events = await events_until(session, RequestCompleted, "req-3")
    kinds = [(type(e).__name__, getattr(e, "request_id", None)) for e in events if not isinstance(e, Audio)]
    assert kinds == [
        (name, rid) for rid in ids for name in ("SynthesisStart", "RequestCompleted")
    ]  # no interleaving: each request's audio sits between its start and its completion
    for rid in ids:
        timing = session.timings[rid]
        assert timing.outcome == "complete"
        assert timing.audio_bytes == sum(len(e.data) for e in events if isinstance(e, Audio) and e.request_id == rid)
        assert timing.first_audio_s is not None and timing.total_s is not None
        assert timing.sent_at <= (timing.started_at or 0) <= (timing.first_audio_at or 0) <= (timing.completed_at or 0)
    # Messages go out as binary frames by default, as SageMaker's BINARY data type delivers them.
    assert all(isinstance(payload, bytes) for payload in transport.sent)
    assert session._state is SessionState.CLOSED


async def test_normalize_is_sent_per_request_and_per_session() -> None:
    engine = ToneEngine()
    session, _ = await memory_session(engine)
    async with session:
        await session.send("As written.", normalize=False)
        await session.configure(normalize=False)
        await session.send("Session default.")
        last = await session.send("Read right.", normalize=True)
        await events_until(session, RequestCompleted, last)
    assert [options.normalize for options in engine.text_options] == [False, False, True]


async def test_text_frames_on_request() -> None:
    runtime = await started_runtime(ToneEngine())
    transport = MemoryTransport(runtime, frames="text")
    async with BidiSession(transport) as session:
        result = await session.synthesize("Hello.")
    assert result.audio and result.format == "pcm" and result.sample_rate == 24_000
    assert all(isinstance(payload, str) for payload in transport.sent)


async def test_server_errors_cancel_and_ping_are_events_and_the_session_lives_on() -> None:
    session, _ = await memory_session(ToneEngine(refuse_on="forbidden", step_delay_s=0.01, ms_per_char=40))
    async with session:
        bad = await session.send("A forbidden word.")
        error_events = await events_until(session, ErrorMessage, bad)
        assert error_events[-1].code == "invalid_request"  # type: ignore[union-attr]
        assert session.timings[bad].outcome == "error"
        await session.ping()
        assert isinstance((await events_until(session, Pong))[-1], Pong)
        slow = [await session.send("A long sentence that will be interrupted.") for _ in range(2)]
        await events_until(session, Audio)
        await session.cancel()
        cancelled = (await events_until(session, Cancelled))[-1]
        assert isinstance(cancelled, Cancelled) and set(cancelled.request_ids) == set(slow)
        assert {session.timings[rid].outcome for rid in slow} == {"cancelled"}
        with pytest.raises(RequestFailedError) as refused:
            await session.synthesize("Another forbidden one.")
        assert refused.value.code == "invalid_request"
        assert (await session.synthesize("Fine again.")).audio


async def test_close_is_polite_and_idempotent() -> None:
    session, transport = await memory_session()
    await session.connect()
    await session.close()
    await session.close()
    assert transport.channel.close_code == 1000
    assert json.loads(transport.sent[-1]) == {"type": "close"}
    with pytest.raises(SessionClosedError):
        await session.send("Too late.")


async def test_bad_arguments_are_refused_before_anything_is_sent() -> None:
    session, transport = await memory_session()
    async with session:
        for text in ("", "   ", 5, "\ud800"):
            with pytest.raises(ValueError):
                await session.send(text)  # type: ignore[arg-type]
        rid = await session.send("Once.", request_id="mine")
        with pytest.raises(ValueError, match="already used"):
            await session.send("Twice.", request_id="mine")
        await events_until(session, RequestCompleted, rid)
    with pytest.raises(ValueError):
        BidiSession(transport, silence_timeout=0)


async def test_a_silent_server_is_a_timeout_never_a_hang() -> None:
    async with BidiSession(ScriptedTransport(), silence_timeout=0.2) as session:
        await session.send("Anyone there?")
        with pytest.raises(SessionTimeoutError, match="no frame"):
            await events_until(session, RequestCompleted)
        with pytest.raises(SessionClosedError):
            await session.send("Still?")


async def test_a_refused_connection_is_a_connect_error() -> None:
    with pytest.raises(SessionConnectError):
        async with BidiSession(ScriptedTransport(refuse=True)):
            pass


async def test_a_stream_that_ends_with_requests_outstanding_is_a_lost_connection() -> None:
    start = json.dumps(
        {"type": "synthesis_start", "request_id": "req-1", "format": "pcm", "sample_rate": 24000, "voice": "af_heart"}
    )
    async with BidiSession(ScriptedTransport([start, b"\x00\x01" * 100, "end"]), close_timeout=0.2) as session:
        await session.send("Cut short.")
        with pytest.raises(ConnectionLostError, match="outstanding"):
            await events_until(session, RequestCompleted)


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        ("not json", "text frame is not a JSON object"),
        (b"\x00\x01", "before any synthesis_start"),
        ('{"type": "synthesis_complete", "request_id": "nobody", "audio_bytes": 0, "audio_ms": 0, '
         '"first_audio_ms": null, "synth_ms": 0}', "never sent"),
        ('{"type": "synthesis_start"}', "malformed"),
    ],
)  # fmt: skip
async def test_contract_violations_fail_the_session_clearly(frame: str | bytes, complaint: str) -> None:
    async with BidiSession(ScriptedTransport([frame]), close_timeout=0.2) as session:
        await session.send("Hello.")
        with pytest.raises(ProtocolViolationError, match=complaint):
            await events_until(session, RequestCompleted)


async def test_unknown_server_messages_are_skipped() -> None:
    start = {"type": "synthesis_start", "request_id": "req-1", "format": "pcm", "sample_rate": 24000, "voice": "x"}
    complete = {"type": "synthesis_complete", "request_id": "req-1", "audio_bytes": 2, "audio_ms": 0.1}
    complete |= {"first_audio_ms": 1.0, "synth_ms": 1.0}
    script: list[Step] = [json.dumps({"type": "from_the_future"}), json.dumps(start), b"\x00\x01", json.dumps(complete)]
    async with BidiSession(ScriptedTransport(script), close_timeout=0.2) as session:
        await session.send("Hello.")
        events = await events_until(session, RequestCompleted)
    assert [type(event) for event in events] == [SynthesisStart, Audio, RequestCompleted]


async def test_the_servers_session_closed_ends_the_event_stream() -> None:
    script: list[Step] = [json.dumps({"type": "session_closed", "reason": "idle_timeout"}), "end"]
    async with BidiSession(ScriptedTransport(script), close_timeout=0.2) as session:
        events = [event async for event in session.events()]
    assert events == [SessionClosed(reason="idle_timeout")]


async def test_streamed_text_becomes_pieces_the_client_tracks_and_can_cancel() -> None:
    session, _ = await memory_session()
    async with session:
        assert await session.append("Hello there. And", request_id="reply") == "reply"
        assert await session.append(" the rest") == "reply"
        with pytest.raises(ValueError, match="flush"):
            await session.append("x", request_id="other")
        await session.flush()
        events = await events_until(session, Flushed)
        flushed = events[-1]
        assert isinstance(flushed, Flushed) and flushed.request_ids == ("reply.1", "reply.2")
        await events_until(session, RequestCompleted, "reply.2")
        assert [session.timings[rid].outcome for rid in flushed.request_ids] == ["complete", "complete"]
        # A streamed utterance is cancelled by its own id: its pieces are dropped, nothing else.
        kept = await session.send("Before it.")
        await session.append("One piece here. Another one here. And a part", request_id="later")
        await session.cancel("later")
        # `kept` may complete before or after the cancel is answered: wait for both, in any order.
        cancelled: Cancelled | None = None
        kept_done = False
        async with asyncio.timeout(BOUND_S):
            async for event in session.events():
                cancelled = event if isinstance(event, Cancelled) else cancelled
                kept_done = kept_done or (isinstance(event, RequestCompleted) and event.request_id == kept)
                if cancelled is not None and kept_done:
                    break
        assert cancelled is not None and cancelled.request_id == "later"
        assert set(cancelled.request_ids) <= {"later.1", "later.2"}
        assert session.timings[kept].outcome == "complete"
        await session.cancel("no-such-request")
        answer = (await events_until(session, Cancelled))[-1]
        assert isinstance(answer, Cancelled) and answer.request_ids == ()
