"""The body of POST /speak, validated: anything wrong is a `ProtocolError` (a clear 4xx).

    {"prompt": "...",  or  "text": "...",       exactly one
     "mode": "bidi" | "batch",                   default bidi
     "transport": "sse" | "binary",              default sse
     "format": "pcm" | "wav" | "mp3" | "mulaw" | "alaw",   default pcm
     "sample_rate": 8000 ... 48000,              default the format's (8000 G.711, else 24000)
     "voice": "af_heart", "speed": 1.0,          optional, the speech server checks the voice
     "pace": {"first_token_ms": 300, "tokens_per_s": 50}}   optional: replay timing

Unknown fields are rejected rather than ignored, so a typo ("mdoe") is not silently a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, get_args

from voicestream.wire.bidi import (
    FORMATS,
    MAX_VOICE_CHARS,
    SAMPLE_RATE,
    AudioFormat,
    Limits,
    default_sample_rate,
    parse_sample_rate,
    parse_speed,
)
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.framing import RESPONSE_TRANSPORTS, ResponseTransport, decode_json_object, json_number
from voicestream.wire.speak import Mode

from .sources import ReplayPace

MAX_BODY_BYTES: Final = 64 * 1024
# Seconds a caller may take to send the body (the function URL buffers it; locally it is a socket).
BODY_TIMEOUT_S: Final = 10.0
MAX_PROMPT_CHARS: Final = 8000
# A text is spoken as it is; batch mode sends it as one request, so the speech server's
# per-request limit applies.
MAX_TEXT_CHARS: Final = Limits().max_text_chars
_FIELDS: Final = frozenset({"prompt", "text", "mode", "transport", "format", "voice", "speed", "pace", "sample_rate"})
_PACE_FIELDS: Final = frozenset({"first_token_ms", "tokens_per_s"})


@dataclass(frozen=True, slots=True)
class SpeakRequest:
    prompt: str | None = None
    text: str | None = None
    mode: Mode = "bidi"
    transport: ResponseTransport = "sse"
    format: AudioFormat = "pcm"
    voice: str | None = None
    speed: float | None = None
    pace: ReplayPace | None = None
    sample_rate: int = SAMPLE_RATE  # resolved: the body's, else the format's default


def parse_speak_request(raw: bytes) -> SpeakRequest:
    if len(raw) > MAX_BODY_BYTES:
        raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"the body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    body = decode_json_object(raw, "the body")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise ProtocolError(
            ErrorCode.UNKNOWN_FIELD, f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}"
        )
    prompt, text = body.get("prompt"), body.get("text")
    if (prompt is None) == (text is None):
        raise ProtocolError(ErrorCode.MISSING_INPUT, 'give exactly one of "prompt" (the agent replies) or "text"')
    audio_format = _choice(body, "format", FORMATS, "pcm", ErrorCode.INVALID_FORMAT)
    rate = body.get("sample_rate")
    return SpeakRequest(
        prompt=_prompt(body.get("prompt")),
        text=_text(body.get("text")),
        mode=_choice(body, "mode", get_args(Mode), "bidi", ErrorCode.INVALID_MODE),
        transport=_choice(body, "transport", RESPONSE_TRANSPORTS, "sse", ErrorCode.INVALID_TRANSPORT),
        format=audio_format,
        sample_rate=default_sample_rate(audio_format) if rate is None else parse_sample_rate(rate, '"sample_rate"'),
        voice=_voice(body),
        speed=None if body.get("speed") is None else parse_speed(body["speed"], '"speed"'),
        pace=_pace(body),
    )


def _prompt(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.INVALID_PROMPT, f'"prompt" must be a string, got {type(value).__name__}')
    if not any(ch.isalnum() for ch in value):
        raise ProtocolError(ErrorCode.EMPTY_PROMPT, '"prompt" has no words to answer')
    if len(value) > MAX_PROMPT_CHARS:
        raise ProtocolError(
            ErrorCode.PROMPT_TOO_LONG, f'"prompt" has {len(value)} characters; the limit is {MAX_PROMPT_CHARS}'
        )
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.MISSING_TEXT, f'"text" must be a string, got {type(value).__name__}')
    if not any(ch.isalnum() for ch in value):
        raise ProtocolError(ErrorCode.EMPTY_TEXT, '"text" has no words to speak')
    if len(value) > MAX_TEXT_CHARS:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG, f'"text" has {len(value)} characters; the limit is {MAX_TEXT_CHARS}'
        )
    return value


def _choice(body: dict[str, Any], name: str, allowed: tuple[str, ...], default: str, code: ErrorCode) -> Any:
    value = body.get(name, default)
    if value not in allowed:
        raise ProtocolError(code, f'"{name}" must be one of {", ".join(allowed)}, got {value!r}')
    return value


def _voice(body: dict[str, Any]) -> str | None:
    voice = body.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, str) or not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise ProtocolError(ErrorCode.INVALID_VOICE, f'"voice" must be a voice id, got {voice!r}')
    return voice


def _pace(body: dict[str, Any]) -> ReplayPace | None:
    pace = body.get("pace")
    if pace is None:
        return None
    if not isinstance(pace, dict) or set(pace) - _PACE_FIELDS:
        raise ProtocolError(ErrorCode.INVALID_PACE, '"pace" must be {"first_token_ms": n, "tokens_per_s": n}')
    first = json_number(pace.get("first_token_ms", 300))
    rate = json_number(pace.get("tokens_per_s", 50))
    try:
        if first is None or rate is None:
            raise ValueError("numbers expected")
        return ReplayPace(first_token_s=first / 1000, tokens_per_s=rate)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_PACE, f'"pace" is out of range: {exc}') from None
