"""vLLM-Omni's /v1/audio/speech/stream contract (docs/vllm-omni.md): messages, limits, codes."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.wire import vllm_omni as vo
from voicestream.wire.vllm_omni import (
    AudioChunk,
    AudioDone,
    AudioStart,
    InputDone,
    InputText,
    ServerError,
    SessionClose,
    SessionConfig,
    SessionDone,
    VllmOmniError,
    VllmOmniErrorCode,
    WordTimestamp,
    classify_server_error,
    encode_client_message,
    input_text_messages,
    parse_server_message,
)

Code = VllmOmniErrorCode


def error_code(function: Any, *args: Any, **kwargs: Any) -> VllmOmniErrorCode:
    with pytest.raises(VllmOmniError) as caught:
        function(*args, **kwargs)
    return caught.value.code


# --- constants --------------------------------------------------------------------------------


def test_limits_and_timeouts_are_upstreams() -> None:
    assert vo.MAX_INPUT_TEXT_MESSAGE_CHARS == 131_072
    assert vo.MAX_CONFIG_MESSAGE_CHARS == 4_194_304
    assert (vo.CONFIG_TIMEOUT_S, vo.IDLE_TIMEOUT_S) == (10.0, 30.0)
    assert vo.DEFAULT_SAMPLE_RATE == 24_000
    assert vo.SPEECH_STREAM_PATH == "/" + vo.SAGEMAKER_INVOCATION_PATH
    assert not vo.SAGEMAKER_INVOCATION_PATH.startswith("/")


# --- client messages --------------------------------------------------------------------------


def test_default_config_asks_for_streamed_pcm_and_states_the_split() -> None:
    assert json.loads(encode_client_message(SessionConfig())) == {
        "type": "session.config",
        "response_format": "pcm",
        "stream_audio": True,
        "split_granularity": "none",
    }


def test_config_encodes_type_first_and_omits_unset_fields() -> None:
    config = SessionConfig(voice="vivian", language="English", instructions="Speak warmly", split_granularity=None)
    text = encode_client_message(config)
    assert text.startswith('{"type":"session.config",')
    assert json.loads(text) == {
        "type": "session.config",
        "voice": "vivian",
        "language": "English",
        "response_format": "pcm",
        "stream_audio": True,
        "instructions": "Speak warmly",
    }


def test_config_keeps_non_ascii_as_characters() -> None:
    text = encode_client_message(SessionConfig(instructions="温柔地说"))
    assert "温柔地说" in text


@pytest.mark.parametrize(
    "options",
    [
        {"response_format": "ogg"},
        {"split_granularity": "word"},
        {"task_type": "Clone"},
        {"voice": ""},
        {"voice": "   "},
        {"voice": 3},
        {"language": "English\ud800"},
        {"speed": 0.2},
        {"speed": 4.5},
        {"speed": float("nan")},
        {"speed": True},
        {"speed": 1.5},  # streaming needs 1.0
        {"response_format": "wav"},  # streaming needs pcm
        {"stream_audio": "yes"},
        {"max_new_tokens": 0},
        {"initial_codec_chunk_frames": -1},
        {"seed": 2**63},
        {"seed": 1.5},
        {"x_vector_only_mode": 1},
        {"word_timestamps": True, "stream_audio": False, "response_format": "pcm"},
        {"ref_audio": b"bytes"},
    ],
)
def test_invalid_configs_are_refused_before_sending(options: dict[str, Any]) -> None:
    assert error_code(SessionConfig, **options) == Code.INVALID_CONFIG


@pytest.mark.parametrize(
    "options",
    [
        {"stream_audio": False, "response_format": "wav", "speed": 1.5},
        {"stream_audio": False, "response_format": "mp3", "speed": 0.25},
        {"speed": 1.0},
        {"task_type": "Base", "ref_audio": "data:audio/wav;base64,AAAA", "ref_text": "hello"},
        {"task_type": "VoiceDesign", "instructions": "A calm, low voice"},
        {"split_granularity": "sentence"},
        {"split_granularity": "clause"},
        {"word_timestamps": True},
        {"seed": -(2**63), "max_new_tokens": 2048, "initial_codec_chunk_frames": 0},
    ],
)
def test_valid_configs_encode(options: dict[str, Any]) -> None:
    body = json.loads(encode_client_message(SessionConfig(**options)))
    for name, value in options.items():
        assert body[name] == value


def test_config_over_four_mebibytes_is_refused() -> None:
    huge = SessionConfig(task_type="Base", ref_audio="data:audio/wav;base64," + "A" * vo.MAX_CONFIG_MESSAGE_CHARS)
    assert error_code(encode_client_message, huge) == Code.MESSAGE_TOO_LARGE


def test_simple_messages() -> None:
    assert encode_client_message(InputText("Hello there.")) == '{"type":"input.text","text":"Hello there."}'
    assert encode_client_message(InputDone()) == '{"type":"input.done"}'
    assert encode_client_message(SessionClose()) == '{"type":"session.close"}'


def test_input_text_limit_counts_the_whole_json_message() -> None:
    overhead = len(encode_client_message(InputText("")))
    largest = "a" * (vo.MAX_INPUT_TEXT_MESSAGE_CHARS - overhead)
    assert len(encode_client_message(InputText(largest))) == vo.MAX_INPUT_TEXT_MESSAGE_CHARS
    assert error_code(InputText, largest + "a") == Code.MESSAGE_TOO_LARGE
    # Escapes count: a quote is two characters of JSON.
    assert error_code(InputText, largest[:-1] + '"') == Code.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("bad", [None, 42, b"bytes"])
def test_input_text_must_be_a_string(bad: Any) -> None:
    assert error_code(InputText, bad) == Code.INVALID_TEXT


def test_lone_surrogates_cannot_travel() -> None:
    assert error_code(InputText, "bad \udc80 text") == Code.INVALID_TEXT
    assert error_code(input_text_messages, "bad \udc80 text") == Code.INVALID_TEXT


# Every character a JSON string treats specially, plus ordinary ones and astral characters.
json_text = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\\b\f\n\r\t\x00\x1f\x7f\u2028 é中😀'),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=300,
)


@given(json_text)
def test_encoded_size_is_known_before_encoding(text: str) -> None:
    """InputText's size check agrees with the real encoding, character for character."""
    message = InputText(text)
    encoded = encode_client_message(message)
    assert len(encoded) == vo._INPUT_TEXT_OVERHEAD + vo._json_string_chars(text)
    assert json.loads(encoded)["text"] == text


