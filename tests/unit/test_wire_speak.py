"""Speak events through both transports and back, however the bytes are delivered."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.wire.framing import FrameError, FrameKind, TruncatedStreamError, encode_binary_frame
from voicestream.wire.speak import (
    AgentStart,
    Done,
    ReplyError,
    ReplyTimings,
    Sentence,
    SentenceAudio,
    SentenceSpoken,
    SpeakEvent,
    SpeakStreamDecoder,
    TextDelta,
    encode_event,
    event_fields,
    event_from_fields,
)

# Audio that looks like JSON, SSE syntax and frame headers: the transports must not care.
NASTY_AUDIO = b'{"event":"done"}\n\ndata: x\r\n\x01\x00\x00\x00\x02{}'

EVENTS: list[SpeakEvent] = [
    AgentStart(mode="bidi", source="replay", format="pcm", sample_rate=24_000, voice="af_heart"),
    TextDelta(text="Hi", t_ms=300.2),
    TextDelta(text=', dé\n"jà" vu 🎉.', t_ms=320.0),
    Sentence(index=0, text='Hi, dé\n"jà" vu 🎉.', t_ms=320.1),
    SentenceAudio(index=0, data=NASTY_AUDIO, t_ms=700.5),
    SentenceAudio(index=0, data=b"\x00\x01" * 500, t_ms=740.5),
    SentenceSpoken(
        index=0, audio_bytes=1000, audio_ms=20.8, server_first_audio_ms=None, server_synth_ms=9.5, t_ms=750.0
    ),
    SentenceAudio(index=1, data=b"\xff\xfe", t_ms=800.0),
    SentenceSpoken(index=1, audio_bytes=2, audio_ms=0.0, server_first_audio_ms=3.0, server_synth_ms=1.0, t_ms=801.0),
    ReplyError(code="tts_error", message="gone", t_ms=900.0, index=None),
    Done(
        status="error",
        timings=ReplyTimings(300.2, 320.1, 700.5, 900.0),
        sentences=2,
        audio_bytes=1002,
        audio_ms=20.8,
        text="Hi",
        t_ms=900.0,
    ),
]


def expected(event: SpeakEvent, transport: str) -> SpeakEvent:
    if transport == "binary" and isinstance(event, SentenceAudio):
        return SentenceAudio(index=event.index, data=event.data, t_ms=None)  # bare frames carry no clock
    return event


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize("transport", ["sse", "binary"])
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_round_trip_under_any_chunking(transport: str, cuts: list[int]) -> None:
    stream = b"".join(encode_event(event, transport) for event in EVENTS)  # type: ignore[arg-type]
    decoder = SpeakStreamDecoder(transport)  # type: ignore[arg-type]
    decoded = [event for chunk in split(stream, cuts) for event in decoder.feed(chunk)]
    decoder.close()
    assert decoded == [expected(event, transport) for event in EVENTS]


def test_binary_audio_is_raw_and_sse_audio_is_base64() -> None:
    chunk = SentenceAudio(index=0, data=b"\x00\xff" * 4, t_ms=1.0)
    assert encode_event(chunk, "binary") == encode_binary_frame(FrameKind.AUDIO, chunk.data)
    sse = encode_event(chunk, "sse").decode()
    assert sse.startswith("event: audio_chunk\ndata: {") and '"audio":"AP8A/wD/AP8="' in sse and '"bytes":8' in sse


@pytest.mark.parametrize("transport", ["sse", "binary"])
def test_a_truncated_stream_is_an_error(transport: str) -> None:
    stream = b"".join(encode_event(event, transport) for event in EVENTS[:3])  # type: ignore[arg-type]
    decoder = SpeakStreamDecoder(transport)  # type: ignore[arg-type]
    decoder.feed(stream[:-3])
    with pytest.raises(TruncatedStreamError):
        decoder.close()


@pytest.mark.parametrize(
    ("transport", "data"),
    [
        ("sse", b"event: done\ndata: [1]\n\n"),
        ("sse", b'event: audio_chunk\ndata: {"index": 0, "audio": "***"}\n\n'),
        ("sse", b'event: sentence\ndata: {"index": 0}\n\n'),
        ("binary", encode_binary_frame(FrameKind.EVENT, b'{"no_event": 1}')),
        ("binary", b"\x07\x00\x00\x00\x00"),
    ],
)
def test_garbage_is_a_frame_error(transport: str, data: bytes) -> None:
    with pytest.raises(FrameError):
        SpeakStreamDecoder(transport).feed(data)  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["sse", "binary"])
def test_unknown_events_are_skipped(transport: str) -> None:
    """A newer server may add events; an older client keeps working."""
    from voicestream.wire.framing import encode_event_frame, encode_sse

    unknown = encode_sse("mystery", {"x": 1}) if transport == "sse" else encode_event_frame("mystery", {"x": 1})
    decoder = SpeakStreamDecoder(transport)  # type: ignore[arg-type]
    assert decoder.feed(unknown + encode_event(EVENTS[1], transport)) == [EVENTS[1]]  # type: ignore[arg-type]


def test_wire_form_leaves_audio_out() -> None:
    body = event_fields(SentenceAudio(index=3, data=b"abc", t_ms=2.0))
    assert body == {"index": 3, "t_ms": 2.0, "bytes": 3}
    assert event_from_fields("audio_chunk", body, b"abc") == SentenceAudio(index=3, data=b"abc", t_ms=2.0)


def test_unknown_transport() -> None:
    with pytest.raises(ValueError):
        SpeakStreamDecoder("websocket")  # type: ignore[arg-type]
