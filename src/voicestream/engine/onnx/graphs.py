"""Kokoro-82M's int8 ONNX graph cut in three, so the decoder can run over windows of a sentence.

The *encoder* graph runs once per sentence: tokens, style, speed -> everything the decoder needs
for the whole sentence. The decoder (~95% of the compute) is cut once more, where its cost and
its reach change: the *frontend* (the frame-rate AdaIN blocks before the iSTFTNet generator:
~3% of the decoder's time, but 10 frames of reach on each side) and the *generator* (~97% of
the time, 6 frames of reach). Each runs over any window of frames, with its own context, so
the expensive part recomputes 12 frames per seam instead of 32. All three are cut out of the
shipped graph with onnx's extractor, unchanged node for node: running them over one window of
all frames gives the original model's samples exactly (checked when they are derived).

Where the cuts are (tensor names of kokoro-v1.0.int8.onnx), and why there:
- `/encoder/MatMul_1_output_0` -> `asr` [1, 512, frames]: text features aligned to frames
  (text encoder output @ the duration alignment matrix).
- `/encoder/Reshape_output_0` -> `f0`, `/encoder/Reshape_1_output_0` -> `energy`
  [1, 2*frames]: the prosody predictor's pitch and energy curves (two points per frame).
- `/decoder/Slice_output_0` -> `decoder_style` [1, 128]: the decoder half of the voice style.
- `/decoder/decoder/generator/m_source/l_sin_gen/Mul_4_output_0` -> `phase` [1, 9, 2*frames]:
  the harmonic source's phase for the 9 harmonics, *after* its cumulative sum over the whole
  sentence, at two points per frame. The source integrates phase over time; cutting after the
  CumSum keeps it continuous across windows, while the per-sample parts (upsampling x300, sine,
  the source's STFT) stay in the generator: they are local and would make the encoder grow
  with the audio's length (the STFT alone was half of the encoder's time when it sat there).
- `/encoder/Cast_output_0` -> `durations` int64 [1, tokens+2]: frames per input token (after
  the graph's division by speed, rounding and clamp to >= 1), for word timings.
- `/decoder/decoder/decode.3/Div_4_output_0` -> `hidden` [1, 512, 2*frames]: the last
  frame-rate block's output, the generator's input (with f0, phase and the style).

The generator's 44 instance norms (ReduceMean of the activations, then of their squared
deviations, over time) get one change: each statistic is blended with one *carried* from the
windows decoded before, `mean = w * carried + (1 - w) * window's own` (likewise the variance,
around the blended mean), and the blended values are outputs, for the next window to carry. A
window thereby normalises nearly as the whole sentence does, and needs less context than the
12 frames that a window normalised on its own needs (8: docs/engine.md, "Carried statistics").
With `carried_weight` 0 the graph is the source's generator exactly (0 * x + 1 * m == m in
floating point), which the derivation proves.

One frame is 600 samples (25 ms at 24 kHz). The receptive fields (frames each side) were
measured with each stage's whole-sentence normalisation statistics fed in
(tests/support/oracle_decoder.py): frontend 10, generator 6 (fewer frames fall well short of
float32 rounding: docs/engine-evidence.md, "The cut").
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from voicestream.engine.models.assets import AssetError
from voicestream.engine.models.derived import load_derived, stale_reason
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME

if TYPE_CHECKING:
    from onnx import ModelProto, NodeProto, ValueInfoProto

# Bump when the derivation below changes: derived files of another version are re-derived
# (each version lives in a folder of its own, so engines of two versions can share a cache).
DERIVATION_VERSION = 3
ENCODER_FILE = "kokoro-encoder.int8.onnx"
FRONTEND_FILE = "kokoro-frontend.int8.onnx"
GENERATOR_FILE = "kokoro-generator.int8.onnx"
DERIVED_FILES = (ENCODER_FILE, FRONTEND_FILE, GENERATOR_FILE)

HARMONICS = 9
HIDDEN_CHANNELS = 512
# Frames each side that a window's core depends on (measured, see the module docstring).
FRONTEND_RECEPTIVE_FIELD = 10
GENERATOR_RECEPTIVE_FIELD = 6
RECEPTIVE_FIELD_FRAMES = FRONTEND_RECEPTIVE_FIELD + GENERATOR_RECEPTIVE_FIELD

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
HIDDEN = ("hidden", "/decoder/decoder/decode.3/Div_4_output_0")
FRONTEND_INPUTS: dict[str, str] = {name: DECODER_INPUTS[name] for name in ("asr", "f0", "energy", "decoder_style")}
GENERATOR_INPUTS: dict[str, str] = {
    HIDDEN[0]: HIDDEN[1],
    "f0": DECODER_INPUTS["f0"],
    "phase": DECODER_INPUTS["phase"],
    "decoder_style": DECODER_INPUTS["decoder_style"],
}
# Shapes of the friendly tensors ("frames" = asr frames; the others have two points per frame).
SHAPES: dict[str, list[int | str]] = {
    "asr": [1, 512, "frames"],
    "f0": [1, "points"],
    "energy": [1, "points"],
    "decoder_style": [1, 128],
    "phase": [1, HARMONICS, "points"],
    "durations": [1, "tokens"],
    "hidden": [1, HIDDEN_CHANNELS, "points"],
}
# The generator's carried instance-norm statistics (see the module docstring): the weight of the
# carried values, and per norm j the inputs carried_j_{mean,var} and outputs norm_j_{mean,var}.
CARRIED_WEIGHT = "carried_weight"
NORM_STATISTICS = ("mean", "var")
NORM_PREFIX = "/decoder/decoder/generator/"


def carried_input(norm: int, statistic: str) -> str:
    return f"carried_{norm}_{statistic}"


def norm_output(carried: str) -> str:
    """The output whose value the input `carried` (a `carried_input` name) takes into the next window."""
    return "norm_" + carried.removeprefix("carried_")


@dataclass(frozen=True, slots=True)
class DerivedGraphs:
    """The three graphs derived from the official one, as the bytes that were checked against
    their manifest (never re-read by path: derived.py); `OnnxSplitRuntime` (runtime.py) runs them."""

    encoder: bytes
    frontend: bytes
    generator: bytes

    @classmethod
    def of(cls, contents: Mapping[str, bytes]) -> DerivedGraphs:
        return cls(contents[ENCODER_FILE], contents[FRONTEND_FILE], contents[GENERATOR_FILE])


def derived_folder(directory: Path) -> Path:
    """Where this derivation version's files live inside a derived-files directory."""
    return directory / f"kokoro-split-v{DERIVATION_VERSION}"


