"""The OpenAI-compatible speech API's contract (docs/protocol.md#openai-compatible-speech): its
request body, its error body and its server-sent events, written once. Standard library only.

    POST /v1/audio/speech  {"model", "input", "voice", "response_format"?, "speed"?,
                            "stream_format"?, "instructions"?, "sample_rate"?, "lexicon"?}
                           -> audio, streamed
    POST /v1/audio/phonemize {"input", "voice", "lexicon"?}  -> {"phonemes": ...}

What differs from OpenAI, on purpose: voices are ours (ids and blends; OpenAI's names that
Kokoro also has are accepted), `speed` is 0.5-2.0 (the engine's range, as on every route),
`"words": true` adds `speech.audio.words` events to an SSE stream, `response_format` also
offers `mulaw` and `alaw` (G.711) and `sample_rate` picks the output rate.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from voicestream.wire.bidi import (
    MAX_VOICE_CHARS,
    SAMPLE_RATE,
    Limits,
    default_sample_rate,
    parse_sample_rate,
    parse_speed,
)
from voicestream.wire.errors import CodedError, ErrorCode, ProtocolError
from voicestream.wire.framing import decode_json_object, encode_sse
from voicestream.wire.pronunciation import Lexicon, parse_lexicon
from voicestream.wire.words import WordTiming, word_dicts

OPENAI_SPEECH_PATH: Final = "/v1/audio/speech"
OPENAI_MODELS_PATH: Final = "/v1/models"
OPENAI_VOICES_PATH: Final = "/v1/audio/voices"
PHONEMIZE_PATH: Final = "/v1/audio/phonemize"
# What an /invocations request sets (SageMaker's CustomAttributes) to reach /v1/audio/speech.
CUSTOM_ATTRIBUTES_HEADER: Final = "x-amzn-sagemaker-custom-attributes"
OPENAI_SPEECH_ROUTE_ATTRIBUTE: Final = f"route={OPENAI_SPEECH_PATH}"

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw"]
RESPONSE_FORMATS: Final[tuple[ResponseFormat, ...]] = ("mp3", "opus", "aac", "flac", "wav", "pcm", "mulaw", "alaw")
# Opus encodes only at these rates (RFC 6716); the other formats take every rate of SAMPLE_RATES.
OPUS_SAMPLE_RATES: Final[tuple[int, ...]] = (8000, 16000, 24000, 48000)
StreamFormat = Literal["audio", "sse"]
STREAM_FORMATS: Final[tuple[StreamFormat, ...]] = ("audio", "sse")
# Model ids a client may name: ours, and OpenAI's, so an OpenAI client works with its defaults.
MODEL_ID: Final = "kokoro"
MODELS: Final[tuple[str, ...]] = (MODEL_ID, "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# OpenAI's voice names that are also Kokoro-82M voices (same name, same gender).
VOICE_ALIASES: Final[dict[str, str]] = {
    "alloy": "af_alloy",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
}
_FIELDS: Final = frozenset(
    {
        "model",
        "input",
        "voice",
        "response_format",
        "speed",
        "stream_format",
        "instructions",
        "words",
        "stream",
        "sample_rate",
        "lexicon",
        "normalize",
    }
)


class OpenAIRequestError(ProtocolError):
    """A refused request, with the body field it is about (`param`, None for the body itself)."""

    def __init__(self, code: str, message: str, param: str | None, *, status: int | None = None) -> None:
        super().__init__(code, message, status=status)
        self.param = param


@dataclass(frozen=True, slots=True)
class OpenAISpeechRequest:
    model: str
    input: str
    voice: str  # ours: an alias is resolved, an object's id taken
    response_format: ResponseFormat = "mp3"
    speed: float = 1.0
    stream_format: StreamFormat = "audio"
    words: bool = False
    sample_rate: int = SAMPLE_RATE  # resolved: the body's, else the format's default
    lexicon: Lexicon = ()  # our extension (an extra body field): how words are said
    normalize: bool = True  # our extension: read agent text right (docs/protocol.md)


def parse_openai_speech_request(payload: bytes | str, limits: Limits | None = None) -> OpenAISpeechRequest:
    """Validate the body; `OpenAIRequestError` names the field and the stable code."""
    limits = limits or Limits()
    try:
        body = decode_json_object(payload, "the request body")
    except ProtocolError as error:
        raise OpenAIRequestError(error.code, error.message, None) from None
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise OpenAIRequestError(ErrorCode.UNKNOWN_FIELD, f"unrecognized request argument: {unknown[0]}", unknown[0])
    response_format = _choice(body, "response_format", RESPONSE_FORMATS, "mp3", ErrorCode.INVALID_FORMAT)
    return OpenAISpeechRequest(
        model=_model(body),
        input=_input(body, limits),
        voice=_voice(body),
        response_format=response_format,
        speed=_speed(body),
        stream_format=_choice(body, "stream_format", STREAM_FORMATS, "audio", ErrorCode.INVALID_TRANSPORT),
        words=_words(body),
        sample_rate=_sample_rate(body, response_format),
        lexicon=openai_lexicon(body),
        normalize=_normalize(body),
    )


def openai_lexicon(body: dict[str, Any]) -> Lexicon:
    """The body's `lexicon` (wire/pronunciation.py), with the field named on error."""
    try:
        return parse_lexicon(body.get("lexicon")) or ()
    except ProtocolError as error:
        raise OpenAIRequestError(error.code, error.message, "lexicon") from None


