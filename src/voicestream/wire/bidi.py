"""The wire contract of the bidirectional session and of POST /invocations, written once.

Server, client, Lambda tasks and tests all import this module; docs/protocol.md describes the
same contract in prose. It is pure standard library on purpose: the Lambda functions import it
without numpy or the engine, and the engine takes its constants (sample rate, speed range)
from here.

Client -> server: one UTF-8 JSON object per WebSocket message, in a TEXT or a BINARY frame.
Server -> client: control frames are JSON objects (`encode_server_message`); everything else
is audio.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, TypeAlias, cast, get_args

from voicestream.wire.errors import ErrorCode, ErrorMessage, ProtocolError
from voicestream.wire.framing import RESPONSE_TRANSPORTS, ResponseTransport, decode_json_object, json_number
from voicestream.wire.pronunciation import Lexicon, lexicon_json, parse_lexicon, parse_phonemes
from voicestream.wire.words import WordTiming, parse_words, word_dicts

SAMPLE_RATE = 24_000  # Kokoro's own: every format's default except G.711's
DEFAULT_FORMAT = "pcm"
FORMATS: tuple[str, ...] = ("pcm", "wav", "mp3", "mulaw", "alaw")
# Output rates a request may ask for (`sample_rate`); the server resamples Kokoro's 24 kHz.
SAMPLE_RATES: tuple[int, ...] = (8000, 16000, 22050, 24000, 44100, 48000)
# G.711 (mu-law, A-law): raw 8-bit codes, one byte per sample, no header. Telephony runs them
# at 8 kHz, their default; the other rates are accepted too (wideband SIP trunks use 16 kHz).
G711_FORMATS: tuple[str, ...] = ("mulaw", "alaw")
G711_SAMPLE_RATE = 8000
# The routes SageMaker's sidecar (and every other client) calls on port 8080.
BIDI_PATH = "/invocations-bidirectional-stream"
INVOCATIONS_PATH = "/invocations"
PING_PATH = "/ping"
DEFAULT_VOICE = "af_heart"
MIN_SPEED = 0.5
MAX_SPEED = 2.0
MAX_REQUEST_ID_CHARS = 128
MAX_VOICE_CHARS = 256

AudioFormat = Literal["pcm", "wav", "mp3", "mulaw", "alaw"]
PCM_SAMPLE_WIDTH = 2  # bytes per sample of the 16-bit little-endian mono PCM on the wire
# Streaming WAV: the length is unknown when the header goes out, so both size fields hold the
# maximum (what ffmpeg and most streaming servers write); readers then read to end of stream.
WAV_UNKNOWN_SIZE = 0xFFFFFFFF


def wav_header(sample_rate: int = SAMPLE_RATE, data_size: int = WAV_UNKNOWN_SIZE) -> bytes:
    """The 44-byte RIFF/WAVE header of 16-bit mono PCM; the default sizes mean 'until the end'.
    Here, not in the engine, because clients add it too (a vLLM-Omni upstream streams raw PCM)."""
    riff_size = WAV_UNKNOWN_SIZE if data_size == WAV_UNKNOWN_SIZE else 36 + data_size
    byte_rate = sample_rate * PCM_SAMPLE_WIDTH
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, byte_rate, PCM_SAMPLE_WIDTH, 16)
        + b"data"
        + struct.pack("<I", data_size)
    )


def default_sample_rate(audio_format: str) -> int:
    """The rate a format is delivered at when the request names none: 8 kHz for G.711, else 24 kHz."""
    return G711_SAMPLE_RATE if audio_format in G711_FORMATS else SAMPLE_RATE


def audio_unit_bytes(audio_format: str) -> int:
    """The unit an audio frame may be split at: a 16-bit sample (pcm, wav) or a byte (the rest)."""
    return PCM_SAMPLE_WIDTH if audio_format in ("pcm", "wav") else 1


def parse_sample_rate(value: Any, name: str = "sample_rate") -> int:
    """One of SAMPLE_RATES; `ProtocolError` invalid_sample_rate otherwise (the one rate check)."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in SAMPLE_RATES:
        shown = (
            f"an integer of {len(str(value))} digits" if isinstance(value, int) and abs(value) > 10**9 else repr(value)
        )
        raise ProtocolError(
            ErrorCode.INVALID_SAMPLE_RATE,
            f"{name} must be one of {', '.join(map(str, SAMPLE_RATES))} (Hz), got {shown}",
        )
    return value


