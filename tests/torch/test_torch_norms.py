"""The generator's carried instance-norm statistics (engine/torch/norms.py).

First on kokoro's own modules without a checkpoint (AdaIN1d and AdaINResBlock1 with their initial
weights, the norms' affine set off the identity so a lost affine shows, random activations);
then through the split runtime (`TorchSplitRuntime(carried_norms=True)`) on the random-weight
and the real-weight model (conftest.py).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from tests.support.seams import mel_distances
from voicestream.engine.base import FloatAudio
from voicestream.engine.torch.engine import TorchEngine
from voicestream.engine.torch.kmodel import import_kmodel
from voicestream.engine.torch.norms import CarriedNorms, NormCarry, adain, adain_resblock
from voicestream.engine.torch.plan import DEFAULT_WINDOWS
from voicestream.engine.torch.split import TorchSentenceFeatures, TorchSplitRuntime

CHANNELS, STYLE = 8, 16
VOICE = "af_heart"
MEDIUM_SENTENCE = "The museum opens at ten in the morning and closes at six in the evening."


def istftnet() -> Any:
    import_kmodel()  # kokoro registered without its pipeline (kmodel.py)
    import importlib

    return importlib.import_module("kokoro.istftnet")


def activations(frames: int, seed: int, shift: float = 0.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, CHANNELS, frames, generator=generator) * 3.0 + shift


def a_norm() -> torch.nn.InstanceNorm1d:
    norm = torch.nn.InstanceNorm1d(CHANNELS, affine=True)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, CHANNELS))
        norm.bias.copy_(torch.linspace(-0.2, 0.2, CHANNELS))
    return norm.eval()


def test_a_window_that_carries_nothing_is_kokoros_norm_and_records_its_statistics() -> None:
    with torch.inference_mode():
        norm, x = a_norm(), activations(40, seed=1)
        carry = NormCarry(None, frames=20)
        assert torch.equal(carry.normalise(norm, x), norm(x))
        carried = carry.after()
        ((mean, var),) = carried.values
        assert carried.frames == 20
        assert torch.allclose(mean, x.mean(dim=2, keepdim=True))
        assert torch.allclose(var, x.var(dim=2, unbiased=False, keepdim=True))


def test_a_later_window_blends_by_frames_as_the_onnx_generator_does() -> None:
    with torch.inference_mode():
        norm, before, x = a_norm(), activations(40, seed=1), activations(30, seed=2, shift=1.0)
        first = NormCarry(None, frames=20)
        first.normalise(norm, before)
        carried = first.after()
        carry = NormCarry(carried, frames=10)
        out = carry.normalise(norm, x)
        # onnx/graphs.py: mean = w * carried + (1 - w) * own; the variance around the blended mean.
        w = 20 / 30
        (carried_mean, carried_var) = carried.values[0]
        mean = w * carried_mean + (1 - w) * x.mean(dim=2, keepdim=True)
        var = w * carried_var + (1 - w) * ((x - mean) ** 2).mean(dim=2, keepdim=True)
        expected = (x - mean) / torch.sqrt(var + norm.eps) * norm.weight[None, :, None] + norm.bias[None, :, None]
        assert torch.allclose(out, expected, atol=1e-5)
        assert not torch.allclose(out, norm(x), atol=1e-2)  # the carried share moved it
        after = carry.after()
        assert after.frames == 30
        assert torch.allclose(after.values[0][0], mean) and torch.allclose(after.values[0][1], var)


def test_statistics_carried_from_the_same_activations_change_nothing() -> None:
    with torch.inference_mode():
        norm, x = a_norm(), activations(40, seed=3)
        own = NormCarry(None, frames=20)
        own.normalise(norm, x)
        assert torch.allclose(NormCarry(own.after(), frames=20).normalise(norm, x), norm(x), atol=1e-5)


def test_more_norms_than_were_carried_is_an_error() -> None:
    with torch.inference_mode():
        carry = NormCarry(CarriedNorms((), frames=10), frames=10)
        with pytest.raises(RuntimeError, match="norm 0 has no carried statistics"):
            carry.normalise(a_norm(), activations(10, seed=4))


def test_the_blocks_carrying_nothing_are_kokoros_forward_bit_for_bit() -> None:
    with torch.inference_mode():
        """adain and adain_resblock re-implement kokoro's forwards: any drift from them shows here."""
        module = istftnet()
        torch.manual_seed(0)
        style = torch.randn(1, STYLE)
        layer = module.AdaIN1d(STYLE, CHANNELS).eval()
        with warnings.catch_warnings():  # torch's deprecation note about weight_norm inside kokoro's block
            warnings.simplefilter("ignore", FutureWarning)
            block = module.AdaINResBlock1(CHANNELS, 3, (1, 3, 5), STYLE).eval()
        for norm in [m for m in block.modules() if isinstance(m, torch.nn.InstanceNorm1d)] + [layer.norm]:
            norm.load_state_dict(a_norm().state_dict())
        x = activations(50, seed=5)
        assert torch.equal(adain(layer, x, style, NormCarry(None, 50)), layer(x, style))
        carry = NormCarry(None, 50)
        assert torch.equal(adain_resblock(block, x, style, carry), block(x, style))
        assert len(carry.after().values) == 6  # three dilations, two AdaINs each


