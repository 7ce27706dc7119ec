"""The generator's instance norms with statistics carried from window to window.

The ONNX engine's generator blends each of its instance norms' mean and variance with those of
the windows decoded before (onnx/graphs.py, docs/engine.md "Carried statistics"); this is the
same blend for kokoro's KModel, written over its modules without changing them: kokoro's
`AdaIN1d.forward` and `AdaINResBlock1.forward` re-implemented here step for step, with the
`InstanceNorm1d` inside each AdaIN replaced by `NormCarry.normalise`.

For each norm, in the order a window calls them (the same every window):

    mean = w * carried_mean + (1 - w) * mean over the window's span
    var  = w * carried_var  + (1 - w) * mean over the span of (x - mean)^2
    out  = (x - mean) / sqrt(var + eps) * weight + bias

with `w = frames before / (frames before + this window's)`, and (mean, var) carried on. A window
thereby normalises over everything decoded so far, nearly as the whole sentence does. The first
window carries nothing and runs kokoro's own `InstanceNorm1d` (its samples are the unwindowed
decoder's), recording its statistics beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Statistic = tuple[torch.Tensor, torch.Tensor]  # ([1, C, 1] mean, [1, C, 1] biased variance)


@dataclass(frozen=True, slots=True)
class CarriedNorms:
    """Every generator norm's statistics over a piece's windows so far, in call order, and the
    number of frames they were taken over (each window's span counts whole, as on ONNX)."""

    values: tuple[Statistic, ...]
    frames: int

    def weight_against(self, frames: int) -> float:
        """The carried values' share in a window of `frames` frames."""
        return self.frames / (self.frames + frames)


class NormCarry:
    """One window's norms: each blended with `carried` (None: its own statistics alone), and
    their blended statistics recorded for the next window."""

    def __init__(self, carried: CarriedNorms | None, frames: int) -> None:
        self._carried = carried
        self._frames = frames
        self._weight = 0.0 if carried is None else carried.weight_against(frames)
        self._recorded: list[Statistic] = []

    def normalise(self, norm: torch.nn.InstanceNorm1d, x: torch.Tensor) -> torch.Tensor:
        index = len(self._recorded)
        if self._carried is None:
            mean = x.mean(dim=2, keepdim=True)
            self._recorded.append((mean, (x - mean).square().mean(dim=2, keepdim=True)))
            out: torch.Tensor = norm(x)  # kokoro's own: the first window is the unwindowed decoder's
            return out
        if index >= len(self._carried.values):
            raise RuntimeError(f"norm {index} has no carried statistics: the windows ran different modules")
        carried_mean, carried_var = self._carried.values[index]
        w = self._weight
        mean = w * carried_mean + (1.0 - w) * x.mean(dim=2, keepdim=True)
        deviation = x - mean
        var = w * carried_var + (1.0 - w) * deviation.square().mean(dim=2, keepdim=True)
        self._recorded.append((mean, var))
        normalised = deviation * torch.rsqrt(var + norm.eps)
        if norm.affine:
            normalised = normalised * norm.weight[None, :, None] + norm.bias[None, :, None]
        return normalised

    def after(self) -> CarriedNorms:
        """What the next window carries: this window's blended statistics, over all frames so far."""
        before = 0 if self._carried is None else self._carried.frames
        return CarriedNorms(tuple(self._recorded), before + self._frames)


def adain(module: torch.nn.Module, x: torch.Tensor, style: torch.Tensor, carry: NormCarry) -> torch.Tensor:
    """kokoro's `AdaIN1d.forward` with its instance norm carried."""
    h = module.fc(style)
    h = h.view(h.size(0), h.size(1), 1)
    gamma, beta = torch.chunk(h, chunks=2, dim=1)
    out: torch.Tensor = (1 + gamma) * carry.normalise(module.norm, x) + beta
    return out


def adain_resblock(block: torch.nn.Module, x: torch.Tensor, style: torch.Tensor, carry: NormCarry) -> torch.Tensor:
    """kokoro's `AdaINResBlock1.forward` (the generator's blocks) with its AdaINs carried."""
    for c1, c2, n1, n2, a1, a2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
    ):
        xt = adain(n1, x, style, carry)
        xt = xt + (1 / a1) * (torch.sin(a1 * xt) ** 2)  # Snake1D
        xt = c1(xt)
        xt = adain(n2, xt, style, carry)
        xt = xt + (1 / a2) * (torch.sin(a2 * xt) ** 2)  # Snake1D
        xt = c2(xt)
        x = xt + x
    return x
