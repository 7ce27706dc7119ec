"""The generator's fused blocks (engine/torch/fused.py): kokoro's function, fewer passes.

On kokoro's own modules without a checkpoint (an AdaINResBlock1 with its norms' affine and the
Snakes' alphas set off their initial values, so a lost term shows), then on the engine's model:
the random-weight checkpoint and the weights derived from the int8 export (conftest.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from tests.support.seams import snr_db
from tests.torch.test_torch_norms import istftnet
from voicestream.engine.streaming.windows import Window
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.fused import FUSED_GELU, check_fusable, fold_weight_norms, fused_resblock, with_fused_gelu
from voicestream.engine.torch.plan import DEFAULT_WINDOWS
from voicestream.engine.torch.split import TorchSplitRuntime

CHANNELS, STYLE = 8, 16
VOICE = "af_heart"
SENTENCE = "The museum opens at ten in the morning and closes at six in the evening."
# Rounding alone: the fused order of operations, in float32 (measured ~115 dB on the real model).
FUSED_SNR_DB = 100.0


def a_block(seed: int = 0) -> Any:
    """kokoro's AdaINResBlock1 (weight-normed convolutions) with every parameter drawn at random."""
    torch.manual_seed(seed)
    with warnings.catch_warnings():  # torch's deprecation note about weight_norm inside kokoro's block
        warnings.simplefilter("ignore", FutureWarning)
        block = istftnet().AdaINResBlock1(CHANNELS, 3, (1, 3, 5), STYLE).eval()
    with torch.no_grad():
        for parameter in block.parameters():
            parameter.copy_(torch.rand_like(parameter) + 0.5)  # alphas and norm weights off 1
    return block


def activations(frames: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, CHANNELS, frames, generator=generator) * 3.0 + 0.5


def test_folded_weight_norms_change_no_output_bit() -> None:
    block = a_block()
    x, style = activations(300, seed=1), torch.randn(1, STYLE)
    with torch.inference_mode():
        before = block(x, style)
    assert fold_weight_norms(block) == 6  # convs1 and convs2, three dilations each
    assert not any(hasattr(module, "weight_g") for module in block.modules())
    with torch.inference_mode():
        assert torch.equal(block(x, style), before)


@pytest.mark.parametrize("frames", [7, 300, 5000])
def test_a_fused_block_is_kokoros_block_to_rounding(frames: int) -> None:
    block = a_block(seed=frames)
    x, style = activations(frames, seed=2), torch.randn(1, STYLE)
    with torch.inference_mode():
        expected = block(x, style).numpy()
        fused = fused_resblock(block, x.clone(), style).numpy()
        # Another style is another function: the comparison can tell them apart.
        other = fused_resblock(block, x.clone(), torch.randn(1, STYLE)).numpy()
    assert snr_db(fused, expected) > FUSED_SNR_DB
    assert snr_db(other, expected) < 40.0


def test_a_block_with_running_statistics_is_refused() -> None:
    block = a_block()
    block.adain2[1].norm.track_running_stats = True
    with pytest.raises(ValueError, match="InstanceNorm1d"):
        check_fusable(block)


def test_the_engines_model_is_folded_at_load(engine: TorchEngine) -> None:
    assert not any(hasattr(module, "weight_g") for module in engine.split.model.modules())


def test_the_engines_albert_runs_the_tanh_gelu_in_one_kernel(engine: TorchEngine) -> None:
    from transformers.activations import ACT2FN

    activations = {type(m.activation).__name__ for m in engine.split.model.bert.modules() if hasattr(m, "activation")}
    assert activations == {type(ACT2FN[FUSED_GELU]).__name__}
    x = torch.linspace(-6.0, 6.0, 10_001)
    assert torch.allclose(ACT2FN[FUSED_GELU](x), ACT2FN["gelu_new"](x), rtol=0.0, atol=1e-6)  # kokoro's formula


def test_the_config_is_copied_not_changed() -> None:
    config = {"plbert": {"hidden_size": 768}, "n_token": 178}
    assert with_fused_gelu(config) == {"plbert": {"hidden_size": 768, "hidden_act": FUSED_GELU}, "n_token": 178}
    assert config == {"plbert": {"hidden_size": 768}, "n_token": 178}


def decoded(runtime: TorchSplitRuntime, engine: TorchEngine, windows: bool) -> np.ndarray:
    (phonemes,) = engine.phonemes(SENTENCE, VOICE)
    torch.manual_seed(3)
    features = runtime.encode(phonemes, engine.voice_tensor(VOICE)[len(phonemes) - 1], 1.0)
    if not windows:
        return runtime.decode_audio(features, Window(0, features.frames, 0, features.frames))
    return np.concatenate(list(runtime.stream(features, DEFAULT_WINDOWS)))


@pytest.mark.parametrize("windows", [False, True], ids=["whole", "windows"])
def test_the_real_model_fused_is_kokoros_to_rounding(real_engine: TorchEngine, windows: bool) -> None:
    model = real_engine.split.model
    fused = decoded(TorchSplitRuntime(model, fused=True), real_engine, windows)
    exact = decoded(TorchSplitRuntime(model, fused=False), real_engine, windows)
    assert len(fused) == len(exact) > 24_000
    assert snr_db(fused, exact) > FUSED_SNR_DB
