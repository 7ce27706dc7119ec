"""What every deploy-validate check shares: its settings, one check's result, and the test of
whether an amount of audio is plausible for a text. validate.py runs Kokoro's checks,
validate_vllm_omni.py a Qwen3-TTS endpoint's; both build on this module (neither on the other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicestream.speech import SPEECH_MODELS, SpeechModel

DEFAULT_SENTENCES = (
    "The endpoint is up and speaking.",
    "This second sentence shares the same session.",
    "And a third one proves the session stays open.",
)
DEFAULT_INVOCATION_TEXT = "Streaming through the invocations route works too."
EXPECTED_DEVICES = ("cpu", "cuda")
# Speech lasts roughly 50-90 ms per character; the bounds catch silence, truncation and babble.
MIN_MS_PER_CHAR = 15.0
MAX_MS_PER_CHAR = 250.0


@dataclass(frozen=True)
class ValidationSettings:
    endpoint_name: str
    region: str
    sentences: tuple[str, ...] = DEFAULT_SENTENCES
    invocation_text: str = DEFAULT_INVOCATION_TEXT
    connect_timeout_s: float = 60.0
    silence_timeout_s: float = 60.0
    expected_device: str | None = None  # None: the device is reported, not checked
    speech_model: SpeechModel = "kokoro"

    @classmethod
    def from_event(cls, event: Mapping[str, Any], default_region: str) -> ValidationSettings:
        name = event.get("endpoint_name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"the event needs a non-empty 'endpoint_name', got {name!r}")
        device = event.get("expected_device") or None
        if device is not None and device not in EXPECTED_DEVICES:
            raise ValueError(f"'expected_device' must be one of {', '.join(EXPECTED_DEVICES)}, got {device!r}")
        model = event.get("speech_model") or "kokoro"
        if model not in SPEECH_MODELS:
            raise ValueError(f"'speech_model' must be one of {', '.join(SPEECH_MODELS)}, got {model!r}")
        sentences = tuple(event.get("sentences") or DEFAULT_SENTENCES)
        if len(sentences) < 2 or not all(isinstance(s, str) and s.strip() for s in sentences):
            raise ValueError("'sentences' must be at least two non-empty strings")
        return cls(
            endpoint_name=name,
            region=str(event.get("region") or default_region),
            sentences=sentences,
            invocation_text=str(event.get("invocation_text") or DEFAULT_INVOCATION_TEXT),
            connect_timeout_s=float(event.get("connect_timeout_s", 60.0)),
            silence_timeout_s=float(event.get("silence_timeout_s", 60.0)),
            expected_device=device,
            speech_model=model,
        )


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    seconds: float
    data: dict[str, Any] = field(default_factory=dict)


def plausible_audio(text: str, audio_ms: float) -> str | None:
    """None when `audio_ms` of speech is plausible for `text`, else what is wrong with it."""
    low, high = len(text) * MIN_MS_PER_CHAR, len(text) * MAX_MS_PER_CHAR
    if audio_ms < low:
        return f"{audio_ms:.0f} ms of audio for {len(text)} characters is too short (< {low:.0f} ms)"
    if audio_ms > high:
        return f"{audio_ms:.0f} ms of audio for {len(text)} characters is too long (> {high:.0f} ms)"
    return None


def not_run(names: Sequence[str], why: str) -> list[Check]:
    return [Check(name, False, f"not run: {why}", 0.0) for name in names]
