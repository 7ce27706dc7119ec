"""The wire contract of vLLM-Omni's streaming speech WebSocket, `/v1/audio/speech/stream`.

docs/vllm-omni.md says the same in prose, with the upstream sources and how the route changed
between versions. Standard library only, like the rest of `wire`: Lambda functions import it.

Client -> server: one JSON object per TEXT frame (a binary frame ends the session upstream):
`session.config` first, then `input.text` / `input.done` (a flush) / `session.close`.
Server -> client: JSON control messages in text frames (`parse_server_message`); binary frames
are audio (s16le PCM when `stream_audio` is on). There are no request ids and no cancel.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal, TypeAlias

from voicestream.wire.errors import CodedError

# --- constants (docs/vllm-omni.md) -----------------------------------------------------------

SPEECH_STREAM_PATH: Final = "/v1/audio/speech/stream"
# SageMaker's model_invocation_path: without the leading slash (one fails validation, HTTP 400).
SAGEMAKER_INVOCATION_PATH: Final = "v1/audio/speech/stream"

DEFAULT_SAMPLE_RATE: Final = 24_000  # Qwen3-TTS; audio.start states the rate when it streams PCM
PCM_SAMPLE_WIDTH: Final = 2  # s16le

# Upstream compares len() of the raw JSON text of the whole message (characters, not bytes).
MAX_INPUT_TEXT_MESSAGE_CHARS: Final = 128 * 1024  # every message but session.config
MAX_CONFIG_MESSAGE_CHARS: Final = 4 * 1024 * 1024  # session.config (room for ref_audio)

CONFIG_TIMEOUT_S: Final = 10.0  # from the connection to the first valid session.config
IDLE_TIMEOUT_S: Final = 30.0  # between client messages once configured (also between utterances)

MIN_SPEED: Final = 0.25
MAX_SPEED: Final = 4.0
MAX_SPEAKER_EMBEDDING_DIM: Final = 8192
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

DEFAULT_MODEL: Final = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
DEFAULT_VOICE: Final = "vivian"  # a preset speaker of the CustomVoice checkpoint (the seed sample's)
# The CustomVoice checkpoint's preset speakers and the languages of the official checkpoints.
QWEN3_TTS_VOICES: Final = ("vivian", "ryan", "aiden", "dylan", "eric", "ono_anna", "serena", "sohee", "uncle_fu")
QWEN3_TTS_LANGUAGES: Final = (
    "Auto",
    "Chinese",
    "English",
    "Japanese",
    "Korean",
    "German",
    "French",
    "Russian",
    "Portuguese",
    "Spanish",
    "Italian",
)

ResponseFormat: TypeAlias = Literal["wav", "pcm", "flac", "mp3", "opus"]
SplitGranularity: TypeAlias = Literal["none", "sentence", "clause"]
TaskType: TypeAlias = Literal["CustomVoice", "VoiceDesign", "Base"]
RESPONSE_FORMATS: Final[tuple[str, ...]] = ("wav", "pcm", "flac", "mp3", "opus")
SPLIT_GRANULARITIES: Final[tuple[str, ...]] = ("none", "sentence", "clause")
TASK_TYPES: Final[tuple[str, ...]] = ("CustomVoice", "VoiceDesign", "Base")


# --- errors ----------------------------------------------------------------------------------


class VllmOmniErrorCode(StrEnum):
    """Stable codes: callers branch on these, never on upstream's message text."""

    # Refused on our side, before anything is sent.
    INVALID_CONFIG = "invalid_config"
    INVALID_TEXT = "invalid_text"
    MESSAGE_TOO_LARGE = "message_too_large"
    # The server sent something this contract does not describe.
    MALFORMED_MESSAGE = "malformed_message"
    UNKNOWN_MESSAGE = "unknown_message"
    # What an upstream `error` message reports (ServerError.code); the two above also apply.
    CONFIG_TIMEOUT = "config_timeout"
    IDLE_TIMEOUT = "idle_timeout"
    EXPECTED_CONFIG = "expected_config"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    CONFIG_WHILE_BUFFERED = "config_while_buffered"
    UNKNOWN_TYPE = "unknown_type"
    UNKNOWN_MODEL = "unknown_model"
    GENERATION_FAILED = "generation_failed"
    WORD_TIMESTAMPS_UNAVAILABLE = "word_timestamps_unavailable"
    UNAVAILABLE = "unavailable"
    INTERNAL_ERROR = "internal_error"  # also what a binary client frame produces
    SERVER_ERROR = "server_error"  # an error text this module does not know


