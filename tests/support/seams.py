"""How close chunked decoding is to whole-sentence decoding, and whether its seams show.

The int8 decoder normalises activations over the span it is given (instance norm in its AdaIN
layers, per-tensor dynamic quantization), so a window's samples differ from the whole
sentence's even where the window sees every frame it depends on; the waveform SNR between two
such renderings is ~10 dB whatever the context. What the context does decide is the seams.
So the gate compares log-mel spectra (phase-blind, as hearing largely is) and looks at seams:

- `seam_excess_db`: mean log-mel distance to the whole-sentence audio in the mel frames within
  50 ms of a seam, minus the same away from seams. Too little context makes a seam's
  neighbourhood much worse than the rest.
- `seam_step_ratio`: the sample step across each seam over the largest step within 10 ms
  around it (the signal's own neighbourhood). A hard cut (a waveform resumed at another level or
  phase) steps many times the signal's own steps; a seam decoded with context steps like its
  neighbourhood, on either side of 1 with the host's rounding (benchmarks/seam_margins.py).
- `log_mel_distance_db`: overall mean |log-mel difference| in loud frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import FloatAudio
from voicestream.wire.bidi import SAMPLE_RATE

N_FFT = 1024
HOP = 240  # 10 ms
N_MELS = 80
LOUD_RANGE_DB = 50.0  # frames within this many dB of the loudest count as speech


@cache
def _mel_filters() -> npt.NDArray[np.float64]:
    def to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)

    top = 2595.0 * np.log10(1.0 + (SAMPLE_RATE / 2) / 700.0)
    edges = to_hz(np.linspace(0.0, top, N_MELS + 2))
    bins = np.fft.rfftfreq(N_FFT, 1.0 / SAMPLE_RATE)
    filters = np.zeros((N_MELS, len(bins)))
    for index in range(N_MELS):
        low, centre, high = edges[index : index + 3]
        filters[index] = np.clip(np.minimum((bins - low) / (centre - low), (high - bins) / (high - centre)), 0, None)
    return filters


def log_mel(audio: FloatAudio) -> npt.NDArray[np.float64]:
    """[frames, N_MELS] log-mel power in dB, one frame every 10 ms."""
    padded = np.pad(audio.astype(np.float64), (N_FFT // 2, N_FFT // 2))
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * np.hanning(N_FFT), axis=1)) ** 2
    return 10.0 * np.log10(power @ _mel_filters().T + 1e-10)


def snr_db(audio: FloatAudio, reference: FloatAudio) -> float:
    error = np.sum((audio.astype(np.float64) - reference) ** 2)
    return float("inf") if error == 0 else float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / error))


# The gate's thresholds, with their margins measured over good and bad window plans on more than
# one host class (benchmarks/seam_margins.py, docs/engine.md "Quality gate"): a threshold placed
# where one host's numbers happen to fall fails on a host whose int8 kernels round otherwise.
MAX_SEAM_EXCESS_DB = 1.0  # windows without context put several dB near every seam
MAX_STEP_RATIO = 2.0  # a click steps far past it; a good seam near 1 on some hosts


@dataclass(frozen=True, slots=True)
class SeamReport:
    log_mel_distance_db: float
    seam_excess_db: float
    seam_step_ratio: float  # the worst seam
    snr_db: float

    def passes(self, max_seam_excess_db: float = MAX_SEAM_EXCESS_DB, max_step_ratio: float = MAX_STEP_RATIO) -> bool:
        return self.seam_excess_db <= max_seam_excess_db and self.seam_step_ratio <= max_step_ratio


def mel_distances(audio: FloatAudio, whole: FloatAudio) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Per 10 ms mel frame: the mean |log-mel difference| to the whole-sentence audio, and
    whether the frame is loud (speech) in the whole."""
    if len(audio) != len(whole):
        raise AssertionError(f"chunked audio has {len(audio)} samples, whole has {len(whole)}")
    chunked_mel, whole_mel = log_mel(audio), log_mel(whole)
    loud = whole_mel.max(axis=1) > whole_mel.max() - LOUD_RANGE_DB
    return np.abs(chunked_mel - whole_mel).mean(axis=1), loud


def compare(audio: FloatAudio, whole: FloatAudio, seams: list[int]) -> SeamReport:
    """`seams`: sample indices where one window's core ends and the next begins."""
    distance, loud = mel_distances(audio, whole)
    near = np.zeros(len(distance), dtype=bool)
    for seam in seams:
        centre = seam // HOP
        near[max(0, centre - 5) : centre + 6] = True
    excess = float(distance[near & loud].mean() - distance[~near & loud].mean()) if np.any(near & loud) else 0.0
    return SeamReport(
        log_mel_distance_db=float(distance[loud].mean()),
        seam_excess_db=excess,
        seam_step_ratio=max((_step_ratio(audio, seam) for seam in seams), default=0.0),
        snr_db=snr_db(audio, whole),
    )


def step_ratio(audio: FloatAudio, seam: int, sample_rate: int = SAMPLE_RATE) -> float:
    """`seam_step_ratio` at one seam of audio at any rate (the neighbourhood is +-10 ms)."""
    return _step_ratio(audio, seam, sample_rate // 100)


def _step_ratio(audio: FloatAudio, seam: int, half: int = SAMPLE_RATE // 100) -> float:
    steps = np.abs(np.diff(audio[max(0, seam - half) : seam + half].astype(np.float64)))
    at_seam = min(seam, half) - 1  # the step from sample seam-1 to seam
    neighbourhood = np.delete(steps, at_seam).max()
    return float(steps[at_seam] / max(neighbourhood, 1e-9))