# --- limits -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-server limits; those a user sets are VOICESTREAM_<FIELD NAME> (voicestream.env)."""

    max_text_chars: int = 2000
    max_queued: int = 16
    max_session_s: float = 3600.0
    idle_timeout_s: float = 300.0
    max_sessions: int = 32
    frame_ms: int = 40
    max_message_bytes: int = 65_536
    # Audio buffered ahead of the socket per request: synthesis pauses when it is full.
    max_buffered_audio_s: float = 30.0
    mp3_bitrate_kbps: int = 48
    # The work of one request: its text's phonemes (prose is about one per character; digits,
    # symbols and letters spelled out expand it). Refused upfront with text_too_complex.
    max_phonemes: int = 5000
    # While requests are unfinished and nothing else was sent for this long, the server sends
    # `queued`, so that a client's silence timeout never mistakes a busy server for a dead one.
    keepalive_s: float = 5.0
    # Seconds a client may take to send a POST body (answered 408 request_timeout).
    body_timeout_s: float = 10.0
    # Requests waiting for or in their G2P work check, server-wide; one more is refused with
    # server_busy at once (fire-and-forget requests must not queue minutes of G2P ahead of everyone).
    max_g2p_queue: int = 32
    # Seconds a consumer may fall behind real time (the audio it has taken, played from when it
    # was sent) before its response or session is closed with slow_consumer: a client that reads
    # slower than it listens must not hold a session and its buffers for the session's hour.
    max_consumer_lag_s: float = 20.0

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"limit {spec.name} must be a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"limit {spec.name} must be a positive number, got {value!r}")
        if self.frame_ms > 1000:
            raise ValueError(f"limit frame_ms must be at most 1000, got {self.frame_ms}")


# --- client -> server ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synthesize:
    """Speak `text`. Unset fields fall back to the session's config, then to server defaults."""

    text: str
    request_id: str | None = None
    voice: str | None = None
    speed: float | None = None
    format: AudioFormat | None = None
    words: bool | None = None  # send `words` frames (word timings) for this request
    sample_rate: int | None = None  # Hz of the delivered audio (default: the format's)
    lexicon: Lexicon | None = None  # how words are said (wire/pronunciation.py)
    phonemes: bool | None = None  # True: `text` is Kokoro phonemes, sent as "phonemes" instead of "text"
    normalize: bool | None = None  # read agent text right (numbers, dates, markup ...; default true)
    type: ClassVar[str] = "synthesize"


@dataclass(frozen=True, slots=True)
class Config:
    """Defaults for the rest of the session (unset fields keep their current value)."""

    voice: str | None = None
    speed: float | None = None
    format: AudioFormat | None = None
    words: bool | None = None
    sample_rate: int | None = None
    lexicon: Lexicon | None = None  # replaces the session's lexicon ({} clears it)
    normalize: bool | None = None
    type: ClassVar[str] = "config"


@dataclass(frozen=True, slots=True)
class Append:
    """Streamed input: more text of the open utterance (`request_id` names it; see Flush).

    The server's sentence chunker cuts pieces out of it as soon as their end is certain, and
    each piece is queued as a request `<utterance id>.<n>` with the session's config."""

    text: str
    request_id: str | None = None
    type: ClassVar[str] = "append"


@dataclass(frozen=True, slots=True)
class Flush:
    """End the open utterance: its partial sentence is queued as its last piece (`flushed`)."""

    type: ClassVar[str] = "flush"


@dataclass(frozen=True, slots=True)
class Cancel:
    """Without `request_id`: drop everything. With one: drop that request (or streamed
    utterance) and every request sent after it; those sent before it go on."""

    request_id: str | None = None
    type: ClassVar[str] = "cancel"


@dataclass(frozen=True, slots=True)
class Ping:
    type: ClassVar[str] = "ping"


@dataclass(frozen=True, slots=True)
class Close:
    type: ClassVar[str] = "close"


