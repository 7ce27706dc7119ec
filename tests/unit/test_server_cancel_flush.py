"""`cancel` of one request or one streamed utterance, and streamed input (`append`, `flush`),
on ServerSession with the tone engine (tests/unit/test_server_session.py has the helpers).

Verdicts rest on the order of frames, never on how long anything took: `HeldToneEngine` holds
every text after its first chunk until the test releases it, so a cancel always lands while the
request it means is in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from tests.support.fakes import ToneEngine
from tests.unit.test_server_session import BOUND_S, converse, requests_of
from voicestream.engine.base import AudioChunk
from voicestream.wire.bidi import Limits

LONG = "A long sentence that takes a while to say."


class HeldToneEngine(ToneEngine):
    """A ToneEngine that, once `hold()` was called (after the server's warm-up), makes each
    text's first chunk and then waits for `release()`."""

    def __init__(self) -> None:
        super().__init__(ms_per_char=50)
        self.gate = threading.Event()
        self.gate.set()

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def _chunks(self, text: str) -> Iterator[AudioChunk]:
        for index, chunk in enumerate(super()._chunks(text)):
            if index > 0:
                self.gate.wait(BOUND_S)
            yield chunk


def started(frames: list[dict[str, Any] | bytes]) -> list[str]:
    return [f["request_id"] for f in frames if isinstance(f, dict) and f["type"] == "synthesis_start"]


async def test_cancel_of_a_queued_request_drops_it_alone() -> None:
    engine = HeldToneEngine()
    talk = await converse(engine)
    engine.hold()
    for index in range(3):
        talk.send({"type": "synthesize", "text": LONG, "request_id": f"r{index}"})
    await talk.until("synthesis_start", "r0")
    talk.send({"type": "cancel", "request_id": "r1"})
    assert await talk.until("cancelled") == {"type": "cancelled", "request_ids": ["r1"], "request_id": "r1"}
    engine.release()
    await talk.until("synthesis_complete", "r2")
    # r0 and r2 whole, in order; r1 never started (whether or not it was synthesized ahead).
    assert requests_of(talk.seen) == [("r0", 2 * engine.samples_for(LONG)), ("r2", 2 * engine.samples_for(LONG))]
    assert "r1" not in started(talk.seen)


async def test_cancel_of_the_request_in_progress_stops_it_and_the_next_ones_play() -> None:
    engine = HeldToneEngine()
    talk = await converse(engine)
    engine.hold()
    for index in range(3):
        talk.send({"type": "synthesize", "text": LONG, "request_id": f"r{index}"})
    await talk.until("synthesis_start", "r0")
    assert isinstance(await talk.next(), bytes)  # r0's first audio: it is being sent
    talk.send({"type": "cancel", "request_id": "r0"})
    cancelled = await talk.until("cancelled")
    assert cancelled["request_ids"] == ["r0"]
    engine.release()
    after_cancel = len(talk.seen)
    await talk.until("synthesis_complete", "r2")
    later = talk.seen[after_cancel:]
    # Nothing of r0 follows its `cancelled`; r1 and r2 come whole.
    assert requests_of(later) == [("r1", 2 * engine.samples_for(LONG)), ("r2", 2 * engine.samples_for(LONG))]
    assert started(talk.seen) == ["r0", "r1", "r2"]


async def test_cancel_of_an_unknown_or_finished_request_drops_nothing() -> None:
    talk = await converse()
    talk.send({"type": "synthesize", "text": "Done soon.", "request_id": "done"})
    await talk.until("synthesis_complete", "done")
    for name in ("done", "never-sent"):
        talk.send({"type": "cancel", "request_id": name})
        assert await talk.until("cancelled") == {"type": "cancelled", "request_ids": [], "request_id": name}
    talk.send({"type": "cancel", "request_id": ""})
    assert (await talk.until("error"))["code"] == "invalid_request_id"
    talk.send({"type": "synthesize", "text": "Still here.", "request_id": "after"})
    await talk.until("synthesis_complete", "after")


async def test_cancel_without_request_id_still_drops_everything() -> None:
    engine = HeldToneEngine()
    talk = await converse(engine)
    engine.hold()
    for index in range(3):
        talk.send({"type": "synthesize", "text": LONG, "request_id": f"r{index}"})
    await talk.until("synthesis_start", "r0")
    talk.send({"type": "cancel"})
    assert await talk.until("cancelled") == {"type": "cancelled", "request_ids": ["r0", "r1", "r2"]}
    engine.release()


async def test_appended_text_is_cut_into_sentences_and_flush_speaks_the_partial_one() -> None:
    talk = await converse()
    for token in ("Hello there", ". How are", " you today? And then", " a partial sent", "ence"):
        talk.send({"type": "append", "text": token, "request_id": "u1"})
    # The two complete sentences are spoken without a flush.
    await talk.until("synthesis_complete", "u1.2")
    assert talk.engine.texts == ["Hello there.", "How are you today?"]
    talk.send({"type": "flush"})
    flushed = await talk.until("flushed")
    assert flushed == {"type": "flushed", "request_ids": ["u1.1", "u1.2", "u1.3"], "request_id": "u1"}
    await talk.until("synthesis_complete", "u1.3")
    assert talk.engine.texts[-1] == "And then a partial sentence"
    assert [rid for rid, _ in requests_of(talk.seen)] == ["u1.1", "u1.2", "u1.3"]
    # A flush with nothing open is acknowledged too; the next append opens a new utterance.
    talk.send({"type": "flush"})
    assert await talk.until("flushed") == {"type": "flushed", "request_ids": []}
    talk.send({"type": "append", "text": "Next one"})
    talk.send({"type": "flush"})
    flushed = await talk.until("flushed")
    (piece,) = flushed["request_ids"]
    assert piece == f"{flushed['request_id']}.1"
    await talk.until("synthesis_complete", piece)


async def test_streamed_pieces_use_the_sessions_config() -> None:
    talk = await converse()
    talk.send({"type": "config", "voice": "am_michael", "format": "wav"})
    talk.send({"type": "append", "text": "Configured once.", "request_id": "u"})
    talk.send({"type": "flush"})
    start = await talk.until("synthesis_start", "u.1")
    assert (start["voice"], start["format"]) == ("am_michael", "wav")


async def test_cancel_of_a_streamed_utterance_drops_its_pieces_and_its_partial_text() -> None:
    engine = HeldToneEngine()
    talk = await converse(engine)
    engine.hold()
    talk.send({"type": "synthesize", "text": LONG, "request_id": "before"})
    talk.send({"type": "append", "text": "One sentence here. Another sentence there. And a part", "request_id": "u"})
    await talk.until("synthesis_start", "before")
    talk.send({"type": "cancel", "request_id": "u"})
    cancelled = await talk.until("cancelled")
    assert cancelled["request_ids"] == ["u.1", "u.2"]
    engine.release()
    # The partial text went with it: a flush now has nothing to end.
    talk.send({"type": "flush"})
    assert await talk.until("flushed") == {"type": "flushed", "request_ids": []}
    talk.send({"type": "synthesize", "text": "After.", "request_id": "after"})
    await talk.until("synthesis_complete", "after")
    assert [rid for rid, _ in requests_of(talk.seen)] == ["before", "after"]
    assert "And a part" not in " ".join(engine.texts)


async def test_bad_streamed_input_is_a_coded_error() -> None:
    talk = await converse(limits=Limits(max_text_chars=50))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "append"}, "missing_text"),
        ({"type": "append", "text": 5}, "missing_text"),
        ({"type": "append", "text": "x" * 51}, "text_too_long"),
    ]
    for body, code in cases:
        talk.send(body)
        assert (await talk.until("error"))["code"] == code
    talk.send({"type": "append", "text": "Open ", "request_id": "a"})
    talk.send({"type": "append", "text": "other", "request_id": "b"})
    error = await talk.until("error")
    assert error["code"] == "invalid_request" and "request_id" not in error
    talk.send({"type": "append", "text": " ", "request_id": "a"})  # a lone space is a fine token
    talk.send({"type": "flush"})
    assert (await talk.until("flushed"))["request_ids"] == ["a.1"]


