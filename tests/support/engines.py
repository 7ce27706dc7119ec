"""Engine doubles for the two things the real model cannot be made to do on demand.

They implement the real SpeechEngine interface (validation included) and are used only where
a test needs exact audio bytes or an engine fault; everything else runs the real model.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.text.options import TextOptions
from voicestream.wire.voices import OFFICIAL_VOICES


def pcm_to_exact_floats(pcm: bytes) -> np.ndarray:
    """Float samples whose 16-bit PCM (voicestream's rounding) is exactly `pcm` (no -32768)."""
    values = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert values.min(initial=0) > -32768, "-32768 is outside the clipped range"
    return (values / 32767.0).astype(np.float32)


class ScriptedEngine(SpeechEngine):
    """Speaks any text as the same crafted PCM bytes: lets a test choose the audio payload."""

    name = "scripted"

    def __init__(self, pcm: bytes) -> None:
        super().__init__()
        self.samples = pcm_to_exact_floats(pcm)

    def _load(self) -> None:
        pass

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        yield AudioChunk(samples=self.samples)


class FaultyEngine(SpeechEngine):
    """The real engine, except that a sentence containing `trigger` raises mid-stream."""

    name = "faulty"

    def __init__(self, real: SpeechEngine, trigger: str = "explode") -> None:
        super().__init__()
        self.real = real
        self.trigger = trigger

    def _load(self) -> None:
        self.real.load()

    def voices(self) -> tuple[str, ...]:
        return self.real.voices()

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return self.real.count_phonemes(texts, voice, text_options)

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        if self.trigger in text:
            raise RuntimeError(f"injected engine fault on {text!r}")
        return self.real.synthesize(text, voice, speed, text_options=text_options)
