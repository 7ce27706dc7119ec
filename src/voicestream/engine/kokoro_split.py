"""Kokoro-82M's int8 ONNX graph cut in two, so the decoder can run over windows of a sentence.

Part 1, the *encoder* graph, runs once per sentence: tokens, style, speed -> everything the
decoder needs for the whole sentence. Part 2, the *decoder* graph (the iSTFTNet generator and
the blocks before it, ~95% of the compute), runs over any window of frames. Both are cut out of
the shipped graph with onnx's extractor, unchanged node for node: decoding all frames in one
window gives the original model's samples exactly (checked when they are derived).

Where the cut is (tensor names of kokoro-v1.0.int8.onnx), and why there:
- `/encoder/MatMul_1_output_0` -> `asr` [1, 512, frames]: text features aligned to frames
  (text encoder output @ the duration alignment matrix).
- `/encoder/Reshape_output_0` -> `f0`, `/encoder/Reshape_1_output_0` -> `energy`
  [1, 2*frames]: the prosody predictor's pitch and energy curves (two points per frame).
- `/decoder/Slice_output_0` -> `decoder_style` [1, 128]: the decoder half of the voice style.
- `/decoder/decoder/generator/m_source/l_sin_gen/Mul_4_output_0` -> `phase` [1, 9, 2*frames]:
  the harmonic source's phase for the 9 harmonics, *after* its cumulative sum over the whole
  sentence, at two points per frame. The source integrates phase over time; cutting after the
  CumSum keeps it continuous across windows, while the per-sample parts (upsampling x300, sine,
  the source's STFT) stay in the decoder: they are local and would make part 1 grow with the
  audio's length (the STFT alone was half of part 1's time when it sat there).
- `/encoder/Cast_output_0` -> `durations` int64 [1, tokens+2]: frames per input token (after
  the graph's division by speed, rounding and clamp to >= 1), for word timings.

One frame is 600 samples (25 ms at 24 kHz). The decoder's receptive field is 16 frames each
side (measured: with the whole sentence's normalisation statistics fed in, windows with 14
context frames reproduce the whole-sentence samples exactly; see docs/engine.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from voicestream.engine.assets import AssetError
from voicestream.engine.derived import ensure_derived

if TYPE_CHECKING:
    from onnx import ModelProto, ValueInfoProto

# Bump when the derivation below changes: derived files of another version are re-derived.
DERIVATION_VERSION = 1
ENCODER_FILE = "kokoro-encoder.int8.onnx"
DECODER_FILE = "kokoro-decoder.int8.onnx"
DERIVED_FILES = (ENCODER_FILE, DECODER_FILE)

SAMPLES_PER_FRAME = 600
HARMONICS = 9
RECEPTIVE_FIELD_FRAMES = 16

# Friendly name -> tensor of the source graph, in the decoder's input order.
DECODER_INPUTS: dict[str, str] = {
    "asr": "/encoder/MatMul_1_output_0",
    "f0": "/encoder/Reshape_output_0",
    "energy": "/encoder/Reshape_1_output_0",
    "decoder_style": "/decoder/Slice_output_0",
    "phase": "/decoder/decoder/generator/m_source/l_sin_gen/Mul_4_output_0",
}
DURATIONS = ("durations", "/encoder/Cast_output_0")
ENCODER_OUTPUTS: dict[str, str] = {**DECODER_INPUTS, DURATIONS[0]: DURATIONS[1]}
# Shapes of the friendly tensors ("frames" = asr frames; f0/energy/phase have two points per frame).
SHAPES: dict[str, list[int | str]] = {
    "asr": [1, 512, "frames"],
    "f0": [1, "points"],
    "energy": [1, "points"],
    "decoder_style": [1, 128],
    "phase": [1, HARMONICS, "points"],
    "durations": [1, "tokens"],
}


@dataclass(frozen=True, slots=True)
class SplitGraphs:
    encoder: Path
    decoder: Path


def split_graphs(source: Path, source_sha256: str, directory: Path) -> SplitGraphs:
    """The verified encoder/decoder graphs for `source` in `directory`, derived now if stale."""
    ensure_derived(directory, source_sha256, DERIVATION_VERSION, DERIVED_FILES, lambda out: derive(source, out))
    return SplitGraphs(directory / ENCODER_FILE, directory / DECODER_FILE)


def derive(source: Path, out: Path) -> list[str]:
    """Cut `source` into the two graphs under `out`, and prove that together they are the source."""
    import onnx
    import onnx.utils

    model = onnx.load(str(source))
    extractor = onnx.utils.Extractor(model)
    encoder = extractor.extract_model(["tokens", "style", "speed"], list(ENCODER_OUTPUTS.values()))
    _rename_outputs(encoder, ENCODER_OUTPUTS)
    decoder = extractor.extract_model(list(DECODER_INPUTS.values()), ["audio"])
    _rename_inputs(decoder, DECODER_INPUTS)
    for graph_model in (encoder, decoder):
        graph_model.graph.name = f"{model.graph.name or 'kokoro'} split v{DERIVATION_VERSION}"
        onnx.checker.check_model(graph_model)
    onnx.save(encoder, str(out / ENCODER_FILE))
    onnx.save(decoder, str(out / DECODER_FILE))
    _prove_equivalent(source, out / ENCODER_FILE, out / DECODER_FILE)
    return list(DERIVED_FILES)


def _value_info(name: str, elem_type: int) -> ValueInfoProto:
    from onnx import helper

    return helper.make_tensor_value_info(name, elem_type, SHAPES[name])


def _rename_outputs(model: ModelProto, names: dict[str, str]) -> None:
    """Expose internal tensors under friendly names (Identity nodes: free at run time)."""
    from onnx import TensorProto, helper

    graph = model.graph
    del graph.output[:]
    for friendly, internal in names.items():
        graph.node.append(helper.make_node("Identity", [internal], [friendly], name=f"split_output_{friendly}"))
        elem_type = TensorProto.INT64 if friendly == DURATIONS[0] else TensorProto.FLOAT
        graph.output.append(_value_info(friendly, elem_type))


def _rename_inputs(model: ModelProto, names: dict[str, str]) -> None:
    from onnx import TensorProto

    graph = model.graph
    internal_to_friendly = {internal: friendly for friendly, internal in names.items()}
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in internal_to_friendly:
                node.input[index] = internal_to_friendly[name]
    del graph.input[:]
    for friendly in names:
        graph.input.append(_value_info(friendly, TensorProto.FLOAT))


def _prove_equivalent(source: Path, encoder: Path, decoder: Path) -> None:
    """The two graphs over one whole-sentence window must give the source's samples exactly."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    providers = ["CPUExecutionProvider"]
    tokens = np.array([[0, 50, 83, 54, 156, 57, 135, 16, 0]], dtype=np.int64)  # a few phonemes
    style = (np.sin(np.arange(256, dtype=np.float32)) * 0.2).reshape(1, 256)
    inputs = {"tokens": tokens, "style": style, "speed": np.array([1.0], dtype=np.float32)}
    (expected,) = onnxruntime.InferenceSession(str(source), options, providers=providers).run(None, inputs)
    encoded = onnxruntime.InferenceSession(str(encoder), options, providers=providers).run(None, inputs)
    features = dict(zip(ENCODER_OUTPUTS, encoded, strict=True))
    decoder_inputs = {name: features[name] for name in DECODER_INPUTS}
    (audio,) = onnxruntime.InferenceSession(str(decoder), options, providers=providers).run(None, decoder_inputs)
    frames = int(features["durations"].sum())
    if audio.shape != expected.shape or not np.array_equal(audio, expected) or len(audio) != frames * 600:
        raise AssetError(f"the split graphs of {source.name} do not reproduce it: derivation bug, please report")
