"""The generator's harmonic source, computed so that it can be continued from a sample.

kokoro's `SourceModuleHnNSF` (with its `SineGen`) turns the pitch curve into the excitation the
iSTFTNet generator reads: nine harmonics of f0, each a sine whose phase is the running sum of its
frequency from the sentence's start, silenced where the frame is unvoiced, plus Gaussian noise,
mixed by one linear layer and a tanh. kokoro computes it for a whole sentence in one call, so a
piece whose head was encoded first (streaming/lookahead.py) could not have the whole encoding's
source continue the head's: the running sums would restart. This module computes the same
thing from the module's parameters, in steps that can start from a state:

- `cycles`: each harmonic's running phase in cycles at every pitch point (two per frame), the
  sum kept in float64. On the CPU torch sums a float32 cumsum in a float64 accumulator and
  rounds each output, so `cycles(f0).float()` is kokoro's sum bit for bit; and a continuation
  that starts its sum from the float64 value at the point before the join adds the same numbers
  to the same accumulator as the whole sum does, so its points are the whole sum's exactly
  (tests/torch/test_torch_source.py).
- `harmonics`: the voiced sines over samples [300 * start, ...) (kokoro's x300 linear
  upsampling of the phase, over the whole curve: the interpolation's weights are computed from
  sample indices, so an upsampling of only the tail, with its own indices, would round
  differently).
- `noise`, `excitation`: fresh Gaussian noise (white: nothing in it continues), the linear mix.

`whole(f0)` composes them in kokoro's order, drawing the random numbers kokoro draws in its
order and memory layout, so seeded alike it equals `m_source(f0_upsamp(f0))` bit for bit;
`continued(f0, before)` computes the source from a join point on, each harmonic's phase going on
from the head's.

SineGen also draws a random initial phase per overtone and adds it to the first sample's
frequency, but its x1/300 linear downsampling of the frequencies reads only samples 300k+149
and 300k+150 of each point's 300 equal ones, never sample 0: that draw changes nothing but the
random stream, so `whole` draws it and drops it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


@dataclass(frozen=True, slots=True)
class Source:
    """Excitation samples and the running phase they were computed from."""

    samples: torch.Tensor  # [1, samples]: what the generator's STFT reads
    cycles: torch.Tensor  # [1, harmonics, points] float64: each harmonic's phase (cycles) at each pitch point


class HarmonicSource:
    """kokoro's source module's computation, read off a loaded `SourceModuleHnNSF`."""

    def __init__(self, module: Any) -> None:
        sine = module.l_sin_gen
        if sine.flag_for_pulse:
            raise ValueError("SineGen's pulse-train mode is not reproduced (Kokoro does not use it)")
        self.sampling_rate = float(sine.sampling_rate)
        self.samples_per_point = int(sine.upsample_scale)  # 300: one pitch point, half a frame
        self.harmonics = int(sine.dim)  # f0 and its 8 overtones
        self.sine_amp = float(sine.sine_amp)
        self.noise_std = float(sine.noise_std)
        self.voiced_threshold = float(sine.voiced_threshold)
        self.linear = module.l_linear

    # --- the steps ---------------------------------------------------------------------------

    def cycles(self, f0: torch.Tensor, before: torch.Tensor | None = None) -> torch.Tensor:
        """[1, harmonics, points] float64: the running phase of each harmonic of the pitch curve
        `f0` [1, points], in cycles, continuing from `before` [1, harmonics] (the running phase at
        the point before f0's first; None: the sentence's start)."""
        multiples = torch.arange(1, self.harmonics + 1, dtype=f0.dtype, device=f0.device)
        # Per point, the fraction of a cycle each harmonic turns per sample (whole turns dropped).
        step = ((f0[:, :, None] * multiples) / self.sampling_rate) % 1
        increments = step.transpose(1, 2).double()
        if before is None:
            return torch.cumsum(increments, dim=2)
        # The sum starts from the float64 value, so it rounds as the whole sentence's sum does.
        return torch.cumsum(torch.cat([before[:, :, None], increments], dim=2), dim=2)[:, :, 1:]

    def harmonics_from(self, f0: torch.Tensor, cycles: torch.Tensor, start: int) -> torch.Tensor:
        """[1, samples, harmonics] (memory in harmonics-major order, as kokoro's): the voiced
        sines, amplitude `sine_amp`, over samples [start * 300, points * 300) of the curve whose
        running phase at every point is `cycles` [1, harmonics, points] and pitch `f0` [1, points]."""
        scale = self.samples_per_point
        # Radians at each point, then linear between points at the sample rate (the phase ramps
        # over a point's samples: x300 the per-sample turn), as SineGen rounds them.
        radians = (cycles.to(f0.dtype) * 2) * math.pi
        phase = F.interpolate(radians * scale, scale_factor=scale, mode="linear")[:, :, start * scale :]
        sines = torch.sin(phase.transpose(1, 2)) * self.sine_amp
        return sines * self._voiced(f0, start)

    def noise(self, f0: torch.Tensor, start: int) -> torch.Tensor:
        """[1, samples, harmonics]: Gaussian noise over samples [start * 300, points * 300), std
        `noise_std` where voiced and sine_amp / 3 where not. Drawn into harmonics-major memory,
        as kokoro's randn_like on its transposed sines: the layout selects torch's sampler, and
        with it the numbers a seed gives."""
        voiced = self._voiced(f0, start)
        amplitude = voiced * self.noise_std + (1 - voiced) * self.sine_amp / 3
        samples = (f0.shape[1] - start) * self.samples_per_point
        layout = torch.empty((f0.shape[0], self.harmonics, samples), dtype=f0.dtype, device=f0.device)
        return amplitude * torch.randn_like(layout.transpose(1, 2))

    def excitation(self, harmonics: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """[1, samples]: the harmonics and noise mixed into one excitation."""
        mixed = torch.tanh(F.linear(harmonics + noise, self.linear.weight, self.linear.bias))
        return mixed.transpose(1, 2).squeeze(1)

    def _voiced(self, f0: torch.Tensor, start: int) -> torch.Tensor:
        """[1, samples, 1]: 1.0 where the pitch is above the voiced threshold, per sample from
        point `start` on."""
        voiced = (f0[:, start:] > self.voiced_threshold).to(f0.dtype)
        return torch.repeat_interleave(voiced, self.samples_per_point, dim=1)[:, :, None]

    # --- kokoro's computation, and its continuation ------------------------------------------

    def whole(self, f0: torch.Tensor) -> Source:
        """The source of a whole sentence's pitch curve `f0` [1, points], as kokoro computes it
        (and draws its random numbers: seeded alike, its samples are kokoro's bit for bit)."""
        torch.rand(f0.shape[0], self.harmonics, device=f0.device)  # SineGen's unread initial phases
        cycles = self.cycles(f0)
        harmonics = self.harmonics_from(f0, cycles, 0)
        samples = self.excitation(harmonics, self.noise(f0, 0))
        # The source module's noise branch, which the generator does not read.
        torch.randn(f0.shape[0], samples.shape[1], 1, device=f0.device)
        return Source(samples, cycles)

    def continued(self, f0: torch.Tensor, before: torch.Tensor) -> Source:
        """The source from pitch point `before.shape[2]` of `f0` [1, points] on, each harmonic's
        phase continuing from `before` [1, harmonics, join point] (a head's cycles up to the
        join), with fresh noise. `samples` holds the samples from the join point's first (x300);
        `cycles` the whole curve's, `before`'s then the continuation's."""
        start = before.shape[2]
        if not 0 < start < f0.shape[1]:
            raise ValueError(f"join point {start} is outside the pitch curve's {f0.shape[1]} points")
        cycles = torch.cat([before, self.cycles(f0[:, start:], before[:, :, -1])], dim=2)
        harmonics = self.harmonics_from(f0, cycles, start)
        return Source(self.excitation(harmonics, self.noise(f0, start)), cycles)
