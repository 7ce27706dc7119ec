"""ServerSession, the server side of the bidi contract, over an in-memory channel with a tone engine.

Millisecond-scale versions of what tests/integration checks with the real model on real sockets:
the frame order, pipelining, every bad input as a coded error that leaves the session usable,
cancel, limits, and how the session ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.fakes import MemoryChannel, ToneEngine, started_runtime
from voicestream.kokoro_server.logs import RepeatLimiter
from voicestream.kokoro_server.runtime import PRODUCTION, Policy, ServerRuntime
from voicestream.kokoro_server.session import EndReason, ServerSession
from voicestream.wire.bidi import Limits
from voicestream.wire.errors import FAILURE_MESSAGES
from voicestream.wire.framing import parse_control_frame

BOUND_S = 10.0


@dataclass
class Conversation:
    """A running ServerSession and the client's end of its channel."""

    runtime: ServerRuntime
    engine: ToneEngine
    channel: MemoryChannel
    task: asyncio.Task[EndReason]
    seen: list[dict[str, Any] | bytes] = field(default_factory=list)

    def send(self, body: dict[str, Any] | str | bytes, binary: bool = True) -> None:
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str) and binary:
            body = body.encode()
        self.channel.client_sends(body)

    async def next(self) -> dict[str, Any] | bytes:
        item = await asyncio.wait_for(self.channel.from_server.get(), BOUND_S)
        assert not isinstance(item, int), f"the session closed with code {item}"
        control = parse_control_frame(item)
        if control is None:
            assert isinstance(item, bytes), f"a text frame that is not a control message: {item!r}"
            self.seen.append(item)
            return item
        self.seen.append(control)
        return control

    async def until(self, kind: str, request_id: str | None = None) -> dict[str, Any]:
        while True:
            frame = await self.next()
            if isinstance(frame, dict) and frame["type"] == kind and request_id in (None, frame.get("request_id")):
                return frame

    async def closed(self) -> tuple[EndReason, int | None]:
        reason = await asyncio.wait_for(self.task, BOUND_S)
        return reason, self.channel.close_code


async def converse(
    engine: ToneEngine | None = None, limits: Limits | None = None, policy: Policy = PRODUCTION
) -> Conversation:
    engine = engine or ToneEngine()
    runtime = await started_runtime(engine, limits, policy=policy)
    channel = MemoryChannel()
    task = asyncio.create_task(ServerSession(runtime, channel).run())
    return Conversation(runtime, engine, channel, task)


def requests_of(frames: list[dict[str, Any] | bytes]) -> list[tuple[str, int]]:
    """(request id, audio bytes) per request, checking start/audio/complete never interleave."""
    done: list[tuple[str, int]] = []
    current: str | None = None
    audio = 0
    for frame in frames:
        if isinstance(frame, bytes):
            assert current is not None, "audio outside a request"
            audio += len(frame)
        elif frame["type"] == "synthesis_start":
            assert current is None, f"{frame['request_id']} started inside {current}"
            current, audio = frame["request_id"], 0
        elif frame["type"] == "synthesis_complete":
            assert current is not None and frame["request_id"] == current and frame["audio_bytes"] == audio
            done.append((current, audio))
            current = None
    return done


async def test_pipelined_requests_come_back_whole_and_in_order() -> None:
    talk = await converse()
    for index, text in enumerate(("First one.", "A second, longer sentence.", "Third.")):
        talk.send({"type": "synthesize", "text": text, "request_id": f"r{index}"}, binary=index != 1)
    await talk.until("synthesis_complete", "r2")
    spoken = requests_of(talk.seen)
    assert [rid for rid, _ in spoken] == ["r0", "r1", "r2"]
    # 16-bit PCM: two bytes per sample of the tone the engine made for each text.
    assert [audio for _, audio in spoken] == [2 * talk.engine.samples_for(t) for t in talk.engine.texts]
    talk.send({"type": "close"})
    assert await talk.closed() == (EndReason.CLOSE, 1000)