ClientMessage: TypeAlias = Synthesize | Config | Append | Flush | Cancel | Ping | Close


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    """The JSON body of POST /invocations."""

    text: str
    voice: str | None = None
    speed: float | None = None
    format: AudioFormat = "pcm"
    transport: ResponseTransport = "binary"
    sample_rate: int = SAMPLE_RATE  # resolved: the body's, else the format's default
    lexicon: Lexicon = ()
    phonemes: bool = False  # `text` came as "phonemes": Kokoro phonemes, no G2P
    normalize: bool = True


# --- server -> client ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SynthesisStart:
    request_id: str
    format: str
    sample_rate: int
    voice: str
    type: ClassVar[str] = "synthesis_start"


@dataclass(frozen=True, slots=True)
class SynthesisComplete:
    """Closes one request. Times are milliseconds from when the server received the request."""

    request_id: str
    audio_bytes: int
    audio_ms: float
    first_audio_ms: float | None
    synth_ms: float
    type: ClassVar[str] = "synthesis_complete"


@dataclass(frozen=True, slots=True)
class Words:
    """Word timings of request `request_id`, in seconds from the start of ITS audio.

    Sent before the audio frames that speak them (a request may get several, in order)."""

    request_id: str
    words: tuple[WordTiming, ...]
    type: ClassVar[str] = "words"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Answers `cancel`: the requests it dropped, in order (empty: nothing was left to drop).
    `request_id` repeats the cancel's, so a client can tell which cancel this answers."""

    request_ids: tuple[str, ...]
    request_id: str | None = None
    type: ClassVar[str] = "cancelled"


@dataclass(frozen=True, slots=True)
class Flushed:
    """Answers `flush`: `request_id` is the utterance it ended (absent when none was open) and
    `request_ids` every request the utterance became, in order: it is done when the last of
    them is (its `synthesis_complete`, `error` or a place in a `cancelled`)."""

    request_ids: tuple[str, ...]
    request_id: str | None = None
    type: ClassVar[str] = "flushed"


@dataclass(frozen=True, slots=True)
class Pong:
    """Answers `ping`. `engine` and `device` say what the server synthesizes with (e.g. "torch" on
    "cuda"), so a client can check that an endpoint really runs where it was meant to."""

    engine: str | None = None
    device: str | None = None
    type: ClassVar[str] = "pong"


@dataclass(frozen=True, slots=True)
class SessionClosed:
    reason: str = "close"
    type: ClassVar[str] = "session_closed"


@dataclass(frozen=True, slots=True)
class Queued:
    """Keepalive: `request_id` is accepted and not finished, and nothing else was sent for
    `waited_ms` (it waits for a synthesis worker, or its synthesis is still running). A
    client counts it as progress for its silence timeout."""

    request_id: str
    waited_ms: float
    type: ClassVar[str] = "queued"


ServerMessage: TypeAlias = (
    SynthesisStart | SynthesisComplete | Words | ErrorMessage | Cancelled | Flushed | Pong | SessionClosed | Queued
)

_SERVER_TYPES: dict[str, type[ServerMessage]] = {
    cls.type: cls
    for cls in (SynthesisStart, SynthesisComplete, Words, ErrorMessage, Cancelled, Flushed, Pong, SessionClosed, Queued)
}


def server_message_dict(message: ServerMessage) -> dict[str, Any]:
    """The JSON object of a server message: `type` first, then its fields (None ones omitted)."""
    body: dict[str, Any] = {"type": message.type}
    for spec in fields(message):
        value = getattr(message, spec.name)
        if value is None:
            continue
        if isinstance(message, Words) and spec.name == "words":
            body["words"] = word_dicts(message.words)
            continue
        body[spec.name] = list(value) if isinstance(value, tuple) else value
    return body


def encode_server_message(message: ServerMessage) -> str:
    """JSON text of a control frame (compact, ASCII-safe)."""
    return json.dumps(server_message_dict(message), separators=(",", ":"))


