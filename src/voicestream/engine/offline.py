"""Offline synthesis of whole texts with timings: what `voicestream say` and the engine benchmark run."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from voicestream.engine.base import FloatAudio, SpeechEngine
from voicestream.engine.text.options import TextOptions
from voicestream.wire.bidi import SAMPLE_RATE


@dataclass(frozen=True, slots=True)
class TimedSynthesis:
    """The audio of some pieces, with when the first chunk came and how long it all took."""

    audio: FloatAudio
    first_chunk_s: float
    total_s: float

    @property
    def audio_s(self) -> float:
        return len(self.audio) / SAMPLE_RATE

    @property
    def real_time_factor(self) -> float:
        """Compute seconds per audio second: below 1 is faster than real time."""
        return self.total_s / self.audio_s if self.audio_s else float("inf")


def synthesize_timed(
    engine: SpeechEngine,
    pieces: list[str],
    voice: str = "af_heart",
    speed: float = 1.0,
    text_options: TextOptions = TextOptions(),  # noqa: B008  # frozen: one shared default is safe
) -> TimedSynthesis:
    """Synthesize the pieces in order, timing the first chunk and the whole run."""
    started = time.perf_counter()
    first_chunk_s: float | None = None
    chunks: list[FloatAudio] = []
    for piece in pieces:
        for chunk in engine.synthesize(piece, voice=voice, speed=speed, text_options=text_options):
            if first_chunk_s is None:
                first_chunk_s = time.perf_counter() - started
            chunks.append(chunk.samples)
    total_s = time.perf_counter() - started
    audio = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return TimedSynthesis(audio=audio, first_chunk_s=first_chunk_s or total_s, total_s=total_s)
