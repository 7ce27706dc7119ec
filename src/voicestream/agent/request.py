"""The body of POST /speak, validated: anything wrong is a `SpeakRequestError` (a clear 4xx).

    {"prompt": "...",  or  "text": "...",       exactly one
     "mode": "bidi" | "batch",                   default bidi
     "transport": "sse" | "binary",              default sse
     "format": "pcm" | "wav" | "mp3",            default pcm
     "voice": "af_heart", "speed": 1.0,          optional, the speech server checks the voice
     "pace": {"first_token_ms": 300, "tokens_per_s": 50}}   optional: replay timing

Unknown fields are rejected rather than ignored, so a typo ("mdoe") is not silently a default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from voicestream.protocol import FORMATS, MAX_SPEED, MAX_VOICE_CHARS, MIN_SPEED, AudioFormat, Limits

from .events import Mode
from .sources import Pace

StreamTransport = Literal["sse", "binary"]

MAX_BODY_BYTES: Final = 64 * 1024
MAX_PROMPT_CHARS: Final = 8000
# A text is spoken as it is; batch mode sends it as one request, so the speech server's
# per-request limit applies.
MAX_TEXT_CHARS: Final = Limits().max_text_chars
_FIELDS: Final = frozenset({"prompt", "text", "mode", "transport", "format", "voice", "speed", "pace"})


class SpeakRequestError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class SpeakRequest:
    prompt: str | None = None
    text: str | None = None
    mode: Mode = "bidi"
    transport: StreamTransport = "sse"
    format: AudioFormat = "pcm"
    voice: str | None = None
    speed: float | None = None
    pace: Pace | None = None


def parse_speak_request(raw: bytes) -> SpeakRequest:
    if len(raw) > MAX_BODY_BYTES:
        raise SpeakRequestError(413, "body_too_large", f"the body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpeakRequestError(400, "invalid_utf8", "the body is not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise SpeakRequestError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise SpeakRequestError(400, "not_an_object", f"the body must be a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise SpeakRequestError(
            400, "unknown_field", f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_FIELDS))}"
        )
    prompt, text = body.get("prompt"), body.get("text")
    if (prompt is None) == (text is None):
        raise SpeakRequestError(400, "missing_input", 'give exactly one of "prompt" (the agent replies) or "text"')
    return SpeakRequest(
        prompt=_string(body, "prompt", MAX_PROMPT_CHARS),
        text=_string(body, "text", MAX_TEXT_CHARS),
        mode=_choice(body, "mode", ("bidi", "batch"), "bidi"),
        transport=_choice(body, "transport", ("sse", "binary"), "sse"),
        format=_choice(body, "format", FORMATS, "pcm"),
        voice=_voice(body),
        speed=_speed(body),
        pace=_pace(body),
    )


def _string(body: dict[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpeakRequestError(400, f"invalid_{name}", f'"{name}" must be a string, got {type(value).__name__}')
    if not any(ch.isalnum() for ch in value):
        raise SpeakRequestError(400, f"empty_{name}", f'"{name}" has no words to speak or answer')
    if len(value) > limit:
        raise SpeakRequestError(413, f"{name}_too_long", f'"{name}" has {len(value)} characters; the limit is {limit}')
    return value


def _choice(body: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> Any:
    value = body.get(name, default)
    if value not in allowed:
        raise SpeakRequestError(400, f"invalid_{name}", f'"{name}" must be one of {", ".join(allowed)}, got {value!r}')
    return value


def _voice(body: dict[str, Any]) -> str | None:
    voice = body.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, str) or not voice.strip() or len(voice) > MAX_VOICE_CHARS:
        raise SpeakRequestError(400, "invalid_voice", f'"voice" must be a voice id, got {voice!r}')
    return voice


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _speed(body: dict[str, Any]) -> float | None:
    if body.get("speed") is None:
        return None
    speed = _number(body["speed"])
    if speed is None or not MIN_SPEED <= speed <= MAX_SPEED:
        raise SpeakRequestError(
            400, "invalid_speed", f'"speed" must be a number from {MIN_SPEED} to {MAX_SPEED}, got {body["speed"]!r}'
        )
    return speed


def _pace(body: dict[str, Any]) -> Pace | None:
    pace = body.get("pace")
    if pace is None:
        return None
    if not isinstance(pace, dict) or set(pace) - {"first_token_ms", "tokens_per_s"}:
        raise SpeakRequestError(400, "invalid_pace", '"pace" must be {"first_token_ms": n, "tokens_per_s": n}')
    first = _number(pace.get("first_token_ms", 300))
    rate = _number(pace.get("tokens_per_s", 50))
    try:
        if first is None or rate is None:
            raise ValueError("numbers expected")
        return Pace(first_token_s=first / 1000, tokens_per_s=rate)
    except ValueError as exc:
        raise SpeakRequestError(400, "invalid_pace", f'"pace" is out of range: {exc}') from None