# Refused on our side before sending: the caller asked for something upstream would refuse.
_REFUSED_STATUS: Final[dict[VllmOmniErrorCode, int]] = {
    VllmOmniErrorCode.INVALID_CONFIG: 400,
    VllmOmniErrorCode.INVALID_TEXT: 400,
    VllmOmniErrorCode.MESSAGE_TOO_LARGE: 413,
}


class VllmOmniError(CodedError):
    """A message cannot be sent or understood; `code` is a VllmOmniErrorCode. A request we refuse
    to send answers 400/413; anything the server said or did wrong, 502."""

    code: VllmOmniErrorCode = VllmOmniErrorCode.SERVER_ERROR
    status = 502

    def __init__(self, code: VllmOmniErrorCode, message: str) -> None:
        super().__init__(message, code=code, status=_REFUSED_STATUS.get(code, 502))


# Upstream `error` messages carry only text; these prefixes (all versions) map it to a code.
_SERVER_ERROR_PREFIXES: Final[tuple[tuple[str, VllmOmniErrorCode], ...]] = (
    ("Timeout waiting for session.config", VllmOmniErrorCode.CONFIG_TIMEOUT),
    ("Idle timeout", VllmOmniErrorCode.IDLE_TIMEOUT),
    ("Expected session.config", VllmOmniErrorCode.EXPECTED_CONFIG),
    ("Invalid session config", VllmOmniErrorCode.INVALID_CONFIG),
    ("Invalid JSON", VllmOmniErrorCode.INVALID_JSON),
    ("WebSocket messages must be JSON objects", VllmOmniErrorCode.NOT_AN_OBJECT),
    ("session.config must be a JSON object", VllmOmniErrorCode.NOT_AN_OBJECT),
    ("input.text message too large", VllmOmniErrorCode.MESSAGE_TOO_LARGE),
    ("session.config message too large", VllmOmniErrorCode.MESSAGE_TOO_LARGE),
    ("WebSocket message too large", VllmOmniErrorCode.MESSAGE_TOO_LARGE),
    ("input.text requires a string value", VllmOmniErrorCode.INVALID_TEXT),
    ("session.config cannot be applied", VllmOmniErrorCode.CONFIG_WHILE_BUFFERED),
    ("Unknown message type", VllmOmniErrorCode.UNKNOWN_TYPE),
    ("The model `", VllmOmniErrorCode.UNKNOWN_MODEL),
    ("Generation failed", VllmOmniErrorCode.GENERATION_FAILED),
    ("word_timestamps=true", VllmOmniErrorCode.WORD_TIMESTAMPS_UNAVAILABLE),
    ("Streaming speech is not available", VllmOmniErrorCode.UNAVAILABLE),
    ("Internal error", VllmOmniErrorCode.INTERNAL_ERROR),
)

# Errors after which the server closes the connection even once configured.
_FATAL_WHEN_CONFIGURED: Final = frozenset(
    {
        VllmOmniErrorCode.CONFIG_TIMEOUT,
        VllmOmniErrorCode.IDLE_TIMEOUT,
        VllmOmniErrorCode.EXPECTED_CONFIG,
        VllmOmniErrorCode.INTERNAL_ERROR,
        VllmOmniErrorCode.UNAVAILABLE,
    }
)