async def test_close_flushes_the_streamed_utterance() -> None:
    talk = await converse()
    talk.send({"type": "append", "text": "Unfinished words", "request_id": "u"})
    talk.send({"type": "close"})
    assert (await talk.until("flushed"))["request_ids"] == ["u.1"]
    await talk.until("synthesis_complete", "u.1")
    await talk.until("session_closed")


async def test_an_id_cancelled_while_synthesized_ahead_may_be_used_again_at_once() -> None:
    engine = HeldToneEngine()
    talk = await converse(engine)
    engine.hold()
    talk.send({"type": "synthesize", "text": LONG, "request_id": "r0"})
    talk.send({"type": "synthesize", "text": "Old text.", "request_id": "again"})
    await talk.until("synthesis_start", "r0")
    talk.send({"type": "cancel", "request_id": "again"})
    talk.send({"type": "synthesize", "text": "The new text, a little longer.", "request_id": "again"})
    assert (await talk.until("cancelled"))["request_ids"] == ["again"]
    engine.release()
    await talk.until("synthesis_complete", "again")
    # The new request's audio, not the cancelled one's.
    expected = 2 * engine.samples_for("The new text, a little longer.")
    assert requests_of(talk.seen) == [("r0", 2 * engine.samples_for(LONG)), ("again", expected)]
