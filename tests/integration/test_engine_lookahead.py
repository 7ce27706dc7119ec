"""A long piece's head encoded first (engine/streaming/lookahead.py): the join's arithmetic and its gate.

Real Kokoro-82M int8 model. What the lookahead may change, it must change little:
- the head's words: durations within 1 frame per word on average of the whole encoding's, and
  mean pitch per word within 1 semitone (median over words);
- the join: the pitch step across it no larger than the sentence's own steps between voiced
  points (95th percentile), and the windows around it pass the same seam gate as any seam;
- hearing: the WER gate of test_engine_onnx_streaming.py runs these sentences through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from tests.support.long_sentences import LONG_SENTENCES
from tests.support.seams import MAX_SEAM_EXCESS_DB, compare
from voicestream.engine.onnx.engine import DEFAULT_LOOKAHEAD, DEFAULT_WINDOWS, OnnxEngine
from voicestream.engine.onnx.runtime import SentenceFeatures, join
from voicestream.engine.streaming.lookahead import HeadSplit, frames_before, head_split
from voicestream.engine.streaming.pipeline import decode_windows_after_head
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME, plan_windows
from voicestream.engine.streaming.word_timings import TokenWord, tokenize, word_frames

# One sentence's seams may be past the gate's mean (below), not by far: a window cut off too short
# puts 4 dB or more near every seam (benchmarks/seam_margins.py).
MAX_SENTENCE_SEAM_EXCESS_DB = 1.5
SENTENCES = LONG_SENTENCES
# The seam gate decodes each sentence three times (the lookahead's windows, plain windows, whole):
# two of the five sentences keep it to a few minutes on the slowest class (measured there, the
# lookahead 0.44 and 0.61 dB, plain windows 1.54 and 0.38); benchmarks/seam_margins.py measures
# the plans over 81 sentences.
SEAM_SENTENCES = LONG_SENTENCES[:2]


@dataclass
class Encoded:
    ids: list[int]
    words: list[TokenWord]
    split: HeadSplit
    head: SentenceFeatures
    whole: SentenceFeatures
    joined: SentenceFeatures


@functools.cache
def encode(engine: OnnxEngine, text: str) -> Encoded:
    """Cached for the module (the engine is loaded once): encoding is deterministic."""
    (piece,) = engine.phoneme_pieces(text, "af_heart")
    ids, words = tokenize(piece, engine._vocab)
    style = engine._voice("af_heart")[len(ids) - 1 : len(ids)]
    split = head_split(ids, DEFAULT_LOOKAHEAD)
    assert split is not None
    head = engine.split.encode(ids[: split.end], style, 1.0)
    whole = engine.split.encode(ids, style, 1.0)
    return Encoded(ids, words, split, head, whole, join(head, whole, split.join))


def test_the_joined_features_take_the_head_then_the_whole_without_a_phase_jump(engine: OnnxEngine) -> None:
    encoded = encode(engine, SENTENCES[0])
    head, whole, joined, token = encoded.head, encoded.whole, encoded.joined, encoded.split.join
    at_head, at_whole = frames_before(head.durations, token), frames_before(whole.durations, token)
    assert joined.frames == at_head + whole.frames - at_whole == int(joined.durations.sum())
    assert joined.durations.shape == whole.durations.shape
    assert np.array_equal(joined.asr[:, :, :at_head], head.asr[:, :, :at_head])
    assert np.array_equal(joined.asr[:, :, at_head:], whole.asr[:, :, at_whole:])
    assert np.array_equal(joined.f0[:, 2 * at_head :], whole.f0[:, 2 * at_whole :])
    # The running phase continues with the whole encoding's own increments.
    increments = np.diff(joined.phase[0].astype(np.float64), axis=1)
    expected = np.diff(whole.phase[0].astype(np.float64), axis=1)[:, 2 * at_whole - 1 :]
    np.testing.assert_allclose(increments[:, 2 * at_head - 1 :], expected, atol=0.05)


def returning(features: SentenceFeatures) -> Callable[[], SentenceFeatures]:
    return lambda: features


def semitones(a: float, b: float) -> float:
    return float(12 * abs(np.log2(a / b)))


def test_head_words_keep_the_whole_encodings_timing_and_pitch(engine: OnnxEngine) -> None:
    duration_differences: list[float] = []
    pitch_differences: list[float] = []
    for text in SENTENCES:
        encoded = encode(engine, text)
        head_words = [word for word in encoded.words if word.end <= encoded.split.join]
        assert len(head_words) >= 5
        joined = word_frames(head_words, encoded.joined.durations)
        whole = word_frames(head_words, encoded.whole.durations)
        for (_, start_j, end_j), (_, start_w, end_w) in zip(joined, whole, strict=True):
            duration_differences.append(abs((end_j - start_j) - (end_w - start_w)))
            pitch_j, pitch_w = (
                encoded.joined.f0[0, 2 * start_j : 2 * end_j],
                encoded.whole.f0[0, 2 * start_w : 2 * end_w],
            )
            voiced_j, voiced_w = pitch_j[pitch_j > 30], pitch_w[pitch_w > 30]
            if len(voiced_j) and len(voiced_w):
                pitch_differences.append(semitones(float(voiced_j.mean()), float(voiced_w.mean())))
    print(
        f"head words: mean |duration difference| {np.mean(duration_differences):.2f} frames, "
        f"median |pitch difference| {np.median(pitch_differences):.2f} semitones"
    )
    assert float(np.mean(duration_differences)) <= 1.0
    assert float(np.median(pitch_differences)) <= 1.0


def test_the_pitch_does_not_step_at_the_join_more_than_the_sentence_does(engine: OnnxEngine) -> None:
    for text in SENTENCES:
        encoded = encode(engine, text)
        f0 = encoded.joined.f0[0]
        at = 2 * frames_before(encoded.head.durations, encoded.split.join)
        steps = [semitones(f0[i + 1], f0[i]) for i in range(len(f0) - 1) if min(f0[i], f0[i + 1]) > 30]
        around = [semitones(f0[i + 1], f0[i]) for i in range(at - 2, at + 2) if min(f0[i], f0[i + 1]) > 30]
        print(f"join step {max(around, default=0.0):.2f} st, the sentence's p95 {np.percentile(steps, 95):.2f} st")
        assert max(around, default=0.0) <= float(np.percentile(steps, 95))


@pytest.mark.slow
def test_windows_across_the_join_pass_the_seam_gate_like_plain_windows(engine: OnnxEngine) -> None:
    """Against the joined features decoded whole: the lookahead's windows (the head's, then the
    joined features') are as good at their seams as plain windows over the same features."""
    head_excess, plain_excess = [], []
    for text in SEAM_SENTENCES:
        encoded = encode(engine, text)
        at = frames_before(encoded.head.durations, encoded.split.join)
        decoded = list(
            decode_windows_after_head(engine.split, encoded.head, at, returning(encoded.joined), DEFAULT_WINDOWS)
        )
        switch = next(index for index, window in enumerate(decoded) if window.features is encoded.joined)
        assert switch > 0 and decoded[switch].window.start < at < decoded[switch].window.end  # the join in a core
        reference = np.concatenate(list(engine.split.stream(encoded.joined, None)))
        audio = np.concatenate([window.samples for window in decoded])
        head = compare(audio, reference, [window.window.end * SAMPLES_PER_FRAME for window in decoded[:-1]])
        plain_windows = plan_windows(encoded.joined.frames, DEFAULT_WINDOWS)
        plain_audio = np.concatenate(list(engine.split.stream(encoded.joined, DEFAULT_WINDOWS)))
        plain = compare(plain_audio, reference, [w.end * SAMPLES_PER_FRAME for w in plain_windows[:-1]])
        print(
            f"seam excess: lookahead {head.seam_excess_db:.2f} dB, plain {plain.seam_excess_db:.2f} dB; steps "
            f"{head.seam_step_ratio:.2f} / {plain.seam_step_ratio:.2f}"
        )
        assert head.passes(max_seam_excess_db=MAX_SENTENCE_SEAM_EXCESS_DB)
        head_excess.append(head.seam_excess_db)
        plain_excess.append(plain.seam_excess_db)
    # The gate (1 dB) holds over the sentences, not for each: a sentence has only 4-7 seams, so one
    # seam moves its mean by tenths of a dB either way, with where the seams fall (measured: plain
    # -0.13 and 0.95 dB on two of them, the lookahead 0.52 on both; over 81 sentences the default
    # plan is past 1 dB on 18 of them and the plan before it on 27: docs/engine-evidence.md).
    assert float(np.mean(head_excess)) <= MAX_SEAM_EXCESS_DB
    assert float(np.mean(head_excess)) <= float(np.mean(plain_excess)) + 0.25


def test_the_engine_speaks_the_joined_features(engine: OnnxEngine) -> None:
    encoded = encode(engine, SENTENCES[2])
    chunks = list(engine.synthesize(SENTENCES[2]))
    first = int(encoded.head.durations[0, 0]) - 4  # the lead-in kept
    assert sum(len(chunk.samples) for chunk in chunks) == (encoded.joined.frames - first) * SAMPLES_PER_FRAME