def classify_server_error(message: str) -> VllmOmniErrorCode:
    """The stable code of an upstream error text (SERVER_ERROR when it is not a known one)."""
    for prefix, code in _SERVER_ERROR_PREFIXES:
        if message.startswith(prefix):
            return code
    return VllmOmniErrorCode.SERVER_ERROR


# --- client -> server ------------------------------------------------------------------------


def _config_error(message: str) -> VllmOmniError:
    return VllmOmniError(VllmOmniErrorCode.INVALID_CONFIG, message)


def _check_optional_str(name: str, value: object, *, non_empty: bool = False) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise _config_error(f"{name} must be a string, got {type(value).__name__}")
    if non_empty and not value.strip():
        raise _config_error(f"{name} must not be empty")
    _check_unicode(name, value, VllmOmniErrorCode.INVALID_CONFIG)


def _check_unicode(name: str, value: str, code: VllmOmniErrorCode) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate cannot travel as UTF-8
        raise VllmOmniError(code, f"{name} is not valid Unicode: {exc.reason}") from exc


def _check_optional_bool(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise _config_error(f"{name} must be true or false, got {value!r}")


def _check_optional_int(name: str, value: object, low: int, high: int = _INT64_MAX) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _config_error(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def _check_choice(name: str, value: object, choices: tuple[str, ...], *, optional: bool) -> None:
    if value is None and optional:
        return
    if value not in choices:
        raise _config_error(f"{name} must be one of {', '.join(choices)}; got {value!r}")


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """`session.config`: the first message of a connection, sticky across utterances.

    Defaults are voicestream's, not upstream's: streamed PCM (upstream: one WAV per request)
    and `split_granularity="none"` sent explicitly (its upstream default changed between
    versions; None omits the field). Validation mirrors upstream's, so a mistake is refused
    here with a clear message instead of ending the session on the server.
    """

    type: ClassVar[str] = "session.config"
    voice: str | None = None
    language: str | None = None
    response_format: ResponseFormat = "pcm"
    stream_audio: bool = True
    split_granularity: SplitGranularity | None = "none"
    model: str | None = None
    task_type: TaskType | None = None
    instructions: str | None = None
    speed: float | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    max_new_tokens: int | None = None
    initial_codec_chunk_frames: int | None = None
    non_streaming_mode: bool | None = None
    seed: int | None = None
    word_timestamps: bool | None = None

    def __post_init__(self) -> None:
        for name in ("voice", "language", "model"):
            _check_optional_str(name, getattr(self, name), non_empty=True)
        for name in ("instructions", "ref_audio", "ref_text"):
            _check_optional_str(name, getattr(self, name))
        _check_choice("response_format", self.response_format, RESPONSE_FORMATS, optional=False)
        _check_choice("split_granularity", self.split_granularity, SPLIT_GRANULARITIES, optional=True)
        _check_choice("task_type", self.task_type, TASK_TYPES, optional=True)
        if not isinstance(self.stream_audio, bool):
            raise _config_error(f"stream_audio must be true or false, got {self.stream_audio!r}")
        for name in ("x_vector_only_mode", "non_streaming_mode", "word_timestamps"):
            _check_optional_bool(name, getattr(self, name))
        _check_optional_int("max_new_tokens", self.max_new_tokens, 1)
        _check_optional_int("initial_codec_chunk_frames", self.initial_codec_chunk_frames, 0)
        _check_optional_int("seed", self.seed, _INT64_MIN)
        if self.speed is not None:
            speed = self.speed
            if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed):
                raise _config_error(f"speed must be a number, got {speed!r}")
            if not MIN_SPEED <= speed <= MAX_SPEED:
                raise _config_error(f"speed must be in [{MIN_SPEED}, {MAX_SPEED}], got {speed}")
        if self.stream_audio:
            if self.response_format != "pcm":
                raise _config_error(f"stream_audio=true requires response_format 'pcm', got {self.response_format!r}")
            if self.speed is not None and self.speed != 1.0:
                raise _config_error(
                    f"stream_audio=true requires speed 1.0 (no speed change while streaming), got {self.speed}"
                )
        if self.word_timestamps and not (self.stream_audio and self.response_format == "pcm"):
            raise _config_error("word_timestamps=true requires stream_audio=true and 'pcm'")


def _json_char_chars(char: str) -> int:
    """Characters `char` takes inside a JSON string written with ensure_ascii=False."""
    if char in '"\\\b\f\n\r\t':
        return 2
    if char < " ":
        return 6  # \u00XX
    return 1


def _json_string_chars(text: str) -> int:
    return len(text) + sum(_json_char_chars(char) - 1 for char in text if char < " " or char in '"\\')


_INPUT_TEXT_OVERHEAD: Final = len('{"type":"input.text","text":""}')


@dataclass(frozen=True, slots=True)
class InputText:
    """`input.text`: appended to the utterance buffer. The whole encoded message must fit
    MAX_INPUT_TEXT_MESSAGE_CHARS (upstream drops a larger one); `input_text_messages` splits
    a long text losslessly."""

    type: ClassVar[str] = "input.text"
    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise VllmOmniError(
                VllmOmniErrorCode.INVALID_TEXT, f"text must be a string, got {type(self.text).__name__}"
            )
        _check_unicode("text", self.text, VllmOmniErrorCode.INVALID_TEXT)
        size = _INPUT_TEXT_OVERHEAD + _json_string_chars(self.text)
        if size > MAX_INPUT_TEXT_MESSAGE_CHARS:
            raise VllmOmniError(
                VllmOmniErrorCode.MESSAGE_TOO_LARGE,
                f"input.text would be {size} characters of JSON; vLLM-Omni drops messages over "
                f"{MAX_INPUT_TEXT_MESSAGE_CHARS}: split the text with input_text_messages()",
            )


@dataclass(frozen=True, slots=True)
class InputDone:
    """`input.done`: synthesize the buffered text; answered by `session.done`."""

    type: ClassVar[str] = "input.done"


@dataclass(frozen=True, slots=True)
class SessionClose:
    """`session.close`: the server closes the WebSocket."""

    type: ClassVar[str] = "session.close"


ClientMessage: TypeAlias = SessionConfig | InputText | InputDone | SessionClose


def encode_client_message(message: ClientMessage) -> str:
    """The JSON text of a client message (`type` first, unset fields omitted), to be sent in a
    TEXT frame / a UTF8 payload part. Raises VllmOmniError(MESSAGE_TOO_LARGE) past the limit."""
    body: dict[str, Any] = {"type": message.type}
    for spec in fields(message):
        value = getattr(message, spec.name)
        if value is not None:
            body[spec.name] = value
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    limit = MAX_CONFIG_MESSAGE_CHARS if isinstance(message, SessionConfig) else MAX_INPUT_TEXT_MESSAGE_CHARS
    if len(text) > limit:
        raise VllmOmniError(
            VllmOmniErrorCode.MESSAGE_TOO_LARGE,
            f"{message.type} is {len(text)} characters of JSON; vLLM-Omni accepts at most {limit}",
        )
    return text


def input_text_messages(text: str, max_message_chars: int = MAX_INPUT_TEXT_MESSAGE_CHARS) -> list[InputText]:
    """`text` as consecutive `input.text` messages that each fit `max_message_chars`.

    Lossless: upstream joins the texts of one utterance exactly as sent, so the pieces may cut
    anywhere (no separator is added). An empty text gives no message.
    """
    if not isinstance(text, str):
        raise VllmOmniError(VllmOmniErrorCode.INVALID_TEXT, f"text must be a string, got {type(text).__name__}")
    _check_unicode("text", text, VllmOmniErrorCode.INVALID_TEXT)
    budget = max_message_chars - _INPUT_TEXT_OVERHEAD
    if budget < 6:  # room for the widest escaped character
        raise ValueError(f"max_message_chars {max_message_chars} leaves no room for text")
    pieces: list[InputText] = []
    start = 0
    used = 0
    for index, char in enumerate(text):
        cost = _json_char_chars(char)
        if used + cost > budget:
            pieces.append(InputText(text[start:index]))
            start, used = index, 0
        used += cost
    if start < len(text):
        pieces.append(InputText(text[start:]))
    return pieces


# --- server -> client ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AudioStart:
    """`audio.start`: the audio of one request (a sentence, or the whole utterance) begins.

    `sample_rate` is present for streamed PCM (`channels` too on newer servers);
    `utterance_index` on servers that keep the connection across `input.done`."""

    sentence_index: int
    sentence_text: str
    format: str
    utterance_index: int | None = None
    sample_rate: int | None = None
    channels: int | None = None
    word_timestamps: bool = False


@dataclass(frozen=True, slots=True)
class WordTimestamp:
    word: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """`audio.chunk`: base64 PCM in JSON, only with `word_timestamps`. The last chunk of a
    sentence has no audio and carries the alignment (`timestamps`; None when it failed)."""

    sentence_index: int
    chunk_id: int
    audio: bytes
    utterance_index: int | None = None
    sample_rate: int | None = None
    channels: int | None = None
    chunk_start_ms: int | None = None
    chunk_end_ms: int | None = None
    timestamps: tuple[WordTimestamp, ...] | None = None


@dataclass(frozen=True, slots=True)
class AudioDone:
    """`audio.done`: the request's audio is complete (`error`: it failed; see the `error` before)."""

    sentence_index: int
    utterance_index: int | None = None
    total_bytes: int | None = None
    error: bool = False


@dataclass(frozen=True, slots=True)
class SessionDone:
    """`session.done`: the flushed utterance is complete (not the connection, on newer servers)."""

    total_sentences: int
    utterance_index: int | None = None


@dataclass(frozen=True, slots=True)
class ServerError:
    """`error`. `partial_audio` (with `action="discard"`): audio of the failed sentence was
    already sent and should be dropped."""

    message: str
    partial_audio: bool = False
    action: str | None = None

    @property
    def code(self) -> VllmOmniErrorCode:
        return classify_server_error(self.message)

    def ends_session(self, configured: bool) -> bool:
        """Whether the server closes the connection after this error: every error does before
        the first valid session.config; afterwards only timeouts and internal failures."""
        return not configured or self.code in _FATAL_WHEN_CONFIGURED


ServerMessage: TypeAlias = AudioStart | AudioChunk | AudioDone | SessionDone | ServerError


def _malformed(message: str) -> VllmOmniError:
    return VllmOmniError(VllmOmniErrorCode.MALFORMED_MESSAGE, message)


def _int(body: dict[str, Any], name: str, *, required: bool = True, minimum: int = 0) -> int | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _malformed(f"{body.get('type')}: {name} must be an integer >= {minimum}, got {value!r}")
    return value


def _str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise _malformed(f"{body.get('type')}: {name} must be a string, got {value!r}")
    return value


def _bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise _malformed(f"{body.get('type')}: {name} must be true or false, got {value!r}")
    return value


def _timestamps(body: dict[str, Any]) -> tuple[WordTimestamp, ...] | None:
    value = body.get("timestamps")
    if value is None:
        return None
    if not isinstance(value, list):
        raise _malformed(f"audio.chunk: timestamps must be a list or null, got {value!r}")
    words: list[WordTimestamp] = []
    for item in value:
        if not isinstance(item, dict):
            raise _malformed(f"audio.chunk: a timestamp must be an object, got {item!r}")
        word, start, end = item.get("word"), item.get("start_ms"), item.get("end_ms")
        if not isinstance(word, str) or not _is_number(start) or not _is_number(end):
            raise _malformed(f"audio.chunk: a timestamp needs word, start_ms and end_ms, got {item!r}")
        assert isinstance(start, (int, float)) and isinstance(end, (int, float))
        words.append(WordTimestamp(word=word, start_ms=float(start), end_ms=float(end)))
    return tuple(words)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _audio_b64(body: dict[str, Any]) -> bytes:
    value = body.get("audio_b64", "")
    if not isinstance(value, str):
        raise _malformed(f"audio.chunk: audio_b64 must be a string, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _malformed(f"audio.chunk: audio_b64 is not base64: {exc}") from exc


def parse_server_message(payload: str) -> ServerMessage:
    """A server text frame as a typed message. Extra fields are ignored (upstream adds some
    over time); missing or mistyped required ones raise MALFORMED_MESSAGE, an unknown `type`
    UNKNOWN_MESSAGE (safe to skip)."""
    try:
        body = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise _malformed(f"not JSON: {exc.msg} (at {exc.pos}): {payload[:120]!r}") from exc
    if not isinstance(body, dict):
        raise _malformed(f"not a JSON object: {payload[:120]!r}")
    kind = body.get("type")
    if not isinstance(kind, str):
        raise _malformed(f"no string 'type': {payload[:120]!r}")
    if kind == "audio.start":
        return AudioStart(
            sentence_index=_require(_int(body, "sentence_index")),
            sentence_text=_str(body, "sentence_text"),
            format=_str(body, "format"),
            utterance_index=_int(body, "utterance_index", required=False),
            sample_rate=_int(body, "sample_rate", required=False, minimum=1),
            channels=_int(body, "channels", required=False, minimum=1),
            word_timestamps=_bool(body, "word_timestamps"),
        )
    if kind == "audio.chunk":
        return AudioChunk(
            sentence_index=_require(_int(body, "sentence_index")),
            chunk_id=_require(_int(body, "chunk_id")),
            audio=_audio_b64(body),
            utterance_index=_int(body, "utterance_index", required=False),
            sample_rate=_int(body, "sample_rate", required=False, minimum=1),
            channels=_int(body, "channels", required=False, minimum=1),
            chunk_start_ms=_int(body, "chunk_start_ms", required=False),
            chunk_end_ms=_int(body, "chunk_end_ms", required=False),
            timestamps=_timestamps(body),
        )
    if kind == "audio.done":
        return AudioDone(
            sentence_index=_require(_int(body, "sentence_index")),
            utterance_index=_int(body, "utterance_index", required=False),
            total_bytes=_int(body, "total_bytes", required=False),
            error=_bool(body, "error"),
        )
    if kind == "session.done":
        return SessionDone(
            total_sentences=_require(_int(body, "total_sentences")),
            utterance_index=_int(body, "utterance_index", required=False),
        )
    if kind == "error":
        action = body.get("action")
        if action is not None and not isinstance(action, str):
            raise _malformed(f"error: action must be a string, got {action!r}")
        return ServerError(message=_str(body, "message"), partial_audio=_bool(body, "partial_audio"), action=action)
    raise VllmOmniError(VllmOmniErrorCode.UNKNOWN_MESSAGE, f"unknown server message type {kind!r}")


def _require(value: int | None) -> int:
    assert value is not None  # _int(required=True) never returns None
    return value


def pcm_duration_ms(audio_bytes: int, sample_rate: int = DEFAULT_SAMPLE_RATE, channels: int = 1) -> float:
    """Milliseconds of s16le PCM in `audio_bytes` bytes."""
    if sample_rate <= 0 or channels <= 0:
        raise ValueError(f"sample_rate and channels must be positive, got {sample_rate}, {channels}")
    return audio_bytes / (PCM_SAMPLE_WIDTH * channels * sample_rate) * 1000.0
