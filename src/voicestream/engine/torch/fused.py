"""kokoro's model computed in fewer passes over memory: the same functions, faster.

Three changes, neither to kokoro's code nor to its weights' values:

- `fold_weight_norms`: kokoro wraps its convolutions in `weight_norm`, which recomputes every
  weight from its direction and norm (`g * v / ||v||`) at every call. Computed once at load, the
  weights are the very tensors each call computed: every output stays bit for bit the same.
- `fused_resblock`: the generator's `AdaINResBlock1` runs an AdaIN (instance norm, then the
  style's scale and shift) and a Snake activation (`x + sin(a x)^2 / a`) before each of its
  convolutions, nine passes over activations that hold ~20,000 samples per channel (the
  generator's upsampled rate), each a fresh allocation. Here the norm's statistics come from a mean
  and a vector norm (torch's CPU `var_mean` takes ~25x longer over such rows), the norm, the style
  and `a` fold into one multiply-add, and the Snake runs in place: five passes. Floating-point
  rounding differs from kokoro's order of operations, so the samples do too, by ~1e-6
  (tests/torch/test_torch_fused.py holds them above 100 dB SNR of kokoro's).

- `with_fused_gelu`: kokoro's ALBERT uses transformers' `gelu_new`, the tanh approximation of
  GELU written as eight tensor operations; `gelu_pytorch_tanh` is the same approximation in one
  kernel (a tenth of the encoder's time on a 50-word sentence, on a CPU). Set in the config the
  model is built from, so KModel.forward computes it too.

The convolutions, at about four fifths of the CPU's peak already, are untouched. What it buys,
measured: docs/engine-evidence.md, "Fused generator blocks".
"""

from __future__ import annotations

from typing import Any

import torch

# transformers' name of the tanh-approximated GELU as one PyTorch kernel (ALBERT's default,
# "gelu_new", is the same formula in elementwise steps).
FUSED_GELU = "gelu_pytorch_tanh"


def with_fused_gelu(config: dict[str, Any]) -> dict[str, Any]:
    """Kokoro's config with its ALBERT's activation as one kernel (a copy: `config` is kept)."""
    return {**config, "plbert": {**config["plbert"], "hidden_act": FUSED_GELU}}


def fold_weight_norms(model: torch.nn.Module) -> int:
    """Computes every `weight_norm`-wrapped weight once and keeps it as a plain weight; the number
    of modules folded. The outputs are unchanged bit for bit (the same computation, run once)."""
    folded = 0
    for module in model.modules():
        if hasattr(module, "weight_g") and hasattr(module, "weight_v"):
            torch.nn.utils.remove_weight_norm(module)
            folded += 1
    return folded


def check_fusable(block: Any) -> None:
    """A ValueError unless `block`'s AdaINs are kokoro's: instance norms over the span alone (no
    running statistics), with an affine; what `adain_snake` computes."""
    for adain in [*block.adain1, *block.adain2]:
        norm = adain.norm
        if norm.track_running_stats or not norm.affine:
            raise ValueError(f"{type(block).__name__}'s norms are not kokoro's InstanceNorm1d(affine=True)")


def adain_snake(adain: Any, alpha: torch.Tensor, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
    """`Snake1D(AdaIN1d(x, style))` with the Snake's `alpha` [1, C, 1]: kokoro's
    `y = (1 + gamma) * norm(x) + beta; y + sin(alpha y)^2 / alpha`, as
    `u = alpha y` in one multiply-add over the centred `x`, then `(u + sin(u)^2) / alpha` in place."""
    h = adain.fc(style)
    channels = h.shape[1] // 2
    gamma, beta = h[:, :channels, None], h[:, channels:, None]
    norm = adain.norm
    centred = x - x.mean(dim=2, keepdim=True)
    variance = torch.linalg.vector_norm(centred, dim=2, keepdim=True).square_().div_(x.shape[2])
    scale = (1 + gamma) * norm.weight[None, :, None] * torch.rsqrt(variance + norm.eps)
    shift = (1 + gamma) * norm.bias[None, :, None] + beta
    u = torch.addcmul(shift * alpha, centred, scale * alpha)
    sine = torch.sin(u, out=centred)  # the centred copy is spent: its memory takes the sines
    return u.addcmul_(sine, sine).div_(alpha)


def fused_resblock(block: Any, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
    """kokoro's `AdaINResBlock1.forward(x, style)`, each AdaIN and Snake through `adain_snake`."""
    for c1, c2, n1, n2, a1, a2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
    ):
        xt = c1(adain_snake(n1, a1, x, style))
        x = c2(adain_snake(n2, a2, xt, style)).add_(x)
    return x
