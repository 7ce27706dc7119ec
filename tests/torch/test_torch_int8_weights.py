"""KModel weights derived from the shipped int8 ONNX export (engine/torch/weights.py), checked
against the int8 graph's own outputs on the same inputs.

What is verified: every KModel parameter is set (strict load), the predicted durations give the
graph's audio length (to the frame: int8 rounding can move one duration across .5), the
pitch/energy curves and the decoder's activations up to the generator's first upsampling match
the graph's (correlation >= 0.9; measured 0.95-0.9995, lower where a duration is a frame off and
what follows is shifted; a random-weight model correlates ~0).
The derived model's speech is gated in test_torch_real_speech.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.support.checkpoint import random_kmodel
from voicestream.engine.torch.weights import derive_state_dicts

SOURCE = "kokoro-v1.0.int8.onnx"
PHONEMES = (
    "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˌOvəɹ ðə lˈAzi dˈɔɡ.",
    "həlˈO ðˈɛɹ, mI fɹˈɛnd, hˌW ɑɹ ju?",
)
# Graph tensors beside the audio, and the KModel modules whose outputs they are.
PROBES = {
    "/encoder/F0_proj/Conv_output_0": "predictor.F0_proj",
    "/encoder/N_proj/Conv_output_0": "predictor.N_proj",
    "/decoder/decoder/generator/ups.0/ConvTranspose_output_0": "decoder.generator.ups.0",
}


@pytest.fixture(scope="module")
def derived(source_dir: Path) -> Any:
    model = random_kmodel(source_dir / "config.json")
    state = derive_state_dicts(source_dir / SOURCE, model)
    for name, child in model.named_children():
        child.load_state_dict(state[name], strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def graph(source_dir: Path) -> Any:
    import onnx
    import onnxruntime

    model = onnx.load(str(source_dir / SOURCE))
    for name in PROBES:
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("phonemes", PHONEMES)
def test_derived_weights_reproduce_the_int8_graph_up_to_the_generator(
    derived: Any, graph: Any, source_dir: Path, phonemes: str
) -> None:
    vocab = json.loads((source_dir / "config.json").read_text())["vocab"]
    ids = [vocab[char] for char in phonemes if char in vocab]
    style = np.fromfile(source_dir / "voices" / "af_heart.bin", dtype="<f4").reshape(510, 256)[len(ids) - 1 : len(ids)]
    tokens = np.array([[0, *ids, 0]], dtype=np.int64)
    audio, *probed = graph.run(None, {"tokens": tokens, "style": style, "speed": np.ones(1, np.float32)})
    captured: dict[str, np.ndarray] = {}
    hooks = [
        derived.get_submodule(module).register_forward_hook(
            lambda _m, _i, out, key=key: captured.__setitem__(key, out.detach().numpy())
        )
        for key, module in PROBES.items()
    ]
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _audio, durations = derived.forward_with_tokens(torch.from_numpy(tokens), torch.from_numpy(style), 1.0)
    finally:
        for hook in hooks:
            hook.remove()
    # The same frames, but for int8 rounding at a duration's .5 boundary: the graph's int8 kernels
    # round differently by CPU (seen: 88 vs 87 on AVX-512 VNNI, 88 vs 90 on the AVX2-only class).
    assert abs(int(durations.sum()) - audio.size // 600) <= 2
    for key, expected in zip(PROBES, probed, strict=True):
        # [1, channels, time]: compared over the time both have.
        got, want = captured[key], expected
        span = min(got.shape[-1], want.shape[-1])
        assert got.shape[:-1] == want.shape[:-1] and span >= 0.95 * want.shape[-1], key
        correlation = np.corrcoef(got[..., :span].reshape(-1), want[..., :span].reshape(-1))[0, 1]
        assert correlation >= 0.9, f"{key}: correlation {correlation:.4f}"  # random weights: ~0