@pytest.mark.parametrize(
    ("policy", "synthesized"),
    [
        (Policy(), ["First one.", "Then a second."]),
        # The anchor-style baseline the benchmarks build: one synthesis per request.
        (Policy(split_requests=False), ["First one. Then a second."]),
    ],
)
async def test_the_servers_policy_decides_whether_a_request_is_split_into_sentences(
    policy: Policy, synthesized: list[str]
) -> None:
    talk = await converse(policy=policy)
    talk.send({"type": "synthesize", "text": "First one. Then a second.", "request_id": "r0"})
    await talk.until("synthesis_complete", "r0")
    assert talk.engine.texts == synthesized
    talk.send({"type": "close"})
    assert await talk.closed() == (EndReason.CLOSE, 1000)


async def test_the_seed_clients_bare_text_message_is_a_synthesize() -> None:
    talk = await converse()
    talk.send({"text": "Hello there."})
    start = await talk.until("synthesis_start")
    assert start["format"] == "pcm" and start["sample_rate"] == 24_000 and start["voice"] == "af_heart"
    await talk.until("synthesis_complete")


BAD_INPUT: list[tuple[dict[str, Any] | str | bytes, str]] = [
    ("{nope", "invalid_json"),
    ("[1, 2]", "not_an_object"),
    ({"type": "dance"}, "unknown_type"),
    ({"type": "synthesize"}, "missing_text"),
    ({"type": "synthesize", "text": "   "}, "empty_text"),
    ({"type": "synthesize", "text": "Hi.", "voice": "nobody"}, "unknown_voice"),
    ({"type": "synthesize", "text": "Hi.", "speed": 9}, "invalid_speed"),
    ('{"type":"synthesize","text":"Hi.","speed":1' + "0" * 400 + "}", "invalid_speed"),
    ({"type": "config", "speed": 10**400}, "invalid_speed"),
    ({"type": "synthesize", "text": "Hi.", "format": "ogg"}, "invalid_format"),
    ({"type": "synthesize", "text": "Hi.", "request_id": ""}, "invalid_request_id"),
    ({"type": "synthesize", "text": "x" * 2001}, "text_too_long"),
]


@pytest.mark.parametrize(
    ("payload", "code", "binary"),
    [(payload, code, binary) for payload, code in BAD_INPUT for binary in (True, False)]
    + [(b"\xff\xfe", "invalid_utf8", True)],  # invalid UTF-8 can only travel in a binary frame
)
async def test_bad_input_is_one_coded_error_and_the_session_goes_on(
    payload: dict[str, Any] | str | bytes, code: str, binary: bool
) -> None:
    talk = await converse()
    talk.send(payload, binary=binary)
    error = await talk.until("error")
    assert error["code"] == code and error["message"]
    talk.send({"type": "ping"})
    assert await talk.until("pong") == {"type": "pong", "engine": "tone", "device": "cpu"}
    talk.send({"type": "synthesize", "text": "Still here.", "request_id": "after"})
    await talk.until("synthesis_complete", "after")


async def test_cancel_drops_queued_requests_and_stops_the_one_in_progress() -> None:
    engine = ToneEngine(ms_per_char=50, step_delay_s=0.02)
    talk = await converse(engine)
    for index in range(3):
        talk.send(
            {"type": "synthesize", "text": "A long sentence that takes a while to say.", "request_id": f"r{index}"}
        )
    assert isinstance(await talk.next(), dict)  # synthesis_start of r0
    await talk.next()  # and its first audio
    talk.send({"type": "cancel"})
    cancelled = await talk.until("cancelled")
    assert cancelled["request_ids"] == ["r0", "r1", "r2"]
    made = engine.chunks_made
    await asyncio.sleep(0.2)
    assert engine.chunks_made <= made + 1  # at most the step in flight finishes
    talk.send({"type": "synthesize", "text": "After the barge-in.", "request_id": "next"})
    await talk.until("synthesis_complete", "next")


