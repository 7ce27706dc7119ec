"""The seam gate's measures (tests/support/seams.py) on signals whose seams are known: the gate must
be able to fail, at the thresholds the engine tests use."""

from __future__ import annotations

import numpy as np

from tests.support.seams import MAX_SEAM_EXCESS_DB, MAX_STEP_RATIO, compare
from voicestream.wire.bidi import SAMPLE_RATE

SEAM = SAMPLE_RATE // 2  # half a second in


def voiced(seconds: float = 1.0, phase: float = 0.0) -> np.ndarray:
    """A voice-like signal: a 150 Hz fundamental with two harmonics."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return sum((0.5 / k) * np.sin(2 * np.pi * 150 * k * t + phase * k) for k in (1, 2, 3)).astype(np.float32)  # type: ignore[union-attr]


def test_a_seamless_join_passes() -> None:
    whole = voiced()
    report = compare(whole.copy(), whole, [SEAM])
    assert report.seam_step_ratio < 1.0 and abs(report.seam_excess_db) < 0.01
    assert report.passes()


def test_a_hard_cut_steps_past_the_gate() -> None:
    whole = voiced()
    cut = np.concatenate([whole[:SEAM], voiced(phase=np.pi / 2)[SEAM:]])  # resumed a quarter cycle on
    report = compare(cut, whole, [SEAM])
    assert report.seam_step_ratio > 3 * MAX_STEP_RATIO
    assert not report.passes()


def test_a_seam_whose_neighbourhood_differs_fails_on_excess() -> None:
    whole = voiced()
    smeared = whole.copy()
    around = slice(SEAM - SAMPLE_RATE // 40, SEAM + SAMPLE_RATE // 40)  # 25 ms either side
    smeared[around] *= 0.3  # 10 dB quieter near the seam, nowhere else, without a step
    report = compare(smeared, whole, [SEAM])
    assert report.seam_excess_db > MAX_SEAM_EXCESS_DB
    assert not report.passes()