@given(json_text, st.integers(min_value=40, max_value=120))
def test_long_text_splits_losslessly_into_messages_that_fit(text: str, limit: int) -> None:
    messages = input_text_messages(text, max_message_chars=limit)
    assert "".join(message.text for message in messages) == text
    assert all(len(encode_client_message(message)) <= limit for message in messages)
    assert all(message.text for message in messages)


def test_a_text_over_the_limit_becomes_several_messages() -> None:
    text = "Sentence number one. " * 10_000  # 210,000 characters
    messages = input_text_messages(text)
    assert len(messages) == 2
    assert "".join(m.text for m in messages) == text
    assert all(len(encode_client_message(m)) <= vo.MAX_INPUT_TEXT_MESSAGE_CHARS for m in messages)
    assert input_text_messages("") == []


# --- server messages --------------------------------------------------------------------------


def test_audio_start_of_every_version() -> None:
    original = '{"type":"audio.start","sentence_index":0,"sentence_text":"Hi.","format":"pcm","sample_rate":24000}'
    assert parse_server_message(original) == AudioStart(0, "Hi.", "pcm", sample_rate=24000)
    main = {
        "type": "audio.start",
        "utterance_index": 2,
        "sentence_index": 1,
        "sentence_text": "Second.",
        "format": "pcm",
        "sample_rate": 24000,
        "channels": 1,
    }
    assert parse_server_message(json.dumps(main)) == AudioStart(1, "Second.", "pcm", 2, 24000, 1)
    wav = '{"type":"audio.start","utterance_index":0,"sentence_index":0,"sentence_text":"x","format":"wav"}'
    assert parse_server_message(wav).sample_rate is None  # type: ignore[union-attr]


def test_audio_done_session_done_and_extra_fields() -> None:
    done = '{"type":"audio.done","utterance_index":0,"sentence_index":0,"total_bytes":96000,"error":false,"x":1}'
    assert parse_server_message(done) == AudioDone(0, utterance_index=0, total_bytes=96000, error=False)
    assert parse_server_message('{"type":"audio.done","sentence_index":3}') == AudioDone(3)
    session_done = '{"type":"session.done","utterance_index":4,"total_sentences":1}'
    assert parse_server_message(session_done) == SessionDone(total_sentences=1, utterance_index=4)
    assert parse_server_message('{"type":"session.done","total_sentences":0}') == SessionDone(0)


def test_error_with_partial_audio() -> None:
    message = "Generation failed for utterance 0, sentence 2: CUDA out of memory"
    body = {"type": "error", "message": message, "partial_audio": True, "action": "discard"}
    error = parse_server_message(json.dumps(body))
    assert error == ServerError(message, partial_audio=True, action="discard")
    assert isinstance(error, ServerError)
    assert error.code == Code.GENERATION_FAILED
    assert not error.ends_session(configured=True)
    plain = parse_server_message('{"type":"error","message":"Idle timeout: no message received"}')
    assert plain == ServerError("Idle timeout: no message received")


