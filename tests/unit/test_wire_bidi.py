"""The wire contract: every client message parses or fails with its stable code."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.wire.bidi import (
    Append,
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    Config,
    Flush,
    Flushed,
    Limits,
    Ping,
    Pong,
    ServerMessage,
    SessionClosed,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    encode_client_message,
    encode_server_message,
    parse_client_message,
    parse_invocation_request,
    parse_server_message,
    parse_speed,
)
from voicestream.wire.errors import ErrorCode, ErrorMessage, ProtocolError


def code_of(payload: bytes | str, **kwargs: object) -> ErrorCode:
    with pytest.raises(ProtocolError) as caught:
        parse_client_message(payload, **kwargs)  # type: ignore[arg-type]
    return caught.value.code


def test_synthesize_in_text_and_binary_payloads_is_the_same_message() -> None:
    body = {"type": "synthesize", "text": "Hello.", "request_id": "r1", "voice": "af_heart", "speed": 1.2}
    as_text = parse_client_message(json.dumps(body))
    as_bytes = parse_client_message(json.dumps(body).encode())
    assert as_text == as_bytes == Synthesize(text="Hello.", request_id="r1", voice="af_heart", speed=1.2)


def test_bare_text_is_a_synthesize_request() -> None:
    assert parse_client_message(b'{"text": "Hi there."}') == Synthesize(text="Hi there.")


def test_control_messages() -> None:
    assert parse_client_message('{"type":"cancel"}') == Cancel()
    assert parse_client_message('{"type":"ping"}') == Ping()
    assert parse_client_message('{"type":"close"}') == Close()
    assert parse_client_message('{"type":"config","format":"mp3","speed":0.5}') == Config(format="mp3", speed=0.5)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"\xff\xfe{}", ErrorCode.INVALID_UTF8),
        (b'{"text": "caf\xc3"}', ErrorCode.INVALID_UTF8),
        ("hello", ErrorCode.INVALID_JSON),
        ("", ErrorCode.INVALID_JSON),
        ('{"text": "a"', ErrorCode.INVALID_JSON),
        ("[1, 2]", ErrorCode.NOT_AN_OBJECT),
        ('"text"', ErrorCode.NOT_AN_OBJECT),
        ("null", ErrorCode.NOT_AN_OBJECT),
        ('{"type": "dance"}', ErrorCode.UNKNOWN_TYPE),
        ('{"type": 7}', ErrorCode.UNKNOWN_TYPE),
        ("{}", ErrorCode.UNKNOWN_TYPE),
        ('{"type": "synthesize"}', ErrorCode.MISSING_TEXT),
        ('{"type": "synthesize", "text": null}', ErrorCode.MISSING_TEXT),
        ('{"type": "synthesize", "text": 5}', ErrorCode.MISSING_TEXT),
        ('{"text": "   \\n"}', ErrorCode.EMPTY_TEXT),
        ('{"text": "hi", "voice": ""}', ErrorCode.UNKNOWN_VOICE),
        ('{"text": "hi", "voice": 3}', ErrorCode.UNKNOWN_VOICE),
        ('{"text": "hi", "speed": 9}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": 0.1}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": "fast"}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": true}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": NaN}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "speed": 1e999}', ErrorCode.INVALID_SPEED),
        ('{"text": "hi", "format": "ogg"}', ErrorCode.INVALID_FORMAT),
        ('{"type": "config", "format": "flac"}', ErrorCode.INVALID_FORMAT),
        ('{"text": "hi", "normalize": "no"}', ErrorCode.INVALID_REQUEST),
        ('{"type": "config", "normalize": 0}', ErrorCode.INVALID_REQUEST),
        ('{"text": "hi", "request_id": ""}', ErrorCode.INVALID_REQUEST_ID),
        ('{"text": "hi", "request_id": {"a": 1}}', ErrorCode.INVALID_REQUEST_ID),
        ("[" * 100_000, ErrorCode.INVALID_JSON),
    ],
)
def test_bad_input_has_a_stable_code(payload: bytes | str, code: ErrorCode) -> None:
    assert code_of(payload, limits=Limits(max_message_bytes=1_000_000)) == code


def test_text_over_the_limit() -> None:
    limits = Limits(max_text_chars=10)
    assert parse_client_message('{"text": "0123456789"}', limits) == Synthesize(text="0123456789")
    assert code_of('{"text": "0123456789a"}', limits=limits) == ErrorCode.TEXT_TOO_LONG


def test_message_over_the_size_limit() -> None:
    payload = json.dumps({"text": "a" * 200})
    assert code_of(payload, limits=Limits(max_message_bytes=100)) == ErrorCode.MESSAGE_TOO_LARGE


def test_unknown_voice_is_checked_against_the_engine_voices() -> None:
    assert code_of('{"text": "hi", "voice": "zz_nobody"}', voices=("af_heart",)) == ErrorCode.UNKNOWN_VOICE
    parsed = parse_client_message('{"text": "hi", "voice": "af_heart"}', voices=("af_heart",))
    assert isinstance(parsed, Synthesize) and parsed.voice == "af_heart"


def test_error_keeps_the_request_id_it_belongs_to() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_message('{"text": "", "request_id": "r9"}')
    assert caught.value.request_id == "r9"
    assert caught.value.to_message() == ErrorMessage(code="empty_text", message=caught.value.message, request_id="r9")


@pytest.mark.parametrize(
    "message",
    [
        SynthesisStart(request_id="a", format="pcm", sample_rate=24000, voice="af_heart"),
        SynthesisComplete(request_id="a", audio_bytes=10, audio_ms=1.5, first_audio_ms=2.0, synth_ms=3.0),
        ErrorMessage(code="queue_full", message="full", request_id="b"),
        ErrorMessage(code="invalid_json", message="bad"),
        Cancelled(request_ids=("a", "b")),
        Cancelled(request_ids=()),
        Cancelled(request_ids=("a",), request_id="a"),
        Cancelled(request_ids=(), request_id="gone"),
        Flushed(request_ids=("u.1", "u.2"), request_id="u"),
        Flushed(request_ids=()),
        Pong(),
        SessionClosed(reason="idle_timeout"),
    ],
)
def test_server_messages_round_trip(message: ServerMessage) -> None:
    text = encode_server_message(message)
    body = json.loads(text)
    assert body["type"] == message.type
    assert parse_server_message(text) == message
    assert parse_server_message(text.encode()) == message


@pytest.mark.parametrize(
    "message",
    [
        Synthesize(text="Grüße, 世界.", request_id="a", voice="af_heart", speed=1.25, format="wav", words=True),
        Synthesize(text="Hi."),
        Synthesize(text="$3B at 3:45 PM.", normalize=False),
        Config(voice="am_adam"),
        Config(normalize=False),
        Cancel(),
        Cancel(request_id="r2"),
        Append(text=" tok"),
        Append(text="en.", request_id="u"),
        Flush(),
        Ping(),
        Close(),
    ],
)
def test_client_messages_round_trip(message: ClientMessage) -> None:
    text = encode_client_message(message)
    assert text.startswith(f'{{"type":"{message.type}"') and "null" not in text  # unset fields omitted
    assert parse_client_message(text) == message


def test_encoded_error_omits_a_missing_request_id() -> None:
    assert json.loads(encode_server_message(ErrorMessage(code="x", message="y"))) == {
        "type": "error",
        "code": "x",
        "message": "y",
    }


@pytest.mark.parametrize("speed", [0.5, 1, 2.0, 1.25])
def test_speed_in_range_is_accepted(speed: float) -> None:
    assert parse_speed(speed) == float(speed)


@pytest.mark.parametrize(
    "speed",
    [0.49, 2.01, -1, float("nan"), float("inf"), True, "1.0", None, 10**400, -(10**400), 2**1024],
)
def test_speed_out_of_range_is_invalid_speed_never_a_crash(speed: object) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_speed(speed)
    assert caught.value.code == ErrorCode.INVALID_SPEED and caught.value.status == 400


def test_a_huge_integer_speed_is_refused_as_invalid_speed() -> None:
    # json.loads turns this into a Python int that no float can hold: OverflowError unless handled.
    huge = '{"type":"synthesize","text":"Hi.","speed":1' + "0" * 400 + "}"
    with pytest.raises(ProtocolError) as caught:
        parse_client_message(huge)
    assert caught.value.code == ErrorCode.INVALID_SPEED and "401 digits" in caught.value.message
    with pytest.raises(ProtocolError) as caught:
        parse_invocation_request(huge)
    assert caught.value.code == ErrorCode.INVALID_SPEED


def test_invocation_request() -> None:
    request = parse_invocation_request(b'{"text": "Hi.", "format": "wav", "transport": "sse"}')
    assert (request.text, request.format, request.transport) == ("Hi.", "wav", "sse")
    with pytest.raises(ProtocolError) as caught:
        parse_invocation_request(b'{"text": "Hi.", "transport": "carrier pigeon"}')
    assert caught.value.code == ErrorCode.INVALID_TRANSPORT


def test_invocation_normalize_is_on_unless_turned_off() -> None:
    assert parse_invocation_request(b'{"text": "Hi."}').normalize is True
    assert parse_invocation_request(b'{"text": "Hi.", "normalize": false}').normalize is False
    with pytest.raises(ProtocolError) as caught:
        parse_invocation_request(b'{"text": "Hi.", "normalize": "off"}')
    assert caught.value.code == ErrorCode.INVALID_REQUEST


@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_any_payload_parses_or_raises_protocol_error(payload: bytes | str) -> None:
    try:
        parse_client_message(payload)
    except ProtocolError as error:
        assert error.code in set(ErrorCode)


@given(
    st.dictionaries(
        st.sampled_from(["type", "text", "voice", "speed", "format", "request_id", "x"]),
        st.one_of(
            st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
            st.sampled_from(["synthesize", "config", "cancel", "ping", "close", "pcm", "mp3"]),
        ),
    )
)  # fmt: skip
def test_any_object_parses_or_raises_protocol_error(body: dict[str, object]) -> None:
    try:
        parse_client_message(json.dumps(body))
    except ProtocolError as error:
        assert error.code in set(ErrorCode)
