"""VllmOmniSession against scripted vLLM-Omni servers: the edge cases of the mapping onto the
`SpeechSession` events (pairing, ordering, failures, timeouts), in milliseconds. The same client
against the faithful fake over real sockets is tests/unit/test_client_vllm_omni_sockets.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.fakes import ScriptedTransport, Step, TurnTransport
from voicestream.speech import (
    Audio,
    BidiSession,
    Cancelled,
    ConnectionLostError,
    ErrorMessage,
    Event,
    Pong,
    ProtocolViolationError,
    RequestCompleted,
    SessionClosed,
    SessionClosedError,
    SessionTimeoutError,
    SpeechSession,
    SynthesisStart,
    Transport,
    VllmOmniSession,
)
from voicestream.wire.bidi import wav_header
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.vllm_omni import MAX_INPUT_TEXT_MESSAGE_CHARS, SessionConfig

BOUND_S = 10.0
PCM = b"\x01\x00" * 2400  # 100 ms at 24 kHz


def msg(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def utterance(index: int, text: str = "Hi.", chunks: int = 2) -> list[Step]:
    """What upstream main answers to one flushed utterance with streamed PCM."""
    return [
        msg("audio.start", utterance_index=index, sentence_index=0, sentence_text=text, format="pcm",
            sample_rate=24_000, channels=1),
        *[PCM] * chunks,
        msg("audio.done", utterance_index=index, sentence_index=0, total_bytes=len(PCM) * chunks, error=False),
        msg("session.done", utterance_index=index, total_sentences=1),
    ]  # fmt: skip


def session_over(*transports: ScriptedTransport, **options: Any) -> VllmOmniSession:
    queue = list(transports)

    def open_transport() -> Transport:
        return queue.pop(0)

    # Scripted servers never answer session.close by closing: a short close_timeout bounds close().
    options.setdefault("close_timeout", 0.2)
    return VllmOmniSession(open_transport, SessionConfig(voice="vivian", language="English"), **options)


def sent(transport: ScriptedTransport) -> list[dict[str, Any]]:
    assert all(isinstance(payload, str) for payload in transport.sent), "a binary frame ends upstream's session"
    return [json.loads(payload) for payload in transport.sent]


async def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def collect(session: VllmOmniSession, until: type, count: int = 1) -> list[Event]:
    seen: list[Event] = []
    async with asyncio.timeout(BOUND_S):
        async for event in session.events():
            seen.append(event)
            if sum(isinstance(e, until) for e in seen) == count:
                return seen
    raise AssertionError(f"the session ended before {count} {until.__name__}: {seen}")


async def test_pipelined_utterances_map_to_requests_in_order() -> None:
    server = TurnTransport([utterance(0), utterance(1)], trigger="input.done")
    async with session_over(server) as session:
        first = await session.send("Hello there.")
        assert await session.send("How are you?", request_id="mine") == "mine"
        events = await collect(session, RequestCompleted, 2)
    kinds = [(type(e).__name__, getattr(e, "request_id", None)) for e in events]
    assert kinds == [
        ("SynthesisStart", first), ("Audio", first), ("Audio", first), ("RequestCompleted", first),
        ("SynthesisStart", "mine"), ("Audio", "mine"), ("Audio", "mine"), ("RequestCompleted", "mine"),
    ]  # fmt: skip
    start = events[0]
    assert isinstance(start, SynthesisStart)
    assert (start.format, start.sample_rate, start.voice) == ("pcm", 24_000, "vivian")
    done = events[3]
    assert isinstance(done, RequestCompleted)
    assert done.audio_bytes == 2 * len(PCM) and done.audio_ms == pytest.approx(200.0)
    assert done.timings.outcome == "complete" and done.first_audio_ms is not None
    # Text frames only, session.config first, one input.text + input.done per request, then session.close.
    assert [m["type"] for m in sent(server)] == [
        "session.config", "input.text", "input.done", "input.text", "input.done", "session.close",
    ]  # fmt: skip
    config = sent(server)[0]
    assert config == {
        "type": "session.config", "voice": "vivian", "language": "English", "response_format": "pcm",
        "stream_audio": True, "split_granularity": "none",
    }  # fmt: skip


async def test_several_sentence_pairs_belong_to_one_request() -> None:
    two_sentences: list[Step] = [
        msg("audio.start", sentence_index=0, sentence_text="One.", format="pcm"),
        PCM,
        msg("audio.done", sentence_index=0),
        msg("audio.start", sentence_index=1, sentence_text="Two.", format="pcm"),
        PCM,
        msg("audio.done", sentence_index=1),
        msg("session.done", total_sentences=2),  # v0.21: no utterance_index
    ]
    server = TurnTransport([two_sentences], trigger="input.done")
    async with session_over(server) as session:
        rid = await session.send("One. Two.")
        events = await collect(session, RequestCompleted)
    assert [type(e).__name__ for e in events] == ["SynthesisStart", "Audio", "Audio", "RequestCompleted"]
    assert session.timings[rid].audio_bytes == 2 * len(PCM)


@pytest.mark.parametrize(
    ("steps", "complaint"),
    [
        ([PCM], "outside audio.start/audio.done"),
        ([msg("audio.done", sentence_index=0)], "without its audio.start"),
        ([msg("audio.start", sentence_index=0, sentence_text="x", format="pcm"),
          msg("session.done", total_sentences=1)], "inside an open audio.start"),
        ([msg("audio.start", sentence_index=0, sentence_text="x", format="pcm"),
          msg("audio.start", sentence_index=1, sentence_text="y", format="pcm")], "before the previous audio.done"),
        ([msg("audio.start", utterance_index=3, sentence_index=0, sentence_text="x", format="pcm")],
         "of utterance 3, expected 0"),
        (["not json at all"], "malformed message"),
        ([msg("audio.start", sentence_index="zero", sentence_text="x", format="pcm")], "malformed message"),
    ],
)  # fmt: skip
async def test_a_broken_pairing_fails_the_session(steps: list[Step], complaint: str) -> None:
    server = TurnTransport([steps], trigger="input.done")
    session = session_over(server)
    await session.connect()
    await session.send("Hi.")
    with pytest.raises(ProtocolViolationError, match=complaint):
        await collect(session, RequestCompleted)
    with pytest.raises(SessionClosedError):
        await session.send("Again.")
    await session.close()


async def test_messages_without_an_utterance_are_a_violation() -> None:
    server = ScriptedTransport([msg("session.done", total_sentences=0)])
    async with session_over(server) as session:
        with pytest.raises(ProtocolViolationError, match="no utterance outstanding"):
            await collect(session, Pong)


async def test_unknown_server_messages_are_skipped() -> None:
    server = TurnTransport([[msg("audio.progress", percent=50), *utterance(0)]], trigger="input.done")
    async with session_over(server) as session:
        await session.send("Hi.")
        events = await collect(session, RequestCompleted)
    assert [type(e).__name__ for e in events] == ["SynthesisStart", "Audio", "Audio", "RequestCompleted"]


async def test_a_generation_failure_fails_its_request_and_drops_its_audio() -> None:
    failing: list[Step] = [
        msg("audio.start", utterance_index=0, sentence_index=0, sentence_text="x", format="pcm", sample_rate=24_000),
        PCM,
        msg("error", message="Generation failed for utterance 0, sentence 0: boom", partial_audio=True,
            action="discard"),
        PCM,  # late audio of the failed request: dropped
        msg("audio.done", utterance_index=0, sentence_index=0, error=True),
        msg("session.done", utterance_index=0, total_sentences=1),
    ]  # fmt: skip
    server = TurnTransport([failing, utterance(1)], trigger="input.done")
    async with session_over(server) as session:
        bad = await session.send("Break.")
        good = await session.send("Fine.")
        events = await collect(session, RequestCompleted)
    (error,) = [e for e in events if isinstance(e, ErrorMessage)]
    assert (error.request_id, error.code) == (bad, "generation_failed")
    assert "boom" in error.message
    assert sum(len(e.data) for e in events if isinstance(e, Audio) and e.request_id == bad) == len(PCM)
    assert session.timings[bad].outcome == "error"
    assert session.timings[good].outcome == "complete"


async def test_an_error_about_no_request_is_reported_without_an_id() -> None:
    server = ScriptedTransport([msg("error", message="Invalid JSON message")])
    async with session_over(server) as session:
        await session.ping()
        events = await collect(session, ErrorMessage)
    assert events == [Pong(), ErrorMessage(code="invalid_json", message="Invalid JSON message")]


async def test_a_silent_server_times_out() -> None:
    server = ScriptedTransport()
    async with session_over(server, silence_timeout=0.3) as session:
        await session.send("Hello?")
        with pytest.raises(SessionTimeoutError, match="1 request"):
            await collect(session, RequestCompleted)


async def test_a_connection_lost_mid_utterance_fails_with_the_servers_reason() -> None:
    dying: list[Step] = [
        msg("audio.start", utterance_index=0, sentence_index=0, sentence_text="x", format="pcm"),
        PCM,
        msg("error", message="Internal error: 'text'"),
        "end",
    ]
    server = TurnTransport([dying], trigger="input.done")
    async with session_over(server) as session:
        await session.send("Hi.")
        with pytest.raises(ConnectionLostError, match="Internal error"):
            await collect(session, RequestCompleted)


async def test_requests_the_server_never_started_are_sent_again_on_a_new_connection() -> None:
    # A server before the flush change: it ends the connection after the first session.done,
    # and the second utterance (already sent) is lost with it.
    old = TurnTransport([[*utterance(0), "end"]], trigger="input.done")
    fresh = TurnTransport([utterance(0)], trigger="input.done")
    async with session_over(old, fresh) as session:
        first = await session.send("One.")
        second = await session.send("Two.")
        events = await collect(session, RequestCompleted, 2)
    assert [e.request_id for e in events if isinstance(e, RequestCompleted)] == [first, second]
    assert session.connections == 2
    assert [m["type"] for m in sent(fresh)][:3] == ["session.config", "input.text", "input.done"]
    assert sent(fresh)[1]["text"] == "Two."


async def test_an_idle_timeout_between_requests_is_transparent() -> None:
    closing = ScriptedTransport([msg("error", message="Idle timeout: no message received"), "end"])
    fresh = TurnTransport([utterance(0)], trigger="input.done")
    async with session_over(closing, fresh, keepalive_s=None) as session:
        await asyncio.sleep(0.05)  # the first connection is gone, quietly
        await session.send("Still there?")
        events = await collect(session, RequestCompleted)
    assert not any(isinstance(e, ErrorMessage) for e in events)
    assert session.connections == 2


async def test_cancel_closes_the_connection_and_the_next_send_opens_another() -> None:
    slow = TurnTransport([[msg("audio.start", sentence_index=0, sentence_text="x", format="pcm"), PCM]],
                         trigger="input.done")  # fmt: skip
    fresh = TurnTransport([utterance(0)], trigger="input.done")
    async with session_over(slow, fresh) as session:
        stopped = await session.send("A long answer.")
        queued = await session.send("And more.")
        await collect(session, Audio)
        await session.cancel()
        cancelled = await collect(session, Cancelled)
        assert cancelled[-1] == Cancelled(request_ids=(stopped, queued))
        await until(lambda: slow.closed)  # closed in the background: cancel() does not wait for it
        again = await session.send("New turn.")
        events = await collect(session, RequestCompleted)
    assert [e.request_id for e in events if isinstance(e, RequestCompleted)] == [again]
    assert session.timings[stopped].outcome == "cancelled" and session.timings[queued].outcome == "cancelled"
    assert sent(fresh)[0]["type"] == "session.config"


async def test_cancel_of_one_request_drops_its_audio_and_keeps_the_connection() -> None:
    server = TurnTransport([utterance(0), utterance(1), utterance(2)], trigger="input.done")
    async with session_over(server) as session:
        first, second, third = [await session.send(text) for text in ("One.", "Two.", "Three.")]
        await session.cancel(second)
        events = await collect(session, RequestCompleted, 2)
        await session.cancel(second)  # already ended: nothing to drop
        again = await collect(session, Cancelled)
    assert [e for e in events if isinstance(e, Cancelled)] == [Cancelled(request_ids=(second,), request_id=second)]
    assert again[-1] == Cancelled(request_ids=(), request_id=second)
    assert [e.request_id for e in events if isinstance(e, RequestCompleted)] == [first, third]
    assert not [e for e in events if isinstance(e, (Audio, SynthesisStart)) and e.request_id == second]
    assert session.timings[second].outcome == "cancelled" and session.connections == 1


async def test_a_new_voice_resends_the_config_between_utterances() -> None:
    server = TurnTransport([utterance(0), utterance(1), utterance(2)], trigger="input.done")
    async with session_over(server) as session:
        await session.send("One.", voice="ryan")
        await session.send("Two.", voice="ryan")
        await session.send("Three.")
        await collect(session, RequestCompleted, 3)
    configs = [(m["type"], m.get("voice")) for m in sent(server) if m["type"] == "session.config"]
    assert configs == [("session.config", "vivian"), ("session.config", "ryan"), ("session.config", "vivian")]


async def test_a_long_text_travels_in_pieces_under_the_message_limit() -> None:
    text = "word " * 40_000  # 200,000 characters
    server = TurnTransport([utterance(0)], trigger="input.done")
    async with session_over(server) as session:
        await session.send(text)
        await collect(session, RequestCompleted)
    pieces = [m["text"] for m in sent(server) if m["type"] == "input.text"]
    assert len(pieces) == 2 and "".join(pieces) == text
    assert all(len(payload) <= MAX_INPUT_TEXT_MESSAGE_CHARS for payload in server.sent)


async def test_wav_gets_a_streaming_header_on_its_first_audio() -> None:
    server = TurnTransport([utterance(0)], trigger="input.done")
    async with session_over(server) as session:
        rid = await session.send("Hi.", format="wav")
        events = await collect(session, RequestCompleted)
    audio = b"".join(e.data for e in events if isinstance(e, Audio))
    assert audio == wav_header(24_000) + 2 * PCM
    start = events[0]
    assert isinstance(start, SynthesisStart) and start.format == "wav"
    assert session.timings[rid].audio_bytes == len(audio)


@pytest.mark.parametrize(("options", "code"), [({"speed": 1.2}, ErrorCode.INVALID_SPEED),
                                                ({"format": "mp3"}, ErrorCode.INVALID_FORMAT),
                                                ({"lexicon": {"Hi": "hey"}}, ErrorCode.INVALID_REQUEST),
                                                ({"phonemes": True}, ErrorCode.INVALID_REQUEST),
                                                ({"normalize": False}, ErrorCode.INVALID_REQUEST)])  # fmt: skip
async def test_speed_and_mp3_are_refused_before_anything_is_sent(options: dict[str, Any], code: ErrorCode) -> None:
    server = ScriptedTransport()
    async with session_over(server) as session:
        with pytest.raises(ProtocolError) as refused:
            await session.send("Hi.", **options)
        assert refused.value.code == code and refused.value.status == 400
        await session.send("Hi.", speed=1.0)  # speed 1 is what upstream streams
    assert [m["type"] for m in sent(server)] == ["session.config", "input.text", "input.done", "session.close"]


async def test_ping_is_answered_once_earlier_requests_are() -> None:
    server = TurnTransport([[0.1, *utterance(0)]], trigger="input.done")
    async with session_over(server) as session:
        rid = await session.send("Hi.")
        await session.ping()
        events = await collect(session, Pong)
    assert [type(e).__name__ for e in events][-2:] == ["RequestCompleted", "Pong"]
    assert session.timings[rid].outcome == "complete"


async def test_close_ends_the_events_with_session_closed() -> None:
    server = ScriptedTransport()
    session = session_over(server)
    await session.connect()
    await session.close()
    events = [event async for event in session.events()]
    assert events == [SessionClosed(reason="close")]
    assert server.closed
    assert [m["type"] for m in sent(server)] == ["session.config", "session.close"]


async def test_is_open_follows_the_shared_lifecycle() -> None:
    # `is_open` comes from SessionLifecycle, so LiveKit's session pool can reuse this session too.
    session = session_over(ScriptedTransport())
    assert not session.is_open
    await session.connect()
    assert session.is_open
    await session.close()
    assert not session.is_open
    with pytest.raises(SessionClosedError):
        await session.connect()


def test_the_session_streams_pcm_only() -> None:
    with pytest.raises(ValueError, match="streams PCM"):
        VllmOmniSession(ScriptedTransport, SessionConfig(stream_audio=False, response_format="wav"))


def test_both_sessions_are_speech_sessions() -> None:
    # mypy checks the assignment against the SpeechSession protocol: what every caller relies on.
    sessions: list[SpeechSession] = [BidiSession(ScriptedTransport()), session_over(ScriptedTransport())]
    assert [session.description for session in sessions] == ["scripted transport", "vLLM-Omni speech stream"]
    assert all(session.connect_s is None and session.timings == {} for session in sessions)
