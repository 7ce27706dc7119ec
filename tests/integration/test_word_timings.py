"""Word timings from the real engine against Whisper's word timestamps, on a benchmark text:
the median |start difference| of the words both agree on is at most 80 ms.
The aligner itself is tested in tests/unit/test_word_alignment.py; benchmarks/word_timings.py
records the same numbers on both bench texts (the second, the six-sentence agent reply, took
minutes of the slowest hosts' suite for the same verdict).
"""

from __future__ import annotations

from types import ModuleType

from tests.support.server import LiveServer
from tests.support.timed_speech import timed_speech
from tests.support.word_alignment import align
from voicestream.texts import bench_texts

MAX_MEDIAN_START_ERROR_S = 0.080


async def test_word_starts_agree_with_whisper(kokoro_server: LiveServer, asr: ModuleType) -> None:
    text = bench_texts()["paragraph_4_sentences"]
    audio, words = await timed_speech(kokoro_server.ws_url, text)
    assert words, "the engine sent no word timings"
    alignment = align(words, asr.transcribe_words(audio))
    assert alignment.matched_share >= 0.8, alignment
    assert alignment.median_start_error_s() <= MAX_MEDIAN_START_ERROR_S