# --- over the model: the runtime's window decoder with carried statistics -------------------------


def encoded(engine: TorchEngine, text: str, seed: int = 0) -> TorchSentenceFeatures:
    (phonemes,) = engine.phonemes(text, VOICE)
    torch.manual_seed(seed)
    return engine.split.encode(phonemes, engine.voice_tensor(VOICE)[len(phonemes) - 1], 1.0)


def test_a_piece_decoded_in_one_window_still_is_kmodels_samples(engine: TorchEngine) -> None:
    """The first window carries nothing: decoded whole, the carrying runtime is the exact one
    (kokoro's own modules: `fused=False`)."""
    features = encoded(engine, MEDIUM_SENTENCE)
    carrying = TorchSplitRuntime(engine.split.model, carried_norms=True)
    whole = np.concatenate(list(TorchSplitRuntime(engine.split.model, fused=False).stream(features, None)))
    assert np.array_equal(np.concatenate(list(carrying.stream(features, None))), whole)


def test_later_windows_carry_and_the_first_does_not(engine: TorchEngine) -> None:
    features = encoded(engine, MEDIUM_SENTENCE)
    carrying = TorchSplitRuntime(engine.split.model, carried_norms=True)
    own = list(TorchSplitRuntime(engine.split.model, fused=False).stream(features, DEFAULT_WINDOWS))
    carried = list(carrying.stream(features, DEFAULT_WINDOWS))
    assert len(own) == len(carried) >= 3
    assert np.array_equal(carried[0], own[0])
    assert all(not np.array_equal(a, b) for a, b in zip(carried[1:], own[1:], strict=True))


def test_carried_windows_are_nearer_the_whole_piece_with_real_weights(real_engine: TorchEngine) -> None:
    """What carrying buys on the trained model (benchmarks/torch_seam_margins.py): every window
    normalises nearer the whole piece, so the audio is nearer it (log-mel distance)."""
    features = encoded(real_engine, MEDIUM_SENTENCE)
    whole = np.concatenate(list(real_engine.split.stream(features, None)))
    carrying = TorchSplitRuntime(real_engine.split.model, carried_norms=True)
    own = log_mel_distance(np.concatenate(list(real_engine.split.stream(features, DEFAULT_WINDOWS))), whole)
    carried = log_mel_distance(np.concatenate(list(carrying.stream(features, DEFAULT_WINDOWS))), whole)
    print(f"log-mel distance to the whole piece: own norms {own:.2f} dB, carried {carried:.2f} dB")
    assert carried < own - 0.1


def log_mel_distance(audio: FloatAudio, whole: FloatAudio) -> float:
    distance, loud = mel_distances(audio, whole)
    return float(distance[loud].mean())
