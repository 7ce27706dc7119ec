"""Control frame vs audio, audio-frame safety, SSE and binary frame codecs."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.wire.framing import (
    BinaryFrame,
    BinaryFrameDecoder,
    FrameError,
    FrameKind,
    SSEDecoder,
    SSEEvent,
    TruncatedStreamError,
    audio_frame_is_safe,
    encode_binary_frame,
    encode_event_frame,
    encode_sse,
    make_audio_frames_safe,
    parse_control_frame,
)

T = TypeVar("T")


def decode_in_pieces(feed: Callable[[bytes], list[T]], close: Callable[[], None], pieces: Sequence[bytes]) -> list[T]:
    out = [item for piece in pieces for item in feed(piece)]
    close()
    return out


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# -- the control-frame rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"type":"ping"}', {"type": "ping"}),
        ('{"type": "cancel"}', {"type": "cancel"}),
        (b' \r\n{"a": [1, {"b": null}]}\t\n', {"a": [1, {"b": None}]}),
        ('{"text": "héllo ☃"}'.encode(), {"text": "héllo ☃"}),
    ],
)
def test_whole_payload_json_object_is_control(payload: bytes | str, expected: dict[str, Any]) -> None:
    assert parse_control_frame(payload) == expected


@pytest.mark.parametrize(
    "payload",
    [
        b"[1, 2]",  # a JSON array
        b"42",
        b'"text"',
        b"null",
        b"",
        b"{\x00\x01\x7f",  # PCM that starts with "{"
        b'{"a":1}{"b":2}',  # two objects are not one
        b'{"a":1} x',
        b'{"a":"\xff"}',  # invalid UTF-8
        b'\xef\xbb\xbf{"a":1}',  # a BOM is not JSON
        b'{"a": NaN}',  # not RFC 8259 JSON
        b'{"a": Infinity}',
        b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}",  # nesting too deep to parse
        b"\x7b\x7d\x00\x00",  # "{}" followed by silence
    ],
)
def test_everything_else_is_audio(payload: bytes) -> None:
    assert parse_control_frame(payload) is None


# -- audio frames that can never read as control -----------------------------------------------------


def test_ordinary_pcm_is_sent_unchanged() -> None:
    pcm = bytes(range(256)) * 4
    assert make_audio_frames_safe(pcm) == [pcm]
    assert audio_frame_is_safe(pcm)
    assert make_audio_frames_safe(b"") == []  # no bytes, no frame


@pytest.mark.parametrize(
    "payload",
    [
        b'{"a": 1}',  # 8 bytes: the closing brace is at an odd offset
        b'{"a":1} ',  # closing brace at an even offset, trailing whitespace
        b'{"a": 12}  ',  # odd length would be invalid PCM; 11 + 1 below
        b' {"ab": [1, 2, {"c": "d"}]}',
        b'\xef\xbb\xbf{"a":1}',  # a browser's TextDecoder drops the BOM
        b'{"a":"\xff\xfe"}',  # a lenient decoder replaces invalid UTF-8 inside the string
        b'{"a": NaN}',  # Python's json and others accept NaN
        b'{"a": "\x01\x02"}',  # raw control characters in a string: some parsers accept them
    ],
)
def test_pcm_that_parses_as_an_object_is_split_losslessly(payload: bytes) -> None:
    payload = payload if len(payload) % 2 == 0 else payload + b" "
    assert not audio_frame_is_safe(payload)
    frames = make_audio_frames_safe(payload)
    assert len(frames) == 2
    assert b"".join(frames) == payload
    for frame in frames:
        assert frame and len(frame) % 2 == 0
        assert audio_frame_is_safe(frame)
        assert parse_control_frame(frame) is None


@pytest.mark.parametrize("payload", [b"{}", b"{}  ", b"  {}", b"\n\n{}\t\t", b"\xef\xbb\xbf {}"])
def test_empty_object_family_is_nudged_by_one_least_significant_bit(payload: bytes) -> None:
    # No even offset splits "{}" without one half holding "{}" again.
    [frame] = make_audio_frames_safe(payload)
    assert len(frame) == len(payload) and audio_frame_is_safe(frame)
    changed = [i for i, (a, b) in enumerate(zip(payload, frame, strict=True)) if a != b]
    assert len(changed) == 1
    i = changed[0]
    assert i % 2 == 0 and payload[i] - frame[i] == 1  # the low byte of one little-endian sample


def test_object_too_deep_to_parse_is_still_split_losslessly() -> None:
    payload = b'{"ab":' + b"[" * 50_000 + b"]" * 50_000 + b"} "
    assert not audio_frame_is_safe(payload)  # cannot prove it safe, so it is not
    frames = make_audio_frames_safe(payload)
    assert b"".join(frames) == payload and len(frames) == 2
    assert all(len(f) % 2 == 0 and parse_control_frame(f) is None for f in frames)
    assert frames[1] == b"} "  # the first frame lacks the closing brace, the second is no object


def test_byte_formats_are_always_split_without_change() -> None:
    for payload in (b"{}", b' {"a":1}', b'{"a":{}}'):
        frames = make_audio_frames_safe(payload, sample_width=1)
        assert b"".join(frames) == payload and len(frames) == 2
        assert all(audio_frame_is_safe(f) for f in frames)


def test_audio_frame_helpers_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="whole 2-byte samples"):
        make_audio_frames_safe(b"abc")
    with pytest.raises(ValueError, match="sample_width"):
        make_audio_frames_safe(b"abcd", sample_width=4)


def _check_safe_frames(payload: bytes, sample_width: int) -> None:
    frames = make_audio_frames_safe(payload, sample_width=sample_width)
    assert bool(frames) == bool(payload)
    joined = b"".join(frames)
    assert len(joined) == len(payload)
    if joined != payload:  # only the "{}" family may change, by one byte
        assert sample_width == 2 and len(frames) == 1
        assert sum(a != b for a, b in zip(payload, joined, strict=True)) == 1
    for frame in frames:
        assert frame and len(frame) % sample_width == 0
        assert audio_frame_is_safe(frame) and parse_control_frame(frame) is None


def test_every_short_payload_over_a_json_alphabet_becomes_safe() -> None:
    alphabet = b'{} "a:1,['
    for length in (2, 4, 6):
        for combo in itertools.product(alphabet, repeat=length):
            _check_safe_frames(bytes(combo), 2)
    for length in (1, 2, 3, 5):
        for combo in itertools.product(alphabet, repeat=length):
            _check_safe_frames(bytes(combo), 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), json_values, max_size=4),
    st.sampled_from([None, (",", ":"), (", ", ": ")]),
    st.text(alphabet=" \t\r\n", max_size=3),
    st.text(alphabet=" \t\r\n", max_size=3),
    st.sampled_from([1, 2]),
)
def test_any_json_object_as_pcm_becomes_safe_frames(
    obj: dict[str, Any], separators: tuple[str, str] | None, lead: str, trail: str, width: int
) -> None:
    payload = (lead + json.dumps(obj, separators=separators, ensure_ascii=False) + trail).encode()
    if len(payload) % width:
        payload += b" "
    assert parse_control_frame(payload) == obj
    _check_safe_frames(payload, width)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64).map(lambda b: b[: len(b) - len(b) % 2]))
def test_any_pcm_becomes_safe_frames(payload: bytes) -> None:
    _check_safe_frames(payload, 2)


# -- SSE --------------------------------------------------------------------------------------------


def test_encode_sse_is_one_compact_data_line() -> None:
    assert encode_sse("audio_chunk", {"seq": 1, "text": "é\nx"}) == (
        b'event: audio_chunk\ndata: {"seq":1,"text":"\xc3\xa9\\nx"}\n\n'
    )


def test_encode_sse_rejects_what_it_cannot_represent() -> None:
    with pytest.raises(ValueError, match="single-line"):
        encode_sse("a\nb", {})
    with pytest.raises(ValueError, match="single-line"):
        encode_sse("", {})
    with pytest.raises(ValueError):
        encode_sse("x", {"v": float("nan")})


STREAM = (
    b"\xef\xbb\xbf: a comment first\n"
    + encode_sse("audio_stream_start", {"format": "pcm", "sample_rate": 24000})
    + b"event: audio_chunk\r\ndata: line one\r\ndata:line two \xe2\x98\x83\r\n\r\n"
    + b"id: 7\rretry: 100\runknown: x\rdata\r\r"
    + b"event: no_data_so_not_dispatched\n\n"
    + encode_sse("audio_stream_end", {"text": "日本語 ☃"})
)
EXPECTED = [
    SSEEvent("audio_stream_start", '{"format":"pcm","sample_rate":24000}'),
    SSEEvent("audio_chunk", "line one\nline two ☃"),
    SSEEvent("message", "", id="7"),
    SSEEvent("audio_stream_end", '{"text":"日本語 ☃"}', id="7"),
]


def test_sse_decoder_reads_a_whole_stream() -> None:
    decoder = SSEDecoder()
    assert decode_in_pieces(decoder.feed, decoder.close, [STREAM]) == EXPECTED
    assert EXPECTED[-1].json() == {"text": "日本語 ☃"}


def test_sse_decoder_reassembles_across_a_split_at_every_byte() -> None:
    for cut in range(len(STREAM) + 1):
        decoder = SSEDecoder()
        assert decode_in_pieces(decoder.feed, decoder.close, split_at(STREAM, [cut])) == EXPECTED, cut


def test_sse_decoder_reassembles_one_byte_at_a_time() -> None:
    decoder = SSEDecoder()
    pieces = [STREAM[i : i + 1] for i in range(len(STREAM))]
    assert decode_in_pieces(decoder.feed, decoder.close, pieces) == EXPECTED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=20))
def test_sse_decoder_reassembles_across_any_splits(cuts: list[int]) -> None:
    decoder = SSEDecoder()
    assert decode_in_pieces(decoder.feed, decoder.close, split_at(STREAM, cuts)) == EXPECTED


def test_encode_sse_escapes_unicode_line_breaks_for_naive_line_splitters() -> None:
    encoded = encode_sse("x", {"t": "a\x85b\u2028c\u2029d"})
    assert encoded.decode().splitlines() == ["event: x", 'data: {"t":"a\\u0085b\\u2028c\\u2029d"}', ""]
    [event] = SSEDecoder().feed(encoded)
    assert event.json() == {"t": "a\x85b\u2028c\u2029d"}


sse_events = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=8).filter(lambda name: name.splitlines() == [name]),
        st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(sse_events, st.data())
def test_any_encoded_events_decode_to_themselves_across_any_splits(
    events: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    stream = b"".join(encode_sse(name, body) for name, body in events)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    decoder = SSEDecoder()
    decoded = decode_in_pieces(decoder.feed, decoder.close, split_at(stream, cuts))
    assert [(e.event, e.json()) for e in decoded] == events


def test_sse_cr_at_a_chunk_end_then_lf_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert decoder.feed(b"\n") == []  # the \n completes "\r\n": not a blank line
    assert decoder.feed(b"\r\n") == [SSEEvent("message", "x")]
    decoder.close()


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (b'event: audio_chunk\ndata: {"seq"', "inside a line"),
        (b"event: audio_chunk\ndata: {}\n", "blank line"),
        (b"data: \xe2\x98", "UTF-8"),
    ],
)
def test_sse_close_raises_for_a_truncated_last_event(tail: bytes, message: str) -> None:
    decoder = SSEDecoder()
    assert decoder.feed(encode_sse("a", {}) + tail) == [SSEEvent("a", "{}")]
    with pytest.raises(TruncatedStreamError, match=message):
        decoder.close()


def test_sse_close_accepts_a_stream_ending_in_a_comment_or_blank_line() -> None:
    decoder = SSEDecoder()
    decoder.feed(encode_sse("a", {}) + b": keepalive\n\n\n")
    decoder.close()


def test_sse_invalid_utf8_is_a_clear_error() -> None:
    with pytest.raises(FrameError, match="UTF-8"):
        SSEDecoder().feed(b"data: \xff\n\n")


def test_sse_event_over_the_limit_is_a_clear_error() -> None:
    decoder = SSEDecoder(max_event_chars=100)
    assert decoder.feed(b"data: " + b"x" * 50 + b"\n\n") != []
    with pytest.raises(FrameError, match="limit of 100"):
        for _ in range(10):
            decoder.feed(b"data: " + b"x" * 20 + b"\n")  # many lines, no dispatch


def test_sse_event_json_error_names_the_event() -> None:
    with pytest.raises(FrameError, match="'audio_chunk' data is not JSON"):
        SSEEvent("audio_chunk", "not json").json()


# -- binary frames ------------------------------------------------------------------------------------


def test_binary_frame_layout() -> None:
    assert encode_binary_frame(FrameKind.AUDIO, b"abc") == b"\x02\x00\x00\x00\x03abc"
    assert encode_binary_frame(1, b"{}") == b"\x01\x00\x00\x00\x02{}"
    assert encode_event_frame("done", {"total_ms": 12.5}) == (b'\x01\x00\x00\x00\x20{"event":"done","total_ms":12.5}')


def test_binary_frame_encoder_rejects_bad_frames() -> None:
    with pytest.raises(FrameError, match="unknown binary frame kind 0x07"):
        encode_binary_frame(7, b"")
    with pytest.raises(ValueError, match="exceeds the limit of 4"):
        encode_binary_frame(FrameKind.AUDIO, b"12345", max_frame_bytes=4)
    with pytest.raises(ValueError, match="'event' key"):
        encode_event_frame("done", {"event": "x"})


FRAMES = [
    BinaryFrame(FrameKind.EVENT, b'{"event":"agent_start","t":0}'),
    BinaryFrame(FrameKind.AUDIO, b""),
    BinaryFrame(FrameKind.AUDIO, b'{"looks":"like json"}'),  # the kind byte decides, not the bytes
    BinaryFrame(FrameKind.AUDIO, bytes(range(256)) * 3),
    BinaryFrame(FrameKind.EVENT, '{"event":"sentence","text":"日本語"}'.encode()),
]
BINARY_STREAM = b"".join(encode_binary_frame(f.kind, f.payload) for f in FRAMES)


def test_binary_decoder_reassembles_across_a_split_at_every_byte() -> None:
    for cut in range(len(BINARY_STREAM) + 1):
        decoder = BinaryFrameDecoder()
        assert decode_in_pieces(decoder.feed, decoder.close, split_at(BINARY_STREAM, [cut])) == FRAMES, cut


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(BINARY_STREAM)), max_size=30))
def test_binary_decoder_reassembles_across_any_splits(cuts: list[int]) -> None:
    decoder = BinaryFrameDecoder()
    assert decode_in_pieces(decoder.feed, decoder.close, split_at(BINARY_STREAM, cuts)) == FRAMES


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.data())
def test_binary_frames_round_trip_any_audio(payloads: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(encode_binary_frame(FrameKind.AUDIO, p) for p in payloads)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    decoder = BinaryFrameDecoder()
    frames = decode_in_pieces(decoder.feed, decoder.close, split_at(stream, cuts))
    assert [f.payload for f in frames] == payloads


def test_binary_event_frame_json() -> None:
    [frame] = BinaryFrameDecoder().feed(encode_event_frame("sentence", {"text": "Hi."}))
    assert frame.json() == {"event": "sentence", "text": "Hi."}
    with pytest.raises(FrameError, match="AUDIO frame carries no JSON"):
        BinaryFrame(FrameKind.AUDIO, b"{}").json()


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (b"\x09\x00\x00\x00\x00", "unknown binary frame kind 0x09"),
        (b"data: {}\n\n", "unknown binary frame kind 0x64"),  # an SSE stream read as binary
        (b"\x01\x00\x00\x00\x02[]", "not a UTF-8 JSON object"),
        (b"\x01\x00\x00\x00\x02\xff\xfe", "not a UTF-8 JSON object"),
        (b"\x02\x01\x00\x00\x01", "exceeds the limit"),  # said before the 16 MiB arrive
    ],
)
def test_binary_decoder_garbage_is_a_clear_error(stream: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        BinaryFrameDecoder(max_frame_bytes=1024 * 1024).feed(stream)


@pytest.mark.parametrize("cut", [1, 4, 5, 8])
def test_binary_decoder_close_raises_for_a_truncated_frame(cut: int) -> None:
    decoder = BinaryFrameDecoder()
    assert decoder.feed(encode_binary_frame(FrameKind.AUDIO, b"abcd")[:cut]) == []
    with pytest.raises(TruncatedStreamError, match=f"{cut} bytes of an incomplete frame"):
        decoder.close()


def test_binary_decoder_close_after_whole_frames_is_quiet() -> None:
    decoder = BinaryFrameDecoder()
    assert len(decoder.feed(BINARY_STREAM)) == len(FRAMES)
    decoder.close()