def encode_client_message(message: ClientMessage) -> str:
    """The JSON text of a client message: `type` first, unset (None) fields omitted."""
    body: dict[str, Any] = {"type": message.type}
    for spec in fields(message):
        value = getattr(message, spec.name)
        if value is not None:
            body[spec.name] = lexicon_json(value) if spec.name == "lexicon" else value
    if body.pop("phonemes", None):
        body["phonemes"] = body.pop("text")
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def parse_server_message(payload: bytes | str) -> ServerMessage:
    """Decode a control frame the server sent (the client side of the contract)."""
    body = decode_json_object(payload)
    kind = body.get("type")
    cls = _SERVER_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown server message type {kind!r}")
    known = {spec.name for spec in fields(cls)}
    values = {key: value for key, value in body.items() if key in known}
    if cls is Cancelled or cls is Flushed:
        values["request_ids"] = tuple(values.get("request_ids") or ())
    if cls is Words:
        values["words"] = parse_words(values.get("words"), "words message's words")
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"malformed {kind} message: {exc}") from None


# --- parsing client messages -----------------------------------------------------------------


def parse_client_message(
    payload: bytes | str,
    limits: Limits | None = None,
    voices: tuple[str, ...] | None = None,
) -> ClientMessage:
    """Validate one client message. Raises ProtocolError with a stable code for anything wrong.

    `voices`, when given, are the engine's voice ids: plain voice names are checked against
    them here; blends (`a:0.7,b:0.3`) are left to the engine's own validation.
    """
    limits = limits or Limits()
    size = len(payload.encode("utf-8", "surrogatepass")) if isinstance(payload, str) else len(payload)
    if size > limits.max_message_bytes:
        raise ProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"message is {size} bytes; the limit is {limits.max_message_bytes}",
        )
    body = decode_json_object(payload)
    request_id = _optional_request_id(body)
    kind = body.get("type")
    if kind is None and ("text" in body or "phonemes" in body):
        kind = "synthesize"  # the seed sample's clients send a bare {"text": ...}
    try:
        if kind == "synthesize":
            text, phonemes = _text_or_phonemes(body, limits)
            return Synthesize(
                text=text,
                request_id=request_id,
                voice=_voice(body, voices),
                speed=_speed(body),
                format=_format(body),
                words=_flag(body, "words"),
                sample_rate=_sample_rate(body),
                lexicon=parse_lexicon(body.get("lexicon")),
                phonemes=phonemes or None,
                normalize=_flag(body, "normalize"),
            )
        if kind == "config":
            return Config(
                voice=_voice(body, voices),
                speed=_speed(body),
                format=_format(body),
                words=_flag(body, "words"),
                sample_rate=_sample_rate(body),
                lexicon=parse_lexicon(body.get("lexicon")),
                normalize=_flag(body, "normalize"),
            )
        if kind == "append":
            return Append(text=_append_text(body, limits), request_id=request_id)
        if kind == "flush":
            return Flush()
        if kind == "cancel":
            return Cancel(request_id=request_id)
        if kind == "ping":
            return Ping()
        if kind == "close":
            return Close()
    except ProtocolError as error:
        error.request_id = request_id
        raise
    if kind is None:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, 'message has no "type" (and no "text")', request_id)
    raise ProtocolError(
        ErrorCode.UNKNOWN_TYPE,
        f"unknown message type {kind!r}; expected synthesize, config, append, flush, cancel, ping or close",
        request_id,
    )


def parse_invocation_request(payload: bytes | str, limits: Limits | None = None) -> InvocationRequest:
    """Validate the JSON body of POST /invocations."""
    limits = limits or Limits()
    body = decode_json_object(payload)
    transport = body.get("transport", "binary")
    if transport not in RESPONSE_TRANSPORTS:
        raise ProtocolError(
            ErrorCode.INVALID_TRANSPORT,
            f"transport must be one of {', '.join(RESPONSE_TRANSPORTS)}, got {transport!r}",
        )
    audio_format = _format(body) or "pcm"
    text, phonemes = _text_or_phonemes(body, limits)
    return InvocationRequest(
        text=text,
        voice=_voice(body, None),
        speed=_speed(body),
        format=audio_format,
        transport=transport,
        sample_rate=_sample_rate(body) or default_sample_rate(audio_format),
        lexicon=parse_lexicon(body.get("lexicon")) or (),
        phonemes=phonemes,
        normalize=_flag(body, "normalize") is not False,
    )


