"""Kokoro's 24 kHz audio at the rate a request asked for, one stateful resampler per request.

python-soxr's `ResampleStream` keeps its filter state from one chunk to the next, so a request
resampled chunk by chunk gives the same samples as its whole audio resampled at once (checked
in tests/unit/test_resample.py): no edge effect, no click where one engine chunk ends and the
next begins. Resampling each chunk on its own would pad its edges and step at every seam.

The price is the filter's delay: at soxr's HQ quality a chunk's last ~10-30 ms (depending on the
rate) come out with the next chunk, or with `finish()` at the end of the request.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatAudio = npt.NDArray[np.float32]

QUALITY = "HQ"  # soxr's high quality: -3 dB at ~0.98 of the lower Nyquist, stopband >= 100 dB


class StreamResampler:
    """`push` each chunk of float32 samples at `in_rate`, then `finish` once; identity when the
    rates are equal (no copy, no delay)."""

    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate = in_rate
        self.out_rate = out_rate
        self._stream = None
        if in_rate != out_rate:
            import soxr

            self._stream = soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality=QUALITY)
        self._finished = False

    def push(self, samples: FloatAudio) -> FloatAudio:
        audio = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if self._stream is None:
            return audio
        if self._finished:
            raise RuntimeError("the resampler was already finished")
        return np.asarray(self._stream.resample_chunk(audio), dtype=np.float32).reshape(-1)

    def finish(self) -> FloatAudio:
        """What the filter still holds (the last chunk's tail)."""
        if self._stream is None or self._finished:
            return np.zeros(0, dtype=np.float32)
        self._finished = True
        tail = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        return np.asarray(tail, dtype=np.float32).reshape(-1)
