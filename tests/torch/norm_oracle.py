"""KModel's decoder with the whole sentence's instance-norm statistics fed to every window.

The decoder normalises over whatever span it is given: its AdaIN layers hold 58 InstanceNorm1d
(mean and variance over time, per channel). Recording what the whole sentence used and making
a window use the same values removes that dependence, so what is left is convolution: with
enough context a window's core must equal the whole sentence's samples (up to float32 rounding
of convolutions over another length). The same proof as tests/support/oracle_decoder.py gives
for the ONNX graph, done here with forward hooks instead of graph surgery.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

Statistics = dict[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]


def instance_norms(decoder: torch.nn.Module) -> list[torch.nn.InstanceNorm1d]:
    return [module for module in decoder.modules() if isinstance(module, torch.nn.InstanceNorm1d)]


@contextmanager
def hooked(decoder: torch.nn.Module, hook: Any) -> Iterator[None]:
    handles = [norm.register_forward_hook(hook) for norm in instance_norms(decoder)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def recording(decoder: torch.nn.Module) -> Iterator[Statistics]:
    """Every instance norm's mean and (biased) variance over time, as it runs."""
    statistics: Statistics = {}

    def record(norm: torch.nn.Module, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> None:
        (x,) = inputs
        statistics[norm] = (x.mean(dim=2, keepdim=True), x.var(dim=2, unbiased=False, keepdim=True))

    with hooked(decoder, record):
        yield statistics


@contextmanager
def replaying(decoder: torch.nn.Module, statistics: Statistics) -> Iterator[None]:
    """Instance norms normalise with the recorded statistics instead of their input's."""

    def replay(norm: Any, inputs: tuple[torch.Tensor, ...], _output: torch.Tensor) -> torch.Tensor:
        (x,) = inputs
        mean, variance = statistics[norm]
        normalised = (x - mean) / torch.sqrt(variance + norm.eps)
        return normalised * norm.weight[None, :, None] + norm.bias[None, :, None]

    with hooked(decoder, replay):
        yield
