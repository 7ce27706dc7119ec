"""The two Kokoro graphs on onnxruntime: encode a sentence once, decode it window by window."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import FloatAudio
from voicestream.engine.kokoro_split import DECODER_INPUTS, ENCODER_OUTPUTS, SAMPLES_PER_FRAME, SplitGraphs
from voicestream.engine.windows import Stitcher, Window, WindowPlan, plan_windows


@dataclass(frozen=True, slots=True)
class SentenceFeatures:
    """Everything the decoder needs for one sentence (part 1's outputs), plus token durations."""

    asr: npt.NDArray[np.float32]  # [1, 512, frames]
    f0: npt.NDArray[np.float32]  # [1, 2 * frames]
    energy: npt.NDArray[np.float32]  # [1, 2 * frames]
    decoder_style: npt.NDArray[np.float32]  # [1, 128]
    phase: npt.NDArray[np.float32]  # [1, 9, 2 * frames]
    durations: npt.NDArray[np.int64]  # [1, tokens + 2]: frames per token, pad tokens included

    @property
    def frames(self) -> int:
        return int(self.asr.shape[2])

    def window_inputs(self, window: Window) -> dict[str, npt.NDArray[np.float32]]:
        """The decoder's inputs for the frames [span_start, span_end) of `window`."""
        a, b = window.span_start, window.span_end
        return {
            "asr": self.asr[:, :, a:b],
            "f0": self.f0[:, 2 * a : 2 * b],
            "energy": self.energy[:, 2 * a : 2 * b],
            "decoder_style": self.decoder_style,
            "phase": self.phase[:, :, 2 * a : 2 * b],
        }


class SplitKokoro:
    """Sessions over the derived encoder and decoder graphs; safe to use from several threads."""

    def __init__(self, graphs: SplitGraphs, threads: int) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        providers = ["CPUExecutionProvider"]
        self._encoder: Any = onnxruntime.InferenceSession(str(graphs.encoder), options, providers=providers)
        self._decoder: Any = onnxruntime.InferenceSession(str(graphs.decoder), options, providers=providers)

    def encode(self, ids: list[int], style: npt.NDArray[np.float32], speed: float) -> SentenceFeatures:
        tokens = np.array([[0, *ids, 0]], dtype=np.int64)
        inputs = {"tokens": tokens, "style": style, "speed": np.array([speed], dtype=np.float32)}
        outputs = dict(zip(ENCODER_OUTPUTS, self._encoder.run(list(ENCODER_OUTPUTS), inputs), strict=True))
        return SentenceFeatures(**outputs)

    def decode(self, features: SentenceFeatures, window: Window) -> FloatAudio:
        """The audio of the window's whole computed span (600 samples per frame)."""
        inputs = features.window_inputs(window)
        assert list(inputs) == list(DECODER_INPUTS)
        (audio,) = self._decoder.run(["audio"], inputs)
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def stream(self, features: SentenceFeatures, plan: WindowPlan | None) -> Generator[FloatAudio, None, None]:
        """Each window's audio as soon as it is decoded (one window when `plan` is None).

        A generator: nothing runs until the consumer asks for the next window, so a consumer
        that stops iterating (a cancelled request) stops the work between windows.
        """
        stitcher = Stitcher(SAMPLES_PER_FRAME, plan.crossfade if plan else 0)
        for window in plan_windows(features.frames, plan):
            yield stitcher.push(window, self.decode(features, window))
