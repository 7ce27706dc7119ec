"""The per-request resampler (kokoro_server/resample.py): the same samples however a request's audio is
cut into chunks, equal to resampling the whole at once, and no step at the chunk seams."""

from __future__ import annotations

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.seams import step_ratio
from voicestream.kokoro_server.resample import StreamResampler
from voicestream.wire.bidi import SAMPLE_RATE, SAMPLE_RATES

RATE = SAMPLE_RATE


def speechlike(seconds: float = 1.0, seed: int = 0) -> np.ndarray:
    """Voiced-speech-like audio: harmonics of a gliding pitch under a syllable-rate envelope,
    with some noise; loud at every seam, so a step there would show."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    pitch = 120 + 40 * np.sin(2 * np.pi * 1.3 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2
    audio = 0.25 * envelope * voiced + 0.01 * rng.standard_normal(len(t))
    return audio.astype(np.float32)


def resample_in_chunks(audio: np.ndarray, sizes: list[int], out_rate: int) -> np.ndarray:
    resampler = StreamResampler(RATE, out_rate)
    out, start = [], 0
    for size in sizes:
        out.append(resampler.push(audio[start : start + size]))
        start += size
    out.append(resampler.push(audio[start:]))
    out.append(resampler.finish())
    return np.concatenate(out)


@pytest.mark.parametrize("out_rate", SAMPLE_RATES)
def test_chunked_is_the_whole_resampled_at_once(out_rate: int) -> None:
    audio = speechlike()
    whole = soxr.resample(audio, RATE, out_rate, quality="HQ")
    chunked = resample_in_chunks(audio, [4800, 1, 333, 9600, 2401], out_rate)
    assert len(chunked) == len(whole) == round(len(audio) * out_rate / RATE)
    np.testing.assert_allclose(chunked, whole, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6000), max_size=12), st.sampled_from([8000, 16000, 44100]))
def test_the_same_output_however_the_input_is_chunked(sizes: list[int], out_rate: int) -> None:
    audio = speechlike(0.5, seed=1)
    reference = resample_in_chunks(audio, [], out_rate)
    np.testing.assert_allclose(resample_in_chunks(audio, sizes, out_rate), reference, atol=1e-6)


SEAM_SLACK = 0.05  # how much larger than the whole's own step ratio a seam's may be


def seams_step_beyond_the_whole(audio: np.ndarray, whole: np.ndarray, seams: list[int], rate: int) -> list[float]:
    """Per seam: its step ratio (tests/support/seams.py) minus the whole-resampled audio's there."""
    return [step_ratio(audio, seam, rate) - step_ratio(whole, seam, rate) for seam in seams]


def test_no_step_at_the_chunk_seams_while_chunks_resampled_alone_step() -> None:
    """The seam measure the engine's tests use (the sample step across a seam against the
    largest within 10 ms around it), compared with the whole audio resampled at once: the
    stateful stream makes no step the whole does not; the same chunks resampled one by one
    (each padded at its edges) do, so the measure sees a click where there is one."""
    audio = speechlike()
    chunk = 2400  # 100 ms at 24 kHz: a decoder window's order of size
    seams = [seam // 3 for seam in range(chunk, len(audio), chunk)]  # 24 kHz -> 8 kHz
    whole = soxr.resample(audio, RATE, 8000, quality="HQ")
    streamed = resample_in_chunks(audio, [chunk] * len(seams), 8000)
    alone = np.concatenate([soxr.resample(audio[s : s + chunk], RATE, 8000) for s in range(0, len(audio), chunk)])
    beyond_streamed = seams_step_beyond_the_whole(streamed, whole, seams, 8000)
    beyond_alone = seams_step_beyond_the_whole(alone, whole, seams, 8000)
    print(f"worst step beyond the whole's: streamed {max(beyond_streamed):.3f}, alone {max(beyond_alone):.3f}")
    assert max(beyond_streamed) <= SEAM_SLACK
    assert max(step_ratio(streamed, seam, 8000) for seam in seams) <= 1.0
    assert max(beyond_alone) > SEAM_SLACK


def test_the_same_rate_passes_the_samples_through() -> None:
    audio = speechlike(0.1)
    resampler = StreamResampler(RATE, RATE)
    assert resampler.push(audio) is not None and np.array_equal(resampler.push(audio), audio)
    assert len(resampler.finish()) == 0


def test_nothing_more_after_finish() -> None:
    resampler = StreamResampler(RATE, 8000)
    resampler.push(speechlike(0.1))
    assert len(resampler.finish()) > 0 and len(resampler.finish()) == 0
    with pytest.raises(RuntimeError, match="already finished"):
        resampler.push(speechlike(0.1))