def test_audio_chunk_with_word_timestamps() -> None:
    pcm = b"\x01\x00\xff\x7f"
    streaming = {
        "type": "audio.chunk",
        "utterance_index": 0,
        "sentence_index": 0,
        "chunk_id": 0,
        "chunk_start_ms": 0,
        "chunk_end_ms": 0,
        "sample_rate": 24000,
        "channels": 1,
        "audio_b64": base64.b64encode(pcm).decode(),
        "timestamps": None,
    }
    chunk = parse_server_message(json.dumps(streaming))
    assert chunk == AudioChunk(0, 0, pcm, 0, 24000, 1, 0, 0, None)
    final = streaming | {"chunk_id": 1, "audio_b64": "", "timestamps": [{"word": "Hi", "start_ms": 0, "end_ms": 310}]}
    parsed = parse_server_message(json.dumps(final))
    assert isinstance(parsed, AudioChunk)
    assert parsed.audio == b""
    assert parsed.timestamps == (WordTimestamp("Hi", 0.0, 310.0),)


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        "[1, 2]",
        '{"sentence_index": 0}',
        '{"type": 7}',
        '{"type":"audio.start","sentence_text":"x","format":"pcm"}',
        '{"type":"audio.start","sentence_index":true,"sentence_text":"x","format":"pcm"}',
        '{"type":"audio.start","sentence_index":-1,"sentence_text":"x","format":"pcm"}',
        '{"type":"audio.start","sentence_index":0,"sentence_text":"x","format":"pcm","sample_rate":0}',
        '{"type":"audio.done","sentence_index":0,"error":"no"}',
        '{"type":"session.done"}',
        '{"type":"error"}',
        '{"type":"error","message":"x","action":5}',
        '{"type":"audio.chunk","sentence_index":0,"chunk_id":0,"audio_b64":"***"}',
        '{"type":"audio.chunk","sentence_index":0,"chunk_id":0,"audio_b64":"","timestamps":[{"word":"a"}]}',
    ],
)
def test_malformed_server_messages(payload: str) -> None:
    assert error_code(parse_server_message, payload) == Code.MALFORMED_MESSAGE


def test_unknown_server_message_type_is_distinguishable() -> None:
    assert error_code(parse_server_message, '{"type":"session.created"}') == Code.UNKNOWN_MESSAGE


@given(st.text(max_size=200))
def test_parser_raises_only_its_own_error(payload: str) -> None:
    try:
        message = parse_server_message(payload)
    except VllmOmniError as exc:
        assert exc.code in (Code.MALFORMED_MESSAGE, Code.UNKNOWN_MESSAGE)
    else:
        assert isinstance(message, AudioStart | AudioChunk | AudioDone | SessionDone | ServerError)


# Every error text upstream sends (all versions), with its code and whether it ends a
# configured session.
UPSTREAM_ERRORS = [
    ("Timeout waiting for session.config", Code.CONFIG_TIMEOUT, True),
    ("Idle timeout: no message received", Code.IDLE_TIMEOUT, True),
    ("Expected session.config, got: input.text", Code.EXPECTED_CONFIG, True),
    ("Invalid session config: 1 validation error for StreamingSpeechSessionConfig", Code.INVALID_CONFIG, False),
    ("Invalid JSON message", Code.INVALID_JSON, False),
    ("Invalid JSON in session.config", Code.INVALID_JSON, False),
    ("WebSocket messages must be JSON objects", Code.NOT_AN_OBJECT, False),
    ("session.config must be a JSON object", Code.NOT_AN_OBJECT, False),
    ("input.text message too large", Code.MESSAGE_TOO_LARGE, False),
    ("session.config message too large", Code.MESSAGE_TOO_LARGE, False),
    ("WebSocket message too large", Code.MESSAGE_TOO_LARGE, False),
    ("input.text requires a string value", Code.INVALID_TEXT, False),
    (
        "session.config cannot be applied while an utterance is in progress; send input.done first",
        Code.CONFIG_WHILE_BUFFERED,
        False,
    ),
    (
        "session.config cannot be applied while input is buffered; send input.done first",
        Code.CONFIG_WHILE_BUFFERED,
        False,
    ),
    ("Unknown message type: input.cancel", Code.UNKNOWN_TYPE, False),
    ("The model `other` does not exist.", Code.UNKNOWN_MODEL, False),
    ("Generation failed for sentence 3: boom", Code.GENERATION_FAILED, False),
    (
        "word_timestamps=true but the server was launched without --forced-aligner; ...",
        Code.WORD_TIMESTAMPS_UNAVAILABLE,
        False,
    ),
    ("Streaming speech is not available", Code.UNAVAILABLE, True),
    ("Internal error: 'text'", Code.INTERNAL_ERROR, True),
    ("something new", Code.SERVER_ERROR, False),
]


@pytest.mark.parametrize(("message", "code", "fatal"), UPSTREAM_ERRORS)
def test_upstream_error_texts_map_to_stable_codes(message: str, code: VllmOmniErrorCode, fatal: bool) -> None:
    assert classify_server_error(message) == code
    error = ServerError(message)
    assert error.ends_session(configured=True) is fatal
    assert error.ends_session(configured=False)  # before the first config, every error ends it


def test_pcm_duration() -> None:
    assert vo.pcm_duration_ms(48_000) == 1000.0
    assert vo.pcm_duration_ms(48_000, sample_rate=48_000, channels=1) == 500.0
    assert vo.pcm_duration_ms(96_000, channels=2) == 1000.0
    with pytest.raises(ValueError):
        vo.pcm_duration_ms(10, sample_rate=0)
