"""run_bidi / run_batch against the real ServerSession in memory (tone engine), in milliseconds.

What tests/integration checks over HTTP with the real model, here at the level of the event
stream: the order of events, when sentences go out, every failure as one `error` then `done`,
and a caller who stops reading cancels the speech server's work.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.fakes import MemoryTransport, ScriptedTransport, ToneEngine, started_runtime
from voicestream.kokoro_server.runtime import ServerRuntime
from voicestream.speak.run import SpeakOptions, run_batch, run_bidi
from voicestream.speak.sources import ReplayPace, ReplaySource, TextSourceError
from voicestream.speech import BidiSession
from voicestream.wire.bidi import Limits
from voicestream.wire.errors import FAILURE_MESSAGES
from voicestream.wire.speak import (
    AgentStart,
    Done,
    ReplyError,
    Sentence,
    SentenceAudio,
    SentenceSpoken,
    SpeakEvent,
    TextDelta,
)

REPLY = "Sure, I can help with that. Your table is booked for eight. See you tonight!"
FAST = ReplayPace(first_token_s=0.0, tokens_per_s=2000)
BOUND_S = 10.0
ARN = "arn:aws:sts::123456789012:assumed-role/speak-role/fn"


class Sessions:
    """A SessionFactory onto one in-memory server; keeps every transport it made."""

    def __init__(self, runtime: ServerRuntime, **session_options: Any) -> None:
        self.runtime = runtime
        self.options = session_options
        self.transports: list[MemoryTransport] = []

    def __call__(self) -> BidiSession:
        transport = MemoryTransport(self.runtime)
        self.transports.append(transport)
        return BidiSession(transport, **self.options)


async def collect(events: AsyncIterator[SpeakEvent]) -> list[SpeakEvent]:
    async with asyncio.timeout(BOUND_S):
        return [event async for event in events]


async def sessions(engine: ToneEngine | None = None, **options: Any) -> Sessions:
    return Sessions(await started_runtime(engine or ToneEngine()), **options)


async def test_bidi_streams_each_sentence_as_it_is_cut() -> None:
    factory = await sessions()
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), factory, SpeakOptions(first_clause_min_words=None)))
    assert isinstance(events[0], AgentStart) and events[0].mode == "bidi"
    done = events[-1]
    assert isinstance(done, Done) and done.status == "complete"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == REPLY == done.text
    sentences = [e.text for e in events if isinstance(e, Sentence)]
    assert sentences == ["Sure, I can help with that.", "Your table is booked for eight.", "See you tonight!"]
    spoken = [e for e in events if isinstance(e, SentenceSpoken)]
    assert [e.index for e in spoken] == [0, 1, 2]
    audio = [e for e in events if isinstance(e, SentenceAudio)]
    assert sum(len(e.data) for e in audio) == done.audio_bytes == sum(e.audio_bytes for e in spoken)
    assert [e.index for e in audio] == sorted(e.index for e in audio)  # sentences never interleave
    timings = done.timings
    assert timings.first_text_ms is not None and timings.first_sentence_ms is not None
    assert timings.first_audio_ms is not None and timings.first_sentence_ms <= timings.first_audio_ms
    assert factory.transports[0].channel.close_code == 1000  # closed politely after the reply


async def test_the_fast_first_clause_is_cut_before_the_sentence_ends() -> None:
    factory = await sessions()
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), factory, SpeakOptions(first_clause_min_words=1)))
    assert next(e.text for e in events if isinstance(e, Sentence)) == "Sure,"


async def test_batch_speaks_the_whole_reply_as_one_request() -> None:
    engine = ToneEngine()
    factory = await sessions(engine)
    events = await collect(run_batch(ReplaySource(REPLY, FAST), factory))
    assert [e.text for e in events if isinstance(e, Sentence)] == [REPLY]
    first_sentence = next(i for i, e in enumerate(events) if isinstance(e, Sentence))
    assert all(isinstance(e, TextDelta | AgentStart) for e in events[:first_sentence])  # only after all text
    assert isinstance(events[-1], Done) and events[-1].status == "complete"


async def test_wav_has_one_header_for_the_whole_reply() -> None:
    factory = await sessions()
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), factory, SpeakOptions(format="wav")))
    audio = b"".join(e.data for e in events if isinstance(e, SentenceAudio))
    assert audio.startswith(b"RIFF") and audio.count(b"RIFF") == 1


async def test_a_speech_server_that_cannot_be_reached_is_tts_unavailable() -> None:
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), lambda: BidiSession(ScriptedTransport(refuse=True))))
    error, done = events[-2:]
    assert isinstance(error, ReplyError) and error.code == "tts_unavailable"
    assert isinstance(done, Done) and done.status == "error"


async def test_a_silent_speech_server_is_tts_error(caplog: pytest.LogCaptureFixture) -> None:
    def silent() -> BidiSession:
        return BidiSession(ScriptedTransport(), silence_timeout=0.2, close_timeout=0.2)

    events = await collect(run_bidi(ReplaySource(REPLY, FAST), silent))
    error = events[-2]
    assert isinstance(error, ReplyError) and error.code == "tts_error"
    assert error.message == FAILURE_MESSAGES["tts_error"]  # the client gets the code's message...
    assert "no frame" in caplog.text  # ...the log the detail


async def test_a_refused_sentence_is_synthesis_failed_and_names_it() -> None:
    factory = await sessions(ToneEngine(refuse_on="booked"))
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), factory, SpeakOptions(first_clause_min_words=None)))
    error = events[-2]
    assert isinstance(error, ReplyError) and error.code == "synthesis_failed" and error.index == 1


async def test_the_reply_deadline_is_a_timeout() -> None:
    factory = await sessions(ToneEngine(step_delay_s=0.05, ms_per_char=100))
    options = SpeakOptions(max_duration_s=0.3)
    events = await collect(run_bidi(ReplaySource(REPLY, FAST), factory, options))
    error, done = events[-2:]
    assert isinstance(error, ReplyError) and error.code == "timeout"
    assert isinstance(done, Done) and done.timings.total_ms < 2000


async def test_a_failing_text_source_is_its_own_error(caplog: pytest.LogCaptureFixture) -> None:
    """Bedrock's messages name roles and accounts: the client gets the code's fixed message."""

    class Broken:
        name = "broken"

        async def stream(self) -> AsyncIterator[str]:
            yield "Hello, "
            raise TextSourceError("model_error", f"Bedrock: AccessDeniedException: {ARN} may not invoke it")

    events = await collect(run_bidi(Broken(), await sessions()))
    error = events[-2]
    assert isinstance(error, ReplyError) and error.code == "model_error"
    assert error.message == FAILURE_MESSAGES["model_error"] and ARN not in error.message
    assert ARN in caplog.text


async def test_a_caller_who_stops_reading_cancels_the_work_on_the_speech_server() -> None:
    engine = ToneEngine(step_delay_s=0.02, ms_per_char=60)
    factory = await sessions(engine)
    events = run_bidi(ReplaySource(REPLY, FAST), factory)
    async with contextlib.aclosing(events):
        async for event in events:
            if isinstance(event, SentenceAudio):
                break  # the caller hangs up at the first audio
    transport = factory.transports[0]
    assert b'"cancel"' in b"".join(p for p in transport.sent if isinstance(p, bytes))
    assert transport.server_task is not None and transport.server_task.done()
    made = engine.chunks_made
    await asyncio.sleep(0.2)
    assert engine.chunks_made <= made + 1


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_no_coroutine_is_left_unawaited_when_the_caller_leaves_at_once(mode: str) -> None:
    # The caller leaves right after the session opened, before the audio reader's task ran:
    # a coroutine made outside its task would be left never awaited (pytest: warnings are errors).
    factory = await sessions()
    run = run_bidi if mode == "bidi" else run_batch
    for _ in range(6):
        events = run(ReplaySource(REPLY, ReplayPace(first_token_s=0.0, tokens_per_s=5)), factory)
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        gc.collect()


async def test_a_reply_longer_than_the_servers_queue_is_flow_controlled() -> None:
    """The server refuses more than max_queued unfinished requests (queue_full): the reply waits
    for room instead of failing halfway."""
    factory = Sessions(await started_runtime(ToneEngine(), Limits(max_queued=2)))
    reply = " ".join(f"Sentence number {n} is here." for n in range(12))
    options = SpeakOptions(first_clause_min_words=None, max_in_flight=2)
    events = await collect(run_bidi(ReplaySource(reply, FAST), factory, options))
    done = events[-1]
    assert isinstance(done, Done) and done.status == "complete", events[-2:]
    assert len([e for e in events if isinstance(e, SentenceSpoken)]) == 12
