"""The OpenAI-compatible speech contract: the body OpenAI's clients send, refusals that name the
field (OpenAI's `param`) with the right status, and the SSE events."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from voicestream.wire.bidi import Limits
from voicestream.wire.errors import CodedError
from voicestream.wire.framing import SSEDecoder
from voicestream.wire.openai_speech import (
    OpenAIRequestError,
    audio_delta_event,
    audio_done_event,
    error_event,
    openai_error_body,
    parse_openai_speech_request,
    routes_to_openai_speech,
    words_event,
)
from voicestream.wire.words import WordTiming


def body(**fields: Any) -> str:
    return json.dumps({"model": "kokoro", "input": "Hello there.", "voice": "af_heart", **fields})


def test_openai_defaults_and_our_voices() -> None:
    request = parse_openai_speech_request(body(instructions="Speak cheerfully."))
    assert (request.response_format, request.stream_format, request.speed, request.words) == (
        "mp3",
        "audio",
        1.0,
        False,
    )
    assert parse_openai_speech_request(body(voice="alloy", model="tts-1")).voice == "af_alloy"
    assert parse_openai_speech_request(body(voice={"id": "am_adam"})).voice == "am_adam"
    blend = parse_openai_speech_request(body(voice="af_heart:0.5,am_adam:0.5", response_format="opus", speed=1.5))
    assert (blend.voice, blend.response_format, blend.speed) == ("af_heart:0.5,am_adam:0.5", "opus", 1.5)


def test_normalize_is_on_unless_the_body_turns_it_off() -> None:
    assert parse_openai_speech_request(body()).normalize is True
    assert parse_openai_speech_request(body(normalize=False)).normalize is False


@pytest.mark.parametrize(
    ("fields", "status", "code", "param"),
    [
        ({"model": "gpt-5"}, 404, "model_not_found", "model"),
        ({"model": None}, 400, "invalid_request", "model"),
        ({"input": "   "}, 400, "empty_text", "input"),
        ({"input": None}, 400, "missing_text", "input"),
        ({"input": "x" * 2001}, 413, "text_too_long", "input"),
        ({"voice": ""}, 400, "unknown_voice", "voice"),
        ({"response_format": "ogg"}, 400, "invalid_format", "response_format"),
        ({"stream_format": "chunks"}, 400, "invalid_transport", "stream_format"),
        ({"speed": 4.0}, 400, "invalid_speed", "speed"),
        ({"speed": "fast"}, 400, "invalid_speed", "speed"),
        ({"instructions": 3}, 400, "invalid_request", "instructions"),
        ({"words": "yes"}, 400, "invalid_request", "words"),
        ({"normalize": "no"}, 400, "invalid_request", "normalize"),
        ({"temperature": 0.2}, 400, "unknown_field", "temperature"),
    ],
)
def test_refusals_name_the_field_with_the_right_status(
    fields: dict[str, Any], status: int, code: str, param: str
) -> None:
    with pytest.raises(OpenAIRequestError) as caught:
        parse_openai_speech_request(body(**fields), Limits(max_text_chars=2000))
    error = caught.value
    assert (error.status, error.code, error.param) == (status, code, param)
    assert openai_error_body(error) == {
        "error": {"message": error.message, "type": "invalid_request_error", "param": param, "code": code}
    }


def test_a_body_that_is_not_a_json_object_is_refused() -> None:
    for payload, code in ((b"\xff", "invalid_utf8"), ("{", "invalid_json"), ("[]", "not_an_object")):
        with pytest.raises(OpenAIRequestError) as caught:
            parse_openai_speech_request(payload)
        assert (caught.value.code, caught.value.param) == (code, None)


def test_server_errors_are_server_error_typed() -> None:
    body = openai_error_body(CodedError("boom", code="synthesis_failed", status=500))
    assert body["error"]["type"] == "server_error" and body["error"]["code"] == "synthesis_failed"


def test_sse_events_are_openais_shapes() -> None:
    stream = (
        words_event([WordTiming("Hi", 0.0, 0.25)])
        + audio_delta_event(b"\x01\x02")
        + audio_done_event(12)
        + error_event(CodedError("late failure", code="synthesis_failed"))
    )
    events = SSEDecoder().feed(stream)
    assert [(e.event, e.json()["type"]) for e in events] == [
        ("speech.audio.words", "speech.audio.words"),
        ("speech.audio.delta", "speech.audio.delta"),
        ("speech.audio.done", "speech.audio.done"),
        ("error", "error"),
    ]
    assert base64.b64decode(events[1].json()["audio"]) == b"\x01\x02"
    assert events[2].json()["usage"] == {"input_tokens": 12, "output_tokens": 0, "total_tokens": 12}
    assert events[3].json()["error"]["code"] == "synthesis_failed"


def test_the_sagemaker_route_attribute() -> None:
    assert routes_to_openai_speech("route=/v1/audio/speech")
    assert routes_to_openai_speech("trace=abc, route=/v1/audio/speech")
    assert not routes_to_openai_speech(None)
    assert not routes_to_openai_speech("route=/v1/audio/speechless")