async def test_a_request_is_told_how_much_of_the_sessions_audio_is_still_playing() -> None:
    """The tone engine makes seconds of audio in milliseconds, so a listener playing it as it
    comes is still hearing the first request when the second starts; after a cancel, nothing."""
    engine = ToneEngine(ms_per_char=100)  # "Twenty characters!!." = 2 s
    talk = await converse(engine)
    talk.send({"type": "synthesize", "text": "Twenty characters!!.", "request_id": "r0"})
    talk.send({"type": "synthesize", "text": "Then another one.", "request_id": "r1"})
    await talk.until("synthesis_complete", "r1")
    assert engine.aheads[0] == 0.0
    assert 1.5 < engine.aheads[1] <= 2.0
    talk.send({"type": "cancel"})
    await talk.until("cancelled")
    talk.send({"type": "synthesize", "text": "After the barge-in.", "request_id": "r2"})
    await talk.until("synthesis_complete", "r2")
    assert engine.aheads[2] == 0.0


async def test_a_sentence_whose_listener_ran_dry_while_its_text_waited_is_synthesized_as_behind() -> None:
    """An engine slower than real time (each 20 ms chunk takes 60 ms) leaves the listener without
    audio while the request's next sentences wait: those are synthesized `behind`. A text that
    comes after the audio ran out is not: the silence was the text's lateness."""
    slow = ToneEngine(ms_per_char=2, chunk_ms=20, step_delay_s=0.06)
    talk = await converse(slow)
    talk.send({"type": "synthesize", "text": "One two three four. Five six seven. Eight nine ten.", "request_id": "r0"})
    await talk.until("synthesis_complete", "r0")
    assert slow.behinds == [False, True, True]
    fast = ToneEngine(ms_per_char=10)
    talk = await converse(fast)
    talk.send({"type": "synthesize", "text": "One two three four. Five six seven.", "request_id": "r0"})
    await talk.until("synthesis_complete", "r0")
    await asyncio.sleep(0.6)  # r0's 350 ms of audio have played
    talk.send({"type": "synthesize", "text": "Then another one.", "request_id": "r1"})
    await talk.until("synthesis_complete", "r1")
    assert fast.behinds == [False, False, False]


async def test_an_engine_refusal_ends_only_its_request() -> None:
    talk = await converse(ToneEngine(refuse_on="forbidden"))
    talk.send({"type": "synthesize", "text": "A forbidden word.", "request_id": "bad"})
    talk.send({"type": "synthesize", "text": "A fine one.", "request_id": "good"})
    error = await talk.until("error", "bad")
    assert error["code"] == "invalid_request"
    await talk.until("synthesis_complete", "good")


async def test_an_engine_fault_mid_stream_is_synthesis_failed_for_that_request() -> None:
    talk = await converse(ToneEngine(fail_on="explode", ms_per_char=50))
    talk.send({"type": "synthesize", "text": "This will explode halfway.", "request_id": "boom"})
    talk.send({"type": "synthesize", "text": "Then this.", "request_id": "ok"})
    error = await talk.until("error", "boom")
    assert error["code"] == "synthesis_failed"
    assert error["message"] == FAILURE_MESSAGES["synthesis_failed"]  # not the exception's text
    await talk.until("synthesis_complete", "ok")


async def test_queue_limit_and_duplicate_ids_are_refused() -> None:
    talk = await converse(ToneEngine(step_delay_s=0.05), Limits(max_queued=2))
    talk.send({"type": "synthesize", "text": "One.", "request_id": "a"})
    talk.send({"type": "synthesize", "text": "One.", "request_id": "a"})
    duplicate = await talk.until("error")
    assert duplicate["code"] == "duplicate_request_id" and "request_id" not in duplicate
    talk.send({"type": "synthesize", "text": "Two.", "request_id": "b"})
    talk.send({"type": "synthesize", "text": "Three.", "request_id": "c"})
    full = await talk.until("error")
    assert full["code"] == "queue_full" and full["request_id"] == "c"


