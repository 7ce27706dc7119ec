"""Word timings end to end in the unit tier: the wire codecs, the server session sending `words`
before the audio they cover, the client telling which words were heard at a barge-in, and the
speak stream's `words` events (the tone engine times words like a duration predictor would)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.fakes import MemoryTransport, ToneEngine, started_runtime
from voicestream.speak.run import SpeakOptions, run_bidi
from voicestream.speak.sources import ReplayPace, ReplaySource
from voicestream.speech import Audio, BidiSession, Cancelled, RequestCompleted, Words
from voicestream.wire.bidi import (
    SAMPLE_RATE,
    Synthesize,
    encode_server_message,
    parse_client_message,
    parse_server_message,
)
from voicestream.wire.bidi import Words as WordsMessage
from voicestream.wire.errors import ProtocolError
from voicestream.wire.framing import FrameError
from voicestream.wire.speak import SentenceAudio, SentenceSpoken, SentenceWords, SpeakStreamDecoder, encode_event
from voicestream.wire.words import WordTiming, parse_words, words_heard

BOUND_S = 10.0
HELLO = (WordTiming("Hello", 0.0, 0.5), WordTiming("there", 0.6, 1.0))


def test_words_message_round_trips_and_keeps_its_order() -> None:
    message = WordsMessage("r1", HELLO)
    text = encode_server_message(message)
    assert json.loads(text) == {
        "type": "words",
        "request_id": "r1",
        "words": [{"word": "Hello", "start_s": 0.0, "end_s": 0.5}, {"word": "there", "start_s": 0.6, "end_s": 1.0}],
    }
    assert parse_server_message(text) == message


@pytest.mark.parametrize(
    "words",
    [
        "nope",
        [{"word": "", "start_s": 0, "end_s": 1}],
        [{"word": "a", "start_s": 1, "end_s": 0.5}],
        [{"word": "a", "start_s": -1, "end_s": 0}],
        [{"word": "a", "start_s": "0", "end_s": 1}],
        [["a", 0, 1]],
    ],
)
def test_malformed_word_lists_are_refused(words: object) -> None:
    with pytest.raises(ProtocolError, match="words"):
        parse_words(words)
    with pytest.raises(ProtocolError):
        parse_server_message(json.dumps({"type": "words", "request_id": "r", "words": words}))


def test_synthesize_and_config_carry_the_words_flag() -> None:
    message = parse_client_message('{"type":"synthesize","text":"Hi.","words":true}')
    assert isinstance(message, Synthesize) and message.words is True
    with pytest.raises(ProtocolError, match="words must be true or false"):
        parse_client_message('{"type":"config","words":"yes"}')


def test_words_heard_counts_a_word_once_its_start_was_played() -> None:
    second = (WordTiming("Bye", 0.1, 0.4),)
    requests = [("a", 1.2, list(HELLO)), ("b", None, list(second))]
    assert words_heard(requests, 0.0) == []
    heard = words_heard(requests, 0.7)
    assert [(w.word, w.complete) for w in heard] == [("Hello", True), ("there", False)]
    heard = words_heard(requests, 1.2 + 0.2)  # 0.2 s into the second request
    assert [(w.request_id, w.word, w.complete) for w in heard] == [
        ("a", "Hello", True),
        ("a", "there", True),
        ("b", "Bye", False),
    ]


def test_speak_words_event_survives_both_transports_in_any_chunking() -> None:
    event = SentenceWords(index=2, words=HELLO, offset_s=3.25, t_ms=812.5)
    for transport in ("sse", "binary"):
        data = encode_event(event, transport)
        decoder = SpeakStreamDecoder(transport)
        decoded = [e for i in range(len(data)) for e in decoder.feed(data[i : i + 1])]
        decoder.close()
        assert decoded == [event]
    bad = b'event: words\ndata: {"index":0,"words":[{"word":"x"}],"offset_s":0,"t_ms":1}\n\n'
    with pytest.raises(FrameError, match="words"):
        SpeakStreamDecoder("sse").feed(bad)


async def test_server_sends_words_before_the_audio_they_cover_only_when_asked() -> None:
    engine = ToneEngine(ms_per_char=20, chunk_ms=100, words=True)
    runtime = await started_runtime(engine)
    text = "One two three four five six seven eight."
    async with asyncio.timeout(BOUND_S), BidiSession(MemoryTransport(runtime)) as session:
        plain = await session.send(text)
        timed = await session.send(text, words=True)
        events = []
        async for event in session.events():
            events.append(event)
            if isinstance(event, RequestCompleted) and event.request_id == timed:
                break
    assert not [e for e in events if isinstance(e, Words) and e.request_id == plain]
    mine = [e for e in events if getattr(e, "request_id", None) == timed]
    received = [word for e in mine if isinstance(e, Words) for word in e.words]
    assert received == list(engine.word_timings(text))
    assert session.timings[timed].words == received
    # Each word's audio comes after its words frame: count the audio sent before each frame.
    audio_s = 0.0
    for event in mine:
        if isinstance(event, Audio):
            audio_s += len(event.data) / 2 / SAMPLE_RATE
        elif isinstance(event, Words):
            assert all(word.start_s >= audio_s for word in event.words), (event, audio_s)
    assert len([e for e in mine if isinstance(e, Words)]) > 1  # streamed chunk by chunk, not at the end


async def test_words_are_timed_from_the_start_of_the_request_across_its_sentences() -> None:
    engine = ToneEngine(ms_per_char=10, words=True)
    runtime = await started_runtime(engine)
    first, second = "First sentence here.", "And the second one."
    async with asyncio.timeout(BOUND_S), BidiSession(MemoryTransport(runtime), words=True) as session:
        result = await session.synthesize(f"{first} {second}")
    words = session.timings[result.request_id].words
    offset = engine.samples_for(first) / SAMPLE_RATE  # the server splits sentences; the second starts here
    expected = [*engine.word_timings(first), *(w.shifted(offset) for w in engine.word_timings(second))]
    assert [(w.word, round(w.start_s, 3)) for w in words] == [(w.word, round(w.start_s, 3)) for w in expected]


async def test_after_a_cancel_the_client_tells_which_words_were_heard() -> None:
    engine = ToneEngine(ms_per_char=20, chunk_ms=100, step_delay_s=0.02, words=True)
    runtime = await started_runtime(engine)
    long_text = " ".join(f"word{i}" for i in range(60)) + "."
    async with asyncio.timeout(BOUND_S), BidiSession(MemoryTransport(runtime), words=True) as session:
        short = await session.send("Short one.")
        long = await session.send(long_text)
        async for event in session.events():
            if isinstance(event, Audio) and event.request_id == long and session.timings[long].audio_bytes > 9600:
                await session.cancel()  # barge-in, 0.2 s or more into the second request
            if isinstance(event, Cancelled):
                break
    short_s = session.timings[short].audio_s
    assert short_s is not None
    assert short_s == pytest.approx(engine.samples_for("Short one.") / SAMPLE_RATE)
    received = session.words_received()
    assert [word.word for rid, word in received if rid == short] == ["Short", "one."]
    assert len([1 for rid, _ in received if rid == long]) < 60  # the server stopped timing at the cut
    # The listener played 0.3 s of the second request: words starting before that were heard.
    heard = session.words_heard(short_s + 0.3)
    assert [w.word for w in heard] == ["Short", "one.", *[w.word for w in engine.word_timings(long_text)][:3]]
    assert heard[-1].complete is False and heard[-1].request_id == long


async def test_run_bidi_emits_words_placed_on_the_reply_timeline() -> None:
    engine = ToneEngine(ms_per_char=10, words=True)
    runtime = await started_runtime(engine)
    reply = "Sure, I can help with that. Your table is booked for eight."
    source = ReplaySource(reply, ReplayPace(first_token_s=0.0, tokens_per_s=2000))
    events = []
    async with asyncio.timeout(BOUND_S):
        async for event in run_bidi(source, lambda: BidiSession(MemoryTransport(runtime)), SpeakOptions()):
            events.append(event)
    words = [e for e in events if isinstance(e, SentenceWords)]
    assert {e.index for e in words} == {e.index for e in events if isinstance(e, SentenceSpoken)}
    spoken = {e.index: e.audio_ms for e in events if isinstance(e, SentenceSpoken)}
    for event in words:
        assert event.offset_s == pytest.approx(sum(ms for i, ms in spoken.items() if i < event.index) / 1000)
        first_audio = next(i for i, e in enumerate(events) if isinstance(e, SentenceAudio) and e.index == event.index)
        assert events.index(event) < first_audio or event.words[0].start_s > 0
    timeline = [w.word for e in words for w in e.words]
    assert " ".join(timeline) == reply


async def test_is_open_turns_false_when_the_server_ends_the_session_unread() -> None:
    from tests.support.fakes import ScriptedTransport

    transport = ScriptedTransport(["end"])
    session = BidiSession(transport)
    assert not session.is_open
    await session.connect()
    async with asyncio.timeout(BOUND_S):
        while session.is_open:  # noqa: ASYNC110 - a property to poll: nobody reads events, the reader sees the end
            await asyncio.sleep(0.01)
    await session.close()
    assert not session.is_open