def choose_derived_dir(model_dir: Path, source_sha256: str, cache: Path) -> Path:
    """Where to keep the derived graphs when no directory is configured: `derived/` beside the
    model when it already holds them or can be written, else a folder of voicestream's cache
    (`cache`) named after the source (a read-only model mount, e.g. SageMaker's /opt/ml/model)."""
    beside = model_dir / "derived"
    if stale_reason(derived_folder(beside), source_sha256, DERIVATION_VERSION, DERIVED_FILES) is None:
        return beside
    if _writable(beside):
        return beside
    return cache / "derived" / source_sha256[:16]


def _writable(directory: Path) -> bool:
    """Can files be created in `directory` (or, when it does not exist, can it be created)? Tried,
    not inferred from permission bits: root passes those, not a read-only mount."""
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            return False
        existing = existing.parent
    if not existing.is_dir():
        return False
    try:
        with tempfile.TemporaryFile(dir=existing):
            return True
    except OSError:
        return False


def split_graphs(source: Path, source_sha256: str, directory: Path) -> DerivedGraphs:
    """The verified graphs for `source` under `directory`, derived now if missing or stale."""
    folder = derived_folder(directory)
    loaded = load_derived(folder, source_sha256, DERIVATION_VERSION, DERIVED_FILES, lambda out: derive(source, out))
    return DerivedGraphs.of(loaded.contents)


def derive(source: Path, out: Path) -> list[str]:
    """Cut `source` into the three graphs under `out`, and prove that together they are the source."""
    import onnx
    import onnx.utils

    model = onnx.load(str(source))
    extractor = onnx.utils.Extractor(model)
    encoder = extractor.extract_model(["tokens", "style", "speed"], list(ENCODER_OUTPUTS.values()))
    _rename_outputs(encoder, ENCODER_OUTPUTS)
    frontend = extractor.extract_model(list(FRONTEND_INPUTS.values()), [HIDDEN[1]])
    _rename_inputs(frontend, FRONTEND_INPUTS)
    _rename_outputs(frontend, dict([HIDDEN]))
    generator = extractor.extract_model(list(GENERATOR_INPUTS.values()), ["audio"])
    _rename_inputs(generator, GENERATOR_INPUTS)
    _carry_norm_statistics(generator)
    graphs = {ENCODER_FILE: encoder, FRONTEND_FILE: frontend, GENERATOR_FILE: generator}
    for name, graph_model in graphs.items():
        graph_model.graph.name = f"{model.graph.name or 'kokoro'} split v{DERIVATION_VERSION} {name}"
        onnx.checker.check_model(graph_model)
        onnx.save(graph_model, str(out / name))
    _prove_equivalent(source, DerivedGraphs.of({name: (out / name).read_bytes() for name in DERIVED_FILES}))
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