async def test_config_sets_the_defaults_of_later_requests() -> None:
    talk = await converse()
    talk.send({"type": "config", "voice": "am_michael", "format": "wav", "speed": 1.5})
    talk.send({"type": "synthesize", "text": "Configured."})
    start = await talk.until("synthesis_start")
    assert (start["voice"], start["format"]) == ("am_michael", "wav")
    first_audio = await talk.next()
    assert isinstance(first_audio, bytes) and first_audio.startswith(b"RIFF")


async def test_normalize_is_per_request_and_per_session_and_on_by_default() -> None:
    talk = await converse()
    talk.send({"type": "synthesize", "text": "Default.", "request_id": "a"})
    talk.send({"type": "synthesize", "text": "Off.", "request_id": "b", "normalize": False})
    talk.send({"type": "config", "normalize": False})
    talk.send({"type": "synthesize", "text": "Session off.", "request_id": "c"})
    talk.send({"type": "synthesize", "text": "Back on.", "request_id": "d", "normalize": True})
    await talk.until("synthesis_complete", "d")
    assert [options.normalize for options in talk.engine.text_options] == [True, False, False, True]
    talk.send({"type": "close"})
    assert await talk.closed() == (EndReason.CLOSE, 1000)


async def test_close_waits_for_unfinished_requests_then_ends_with_1000() -> None:
    talk = await converse(ToneEngine(step_delay_s=0.01))
    talk.send({"type": "synthesize", "text": "Finish me first.", "request_id": "last"})
    talk.send({"type": "close"})
    talk.send({"type": "synthesize", "text": "Too late."})
    refused = await talk.until("error")
    assert refused["code"] == "invalid_request" and "closing" in refused["message"]
    await talk.until("synthesis_complete", "last")
    assert await talk.until("session_closed") == {"type": "session_closed", "reason": "close"}
    assert await talk.closed() == (EndReason.CLOSE, 1000)


async def test_idle_timeout_closes_with_a_policy_code() -> None:
    talk = await converse(limits=Limits(idle_timeout_s=0.2))
    error = await talk.until("error")
    assert error["code"] == "idle_timeout"
    assert (await talk.until("session_closed"))["reason"] == "idle_timeout"
    assert await talk.closed() == (EndReason.IDLE_TIMEOUT, 1008)


async def test_a_disconnect_stops_the_work_and_sends_nothing_more() -> None:
    engine = ToneEngine(ms_per_char=50, step_delay_s=0.02)
    talk = await converse(engine)
    talk.send({"type": "synthesize", "text": "A long sentence that nobody will hear the end of."})
    await talk.until("synthesis_start")
    talk.channel.client_disconnects()
    assert await talk.closed() == (EndReason.DISCONNECT, None)
    made = engine.chunks_made
    await asyncio.sleep(0.2)
    assert engine.chunks_made <= made + 1


async def test_a_client_flooding_bad_messages_does_not_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """Each bad message is answered, but only the first ten and then every hundredth are logged,
    the logged one saying how many were left out."""
    talk = await converse()
    with caplog.at_level(logging.WARNING, logger="voicestream"):
        for _ in range(510):
            talk.send("not json")
        for _ in range(510):
            assert (await talk.until("error"))["code"] == "invalid_json"
    logged = [record for record in caplog.records if record.getMessage() == "bad_input"]
    assert len(logged) == 10 + 5
    assert [getattr(record, "fields", {}).get("suppressed") for record in logged[10:]] == [99] * 5


def test_the_repeat_limiter_counts() -> None:
    limiter = RepeatLimiter(first=2, every=3)
    assert [limiter.next() for _ in range(9)] == [0, 0, None, None, 2, None, None, 2, None]
    with pytest.raises(ValueError):
        RepeatLimiter(every=0)