@dataclass(frozen=True, slots=True)
class PhonemizeRequest:
    """POST /v1/audio/phonemize: what the server would say for `input`, as Kokoro phonemes."""

    input: str
    voice: str
    lexicon: Lexicon = ()
    normalize: bool = True


_PHONEMIZE_FIELDS: Final = frozenset({"input", "voice", "lexicon", "normalize", "model"})


def parse_phonemize_request(payload: bytes | str, limits: Limits | None = None) -> PhonemizeRequest:
    """Validate the body (the speech route's field rules; `model` is accepted and ignored)."""
    limits = limits or Limits()
    try:
        body = decode_json_object(payload, "the request body")
    except ProtocolError as error:
        raise OpenAIRequestError(error.code, error.message, None) from None
    unknown = sorted(set(body) - _PHONEMIZE_FIELDS)
    if unknown:
        raise OpenAIRequestError(ErrorCode.UNKNOWN_FIELD, f"unrecognized request argument: {unknown[0]}", unknown[0])
    return PhonemizeRequest(
        input=_input(body, limits), voice=_voice(body), lexicon=openai_lexicon(body), normalize=_normalize(body)
    )


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise OpenAIRequestError(ErrorCode.INVALID_REQUEST, "model is required: a model id such as 'kokoro'", "model")
    if model not in MODELS:
        raise OpenAIRequestError(
            ErrorCode.MODEL_NOT_FOUND,
            f"the model {model!r} does not exist; available: {', '.join(MODELS)}",
            "model",
            status=404,
        )
    return model


def _input(body: dict[str, Any], limits: Limits) -> str:
    text = body.get("input")
    if not isinstance(text, str):
        raise OpenAIRequestError(ErrorCode.MISSING_TEXT, "input is required: the text to speak", "input")
    if not text.strip():
        raise OpenAIRequestError(ErrorCode.EMPTY_TEXT, "input is empty: nothing to speak", "input")
    if len(text) > limits.max_text_chars:
        raise OpenAIRequestError(
            ErrorCode.TEXT_TOO_LONG,
            f"input has {len(text)} characters; the limit is {limits.max_text_chars}",
            "input",
            status=413,
        )
    return text


def _voice(body: dict[str, Any]) -> str:
    voice = body.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    if not isinstance(voice, str) or not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise OpenAIRequestError(
            ErrorCode.UNKNOWN_VOICE, "voice is required: a voice id (af_heart), a blend or {'id': ...}", "voice"
        )
    return VOICE_ALIASES.get(voice, voice)


