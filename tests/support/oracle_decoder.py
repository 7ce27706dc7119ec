"""The decoder graph with its sentence-wide statistics made inputs: proof of the receptive field.

The decoder normalises over whatever span it is given: 54 instance norms (ReduceMean of the
activations and of their squared deviations over time) and 68 DynamicQuantizeLinear nodes
(per-tensor scale and zero point from the activations' range). Feeding a window the values the
whole sentence produced removes that dependence, so what is left is pure convolution: with
enough context the window's core must equal the whole-sentence samples exactly.

One more input is taken from the whole sentence: the harmonic source's phase after its x300
linear upsampling (one value per sample). onnxruntime computes that Resize's source coordinate
in float32 from the absolute output index, so in a long tensor it rounds differently than in a
short one: past ~1 s the whole-sentence graph's phase differs from a window's by interpolation
rounding (~19 dB waveform SNR on its own), which is the graph's arithmetic, not the context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voicestream.engine.kokoro_split import SAMPLES_PER_FRAME
from voicestream.engine.split_runtime import SentenceFeatures
from voicestream.engine.windows import Window

UPSAMPLED_PHASE = "/decoder/decoder/generator/m_source/l_sin_gen/Resize_1_output_0"  # [1, 9, samples]


class OracleDecoder:
    def __init__(self, decoder_graph: Path, threads: int = 2) -> None:
        import onnx
        import onnx.utils
        import onnxruntime
        from onnx import TensorProto, helper

        model = onnx.load(str(decoder_graph))
        inputs = [value.name for value in model.graph.input]
        means = [node.output[0] for node in model.graph.node if node.op_type == "ReduceMean"]
        quantizers = [node for node in model.graph.node if node.op_type == "DynamicQuantizeLinear"]
        scales = [name for node in quantizers for name in node.output[1:]]
        assert len(means) == 108 and len(quantizers) == 68, (len(means), len(quantizers))
        self.statistic_names = means + scales
        extractor = onnx.utils.Extractor(model)
        recording = extractor.extract_model(inputs, ["audio", UPSAMPLED_PHASE, *self.statistic_names])
        replaying = extractor.extract_model(inputs + means + [UPSAMPLED_PHASE], ["audio"])
        graph = replaying.graph
        nodes = []
        for node in graph.node:
            if node.op_type != "DynamicQuantizeLinear":
                nodes.append(node)
                continue
            quantized, scale, zero_point = node.output
            nodes.append(helper.make_node("QuantizeLinear", [node.input[0], scale, zero_point], [quantized]))
            graph.input.append(helper.make_tensor_value_info(scale, TensorProto.FLOAT, []))
            graph.input.append(helper.make_tensor_value_info(zero_point, TensorProto.UINT8, []))
        del graph.node[:]
        graph.node.extend(nodes)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        providers = ["CPUExecutionProvider"]
        self._recording: Any = onnxruntime.InferenceSession(recording.SerializeToString(), options, providers=providers)
        self._replaying: Any = onnxruntime.InferenceSession(replaying.SerializeToString(), options, providers=providers)

    def whole(self, features: SentenceFeatures) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """The whole sentence's audio and every statistic it normalised with."""
        everything = Window(0, features.frames, 0, features.frames)
        audio, phase, *statistics = self._recording.run(None, features.window_inputs(everything))
        recorded = dict(zip(self.statistic_names, statistics, strict=True))
        recorded[UPSAMPLED_PHASE] = phase
        return np.asarray(audio).reshape(-1), recorded

    def window(self, features: SentenceFeatures, window: Window, statistics: dict[str, Any]) -> npt.NDArray[np.float32]:
        """The window's computed span, normalised with the whole sentence's statistics."""
        first, last = window.span_start * SAMPLES_PER_FRAME, window.span_end * SAMPLES_PER_FRAME
        phase = statistics[UPSAMPLED_PHASE][:, :, first:last]
        inputs = {**features.window_inputs(window), **statistics, UPSAMPLED_PHASE: phase}
        (audio,) = self._replaying.run(["audio"], inputs)
        return np.asarray(audio).reshape(-1)
