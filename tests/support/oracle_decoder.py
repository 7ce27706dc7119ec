"""The decoder stages with their sentence-wide statistics made inputs: proof of the receptive fields.

The decoder normalises over whatever span it is given: instance norms (ReduceMean of the
activations and of their squared deviations over time) and DynamicQuantizeLinear nodes
(per-tensor scale and zero point from the activations' range). Feeding a window the values the
whole sentence produced removes that dependence, so what is left is pure convolution: with
enough context the window's core must equal the whole-sentence output exactly. Each stage
(frontend, generator) is checked on its own and in sequence, so each context is measured.

One more input is taken from the whole sentence: the harmonic source's phase after its x300
linear upsampling (one value per sample). onnxruntime computes that Resize's source coordinate
in float32 from the absolute output index, so in a long tensor it rounds differently than in a
short one: past ~1 s the whole-sentence graph's phase differs from a window's by interpolation
rounding (~19 dB waveform SNR on its own), which is the graph's arithmetic, not the context.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from voicestream.engine.onnx.graphs import DerivedGraphs, no_carried_statistics
from voicestream.engine.onnx.runtime import SentenceFeatures
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME, Window

UPSAMPLED_PHASE = "/decoder/decoder/generator/m_source/l_sin_gen/Resize_1_output_0"  # [1, 9, samples]
Arrays = dict[str, Any]


class OracleStage:
    """One derived graph run twice: recording its statistics over a whole sentence, then
    replaying them in a window. `sample_rate_extra`: tensors also taken from the whole run,
    one value per audio sample (sliced to the window's span)."""

    def __init__(self, graph: bytes, output: str, sample_rate_extra: tuple[str, ...] = (), threads: int = 2) -> None:
        import onnx
        import onnx.utils
        import onnxruntime
        from onnx import TensorProto, helper

        model = onnx.load_model_from_string(graph)
        inputs = [value.name for value in model.graph.input]
        # The generator's carried norm statistics (engine/onnx/graphs.py) carry nothing here: each norm
        # computes its own, which the recording records and the replay replaces.
        self._fixed = no_carried_statistics(inputs)
        means = [node.output[0] for node in model.graph.node if node.op_type == "ReduceMean"]
        quantizers = [node for node in model.graph.node if node.op_type == "DynamicQuantizeLinear"]
        scales = [name for node in quantizers for name in node.output[1:]]
        self.counts = (len(means), len(quantizers))
        self.statistic_names = means + scales
        self.extra = list(sample_rate_extra)
        self.output = output
        extractor = onnx.utils.Extractor(model)
        recording = extractor.extract_model(inputs, [output, *self.extra, *self.statistic_names])
        replaying = extractor.extract_model(inputs + means + self.extra, [output])
        graph_proto = replaying.graph
        nodes = []
        for node in graph_proto.node:
            if node.op_type != "DynamicQuantizeLinear":
                nodes.append(node)
                continue
            quantized, scale, zero_point = node.output
            nodes.append(helper.make_node("QuantizeLinear", [node.input[0], scale, zero_point], [quantized]))
            graph_proto.input.append(helper.make_tensor_value_info(scale, TensorProto.FLOAT, []))
            graph_proto.input.append(helper.make_tensor_value_info(zero_point, TensorProto.UINT8, []))
        del graph_proto.node[:]
        graph_proto.node.extend(nodes)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        providers = ["CPUExecutionProvider"]
        self._recording: Any = onnxruntime.InferenceSession(recording.SerializeToString(), options, providers=providers)
        self._replaying: Any = onnxruntime.InferenceSession(replaying.SerializeToString(), options, providers=providers)
        self._replay_inputs = [value.name for value in self._replaying.get_inputs()]

    def whole(self, inputs: Arrays) -> tuple[npt.NDArray[np.float32], Arrays]:
        output, *recorded = self._recording.run(None, {**inputs, **self._fixed})
        return output, dict(zip([*self.extra, *self.statistic_names], recorded, strict=True))

    def window(self, inputs: Arrays, statistics: Arrays, span: tuple[int, int]) -> npt.NDArray[np.float32]:
        first, last = span[0] * SAMPLES_PER_FRAME, span[1] * SAMPLES_PER_FRAME
        sliced = {name: statistics[name][:, :, first:last] for name in self.extra}
        feed = {**inputs, **self._fixed, **statistics, **sliced}
        (output,) = self._replaying.run([self.output], {name: feed[name] for name in self._replay_inputs})
        return np.asarray(output)


class OracleDecoder:
    """Frontend then generator, each normalised with the whole sentence's statistics."""

    def __init__(self, graphs: DerivedGraphs, threads: int = 2) -> None:
        self.frontend = OracleStage(graphs.frontend, "hidden", threads=threads)
        self.generator = OracleStage(graphs.generator, "audio", (UPSAMPLED_PHASE,), threads=threads)

    def whole(self, features: SentenceFeatures) -> tuple[npt.NDArray[np.float32], dict[str, Arrays]]:
        """The whole sentence's audio and every statistic each stage normalised with."""
        everything = Window(0, features.frames, 0, features.frames)
        hidden, frontend_statistics = self.frontend.whole(features.frontend_inputs(everything))
        audio, generator_statistics = self.generator.whole(features.generator_inputs(everything, hidden))
        return audio.reshape(-1), {"frontend": frontend_statistics, "generator": generator_statistics}

    def window(
        self, features: SentenceFeatures, window: Window, statistics: dict[str, Arrays]
    ) -> npt.NDArray[np.float32]:
        """The window's generator span, each stage normalised with the whole sentence's statistics."""
        hidden = self.frontend.window(
            features.frontend_inputs(window), statistics["frontend"], (window.frontend_start, window.frontend_end)
        )
        audio = self.generator.window(
            features.generator_inputs(window, hidden), statistics["generator"], (window.span_start, window.span_end)
        )
        return audio.reshape(-1)


def reach(
    stage: OracleStage,
    inputs: Arrays,
    statistics: Arrays,
    name: str,
    points_per_frame: int,
    frame: int,
    amount: float = 0.25,
) -> tuple[int, int]:
    """Frames of the stage's output (relative to `frame`) that change when the input `name`
    (a graph input or a sample-rate extra) changes at `frame` alone, with the statistics fixed:
    the stage's receptive field, measured, as (earliest, latest) offsets."""
    frames = inputs["f0"].shape[-1] // 2
    base = stage.window(inputs, statistics, (0, frames))
    changed_inputs, changed_statistics = dict(inputs), dict(statistics)
    target = changed_statistics if name in stage.extra else changed_inputs
    bumped = np.array(target[name], copy=True)
    bumped[..., frame * points_per_frame : (frame + 1) * points_per_frame] += amount
    target[name] = bumped
    output = stage.window(changed_inputs, changed_statistics, (0, frames))
    difference = np.abs(output - base)  # time is the last axis, any number of points per frame
    per_frame = difference.reshape(-1, frames, difference.shape[-1] // frames).max(axis=(0, 2))
    touched = np.nonzero(per_frame > 0)[0]
    if len(touched) == 0:
        raise AssertionError(f"changing {name} at frame {frame} by {amount} changed nothing: choose a larger amount")
    return int(touched.min()) - frame, int(touched.max()) - frame