def _optional_request_id(body: dict[str, Any]) -> str | None:
    value = body.get("request_id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ProtocolError(ErrorCode.INVALID_REQUEST_ID, "request_id must be a string")
    value = str(value)
    if not value or len(value) > MAX_REQUEST_ID_CHARS or not value.isprintable():
        raise ProtocolError(
            ErrorCode.INVALID_REQUEST_ID,
            f"request_id must be 1..{MAX_REQUEST_ID_CHARS} printable characters",
        )
    return value


def _text_or_phonemes(body: dict[str, Any], limits: Limits) -> tuple[str, bool]:
    """(what to say, whether it is phonemes): `text`, or `phonemes` instead of it (not both)."""
    if body.get("phonemes") is None:
        return _text(body, limits), False
    if body.get("text") is not None:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, 'give "text" or "phonemes", not both')
    return parse_phonemes(body["phonemes"], limits.max_phonemes), True


def _text(body: dict[str, Any], limits: Limits) -> str:
    if "text" not in body or body["text"] is None:
        raise ProtocolError(ErrorCode.MISSING_TEXT, 'message has no "text"')
    text = body["text"]
    if not isinstance(text, str):
        raise ProtocolError(ErrorCode.MISSING_TEXT, f'"text" must be a string, got {type(text).__name__}')
    if not text.strip():
        raise ProtocolError(ErrorCode.EMPTY_TEXT, '"text" is empty: nothing to speak')
    if len(text) > limits.max_text_chars:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f'"text" has {len(text)} characters; the limit is {limits.max_text_chars}',
        )
    return text


def _append_text(body: dict[str, Any], limits: Limits) -> str:
    """Streamed text: any string (an LLM token may be a lone space), within the text limit."""
    text = body.get("text")
    if not isinstance(text, str):
        shown = "none" if text is None else type(text).__name__
        raise ProtocolError(ErrorCode.MISSING_TEXT, f'append needs "text" (a string), got {shown}')
    if len(text) > limits.max_text_chars:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f'"text" has {len(text)} characters; the limit is {limits.max_text_chars}',
        )
    return text


def _voice(body: dict[str, Any], voices: tuple[str, ...] | None) -> str | None:
    voice = body.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, str) or not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise ProtocolError(ErrorCode.UNKNOWN_VOICE, f"voice must be a voice id, got {voice!r}")
    if voices is not None and ":" not in voice and "," not in voice and voice not in voices:
        raise ProtocolError(ErrorCode.UNKNOWN_VOICE, f"unknown voice {voice!r}")
    return voice


def _flag(body: dict[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{name} must be true or false, got {value!r}")


def _speed(body: dict[str, Any]) -> float | None:
    speed = body.get("speed")
    return None if speed is None else parse_speed(speed)


def parse_speed(value: Any, name: str = "speed") -> float:
    """A speaking rate within [MIN_SPEED, MAX_SPEED]; `ProtocolError` invalid_speed otherwise.

    The one speed check: the session, POST /invocations, POST /speak and the engine use it.
    An integer too large for a float (JSON allows any) is out of range, not a crash."""
    speed = json_number(value)
    if speed is None:
        shown = f"an integer of {len(str(value))} digits" if isinstance(value, int) else repr(value)
        raise ProtocolError(
            ErrorCode.INVALID_SPEED, f"{name} must be a number from {MIN_SPEED} to {MAX_SPEED}, got {shown}"
        )
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ProtocolError(ErrorCode.INVALID_SPEED, f"{name} must be between {MIN_SPEED} and {MAX_SPEED}, got {value}")
    return speed


def _sample_rate(body: dict[str, Any]) -> int | None:
    value = body.get("sample_rate")
    return None if value is None else parse_sample_rate(value)


def _format(body: dict[str, Any]) -> AudioFormat | None:
    value = body.get("format")
    if value is None:
        return None
    for known in get_args(AudioFormat):
        if value == known:
            return cast(AudioFormat, known)
    raise ProtocolError(ErrorCode.INVALID_FORMAT, f"format must be one of {', '.join(FORMATS)}, got {value!r}")