def _choice(body: dict[str, Any], name: str, allowed: tuple[Any, ...], default: Any, code: str) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if value not in allowed:
        raise OpenAIRequestError(code, f"{name} must be one of {', '.join(allowed)}, got {value!r}", name)
    return value


def _speed(body: dict[str, Any]) -> float:
    if body.get("speed") is None:
        return 1.0
    try:
        return parse_speed(body["speed"])
    except ProtocolError as error:
        raise OpenAIRequestError(error.code, error.message, "speed") from None


def _sample_rate(body: dict[str, Any], response_format: str) -> int:
    if body.get("sample_rate") is None:
        return default_sample_rate(response_format)
    try:
        rate = parse_sample_rate(body["sample_rate"])
    except ProtocolError as error:
        raise OpenAIRequestError(error.code, error.message, "sample_rate") from None
    if response_format == "opus" and rate not in OPUS_SAMPLE_RATES:
        raise OpenAIRequestError(
            ErrorCode.INVALID_SAMPLE_RATE,
            f"opus encodes at {', '.join(map(str, OPUS_SAMPLE_RATES))} Hz only, got {rate}",
            "sample_rate",
        )
    return rate


def _words(body: dict[str, Any]) -> bool:
    for name in ("words", "stream"):  # stream: some clients send it; every response streams anyway
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise OpenAIRequestError(ErrorCode.INVALID_REQUEST, f"{name} must be true or false", name)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise OpenAIRequestError(ErrorCode.INVALID_REQUEST, "instructions must be a string", "instructions")
    return bool(body.get("words"))


def _normalize(body: dict[str, Any]) -> bool:
    value = body.get("normalize")
    if value is not None and not isinstance(value, bool):
        raise OpenAIRequestError(ErrorCode.INVALID_REQUEST, "normalize must be true or false", "normalize")
    return value is not False


def openai_error_body(error: CodedError, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""
    kind = "invalid_request_error" if error.status < 500 else "server_error"
    param = error.param if isinstance(error, OpenAIRequestError) else param
    return {"error": {"message": error.message, "type": kind, "param": param, "code": str(error.code)}}


def routes_to_openai_speech(custom_attributes: str | None) -> bool:
    """Whether an /invocations request's CustomAttributes ask for /v1/audio/speech."""
    return _has_attribute(custom_attributes, OPENAI_SPEECH_ROUTE_ATTRIBUTE)


def routes_to_phonemize(custom_attributes: str | None) -> bool:
    """Whether an /invocations request's CustomAttributes ask for /v1/audio/phonemize."""
    return _has_attribute(custom_attributes, f"route={PHONEMIZE_PATH}")


def _has_attribute(custom_attributes: str | None, attribute: str) -> bool:
    if not custom_attributes:
        return False
    return attribute in (part.strip() for part in custom_attributes.split(","))


# --- server-sent events -------------------------------------------------------------------------


def audio_delta_event(audio: bytes) -> bytes:
    return encode_sse("speech.audio.delta", {"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode()})


def words_event(words: Iterable[WordTiming]) -> bytes:
    """Our extension (asked for with `"words": true`): word timings, before the audio they cover."""
    return encode_sse("speech.audio.words", {"type": "speech.audio.words", "words": word_dicts(words)})


def audio_done_event(input_chars: int) -> bytes:
    # Kokoro has no billing tokens: usage counts the input's characters, as OpenAI's tts-1 bills them.
    usage = {"input_tokens": input_chars, "output_tokens": 0, "total_tokens": input_chars}
    return encode_sse("speech.audio.done", {"type": "speech.audio.done", "usage": usage})


def error_event(error: CodedError) -> bytes:
    return encode_sse("error", {"type": "error", **openai_error_body(error)})


def models_body() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "voicestream"} for model in MODELS],
    }