def _carry_norm_statistics(model: ModelProto) -> None:
    """Blend each instance norm's mean and variance with carried values (module docstring).

    An instance norm in the exported graph is `m = ReduceMean(x)`, `d = x - m`,
    `v = ReduceMean(d * d)`, then `d / sqrt(v + eps)`: both ReduceMean outputs are rerouted
    through `w * carried + (1 - w) * own` before their consumers use them."""
    from onnx import TensorProto, helper

    graph = model.graph
    by_name = {node.name: node for node in graph.node}
    shapes = {value.name: value for value in graph.value_info}
    means = [
        node
        for node in graph.node
        if node.op_type == "ReduceMean" and node.name.startswith(NORM_PREFIX) and node.name.endswith("/ReduceMean")
    ]
    graph.input.append(helper.make_tensor_value_info(CARRIED_WEIGHT, TensorProto.FLOAT, [1]))
    graph.initializer.append(helper.make_tensor("carried_one", TensorProto.FLOAT, [1], [1.0]))
    own_weight = "carried_own_weight"
    # The blend of a statistic goes right after the ReduceMean that computes it, so the nodes stay
    # in the topological order ONNX requires.
    blends: dict[str, list[NodeProto]] = {}
    for norm, mean in enumerate(means):
        variance = by_name[mean.name.removesuffix("ReduceMean") + "ReduceMean_2"]
        for statistic, node in zip(NORM_STATISTICS, (mean, variance), strict=True):
            blended, carried = node.output[0], carried_input(norm, statistic)
            own = f"{blended}_own"
            node.output[0] = own
            if blended in shapes:  # keep the statistic's shape known (onnx's extractor needs it)
                described = graph.value_info.add()
                described.CopyFrom(shapes[blended])
                described.name = own
            channels: list[int | str] = [1, f"channels_{norm}", 1]
            graph.input.append(helper.make_tensor_value_info(carried, TensorProto.FLOAT, channels))
            graph.output.append(helper.make_tensor_value_info(norm_output(carried), TensorProto.FLOAT, channels))
            blends[node.name] = [
                helper.make_node("Mul", [carried, CARRIED_WEIGHT], [f"{blended}_carried"], name=f"{blended}_carried"),
                helper.make_node("Mul", [own, own_weight], [f"{blended}_own_part"], name=f"{blended}_own_part"),
                helper.make_node("Add", [f"{blended}_carried", f"{blended}_own_part"], [blended], name=blended),
                helper.make_node("Identity", [blended], [norm_output(carried)]),
            ]
    nodes = [helper.make_node("Sub", ["carried_one", CARRIED_WEIGHT], [own_weight], name=own_weight)]
    for node in graph.node:
        nodes += [node, *blends.get(node.name, [])]
    del graph.node[:]
    graph.node.extend(nodes)


def no_carried_statistics(input_names: list[str]) -> dict[str, Any]:
    """Inputs, among a graph's `input_names`, that carry nothing: weight 0, so each norm uses its
    window's own statistics (none for a graph without carried statistics: the frontend)."""
    if CARRIED_WEIGHT not in input_names:
        return {}
    carried = {
        name: np.zeros((1, 1, 1), dtype=np.float32)
        for name in input_names
        if name.startswith("carried_") and name != CARRIED_WEIGHT
    }
    return {**carried, CARRIED_WEIGHT: np.zeros(1, dtype=np.float32)}


def _prove_equivalent(source: Path, graphs: DerivedGraphs) -> None:
    """The three graphs over one whole-sentence window must give the source's samples exactly."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    providers = ["CPUExecutionProvider"]

    def run(graph: Path | bytes, inputs: dict[str, Any]) -> list[Any]:
        model = graph if isinstance(graph, bytes) else str(graph)
        session = onnxruntime.InferenceSession(model, options, providers=providers)
        # The generator's carried statistics (if any) carry nothing: its own statistics, as the source.
        nothing_carried = no_carried_statistics([value.name for value in session.get_inputs()])
        outputs: list[Any] = session.run(None, {**inputs, **nothing_carried})
        return outputs

    tokens = np.array([[0, 50, 83, 54, 156, 57, 135, 16, 0]], dtype=np.int64)  # a few phonemes
    style = (np.sin(np.arange(256, dtype=np.float32)) * 0.2).reshape(1, 256)
    inputs = {"tokens": tokens, "style": style, "speed": np.array([1.0], dtype=np.float32)}
    (expected,) = run(source, inputs)
    features = dict(zip(ENCODER_OUTPUTS, run(graphs.encoder, inputs), strict=True))
    (hidden,) = run(graphs.frontend, {name: features[name] for name in FRONTEND_INPUTS})
    (audio, *_) = run(
        graphs.generator, {HIDDEN[0]: hidden, **{name: features[name] for name in GENERATOR_INPUTS if name in features}}
    )
    frames = int(features["durations"].sum())
    if audio.shape != expected.shape or not np.array_equal(audio, expected) or len(audio) != frames * SAMPLES_PER_FRAME:
        raise AssetError(f"the split graphs of {source.name} do not reproduce it: derivation bug, please report")
