"""The split Kokoro graphs on onnxruntime: encode a sentence once, decode it window by window."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import FloatAudio
from voicestream.engine.onnx.graphs import (
    CARRIED_WEIGHT,
    ENCODER_OUTPUTS,
    DerivedGraphs,
    no_carried_statistics,
    norm_output,
)
from voicestream.engine.onnx.ort_options import run_options, session_options
from voicestream.engine.streaming.lookahead import frames_before
from voicestream.engine.streaming.pipeline import decode_windows
from voicestream.engine.streaming.windows import Window, WindowPlan


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

    def frontend_inputs(self, window: Window) -> dict[str, npt.NDArray[np.float32]]:
        """The frontend's inputs for the frames [frontend_start, frontend_end) of `window`."""
        a, b = window.frontend_start, window.frontend_end
        return {
            "asr": self.asr[:, :, a:b],
            "f0": self.f0[:, 2 * a : 2 * b],
            "energy": self.energy[:, 2 * a : 2 * b],
            "decoder_style": self.decoder_style,
        }

    def generator_inputs(
        self, window: Window, frontend_hidden: npt.NDArray[np.float32]
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The generator's inputs for the frames [span_start, span_end) of `window`, given the
        frontend's output over the window's frontend span."""
        a, b = window.span_start, window.span_end
        offset = window.span_start - window.frontend_start
        return {
            "hidden": frontend_hidden[:, :, 2 * offset : 2 * (offset + b - a)],
            "f0": self.f0[:, 2 * a : 2 * b],
            "phase": self.phase[:, :, 2 * a : 2 * b],
            "decoder_style": self.decoder_style,
        }


@dataclass(frozen=True, slots=True)
class NormStatistics:
    """The generator's instance-norm statistics over a sentence's windows so far (graphs.py),
    keyed by the generator inputs that carry them, and how many frames they were taken over."""

    values: dict[str, npt.NDArray[np.float32]]
    frames: int

    def weight_against(self, frames: int) -> float:
        """The carried values' share in a window of `frames` frames: every frame counts once, as
        if the norms saw the windows so far and this one together."""
        return self.frames / (self.frames + frames)


class OnnxSplitRuntime:
    """Sessions over the derived encoder, frontend and generator graphs; safe to use from several
    threads (onnxruntime sessions are)."""

    def __init__(self, graphs: DerivedGraphs, threads: int, *, spinning: bool = False) -> None:
        """`spinning`: let idle inference threads busy-wait for work (onnxruntime's default). Off
        here: a window is a short run with many parallel sections, and a spinning thread burns a
        core that the other thread, or another synthesis, needs: on a shared 2-core machine
        spinning made windowed decoding slower than whole sentences, without it they break even
        (docs/engine-evidence.md, "Why these sizes").

        Every run gives the arena's free blocks back when it ends (ort_options.py). Windows too:
        keeping their blocks was a little faster, but holds two windows' worth of decoder tensors
        for good (docs/engine-evidence.md, "Why these sizes")."""
        import onnxruntime

        options = session_options(onnxruntime, threads)
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        providers = ["CPUExecutionProvider"]
        self._encoder: Any = onnxruntime.InferenceSession(graphs.encoder, options, providers=providers)
        self._frontend: Any = onnxruntime.InferenceSession(graphs.frontend, options, providers=providers)
        self._generator: Any = onnxruntime.InferenceSession(graphs.generator, options, providers=providers)
        self._shrink = run_options(onnxruntime)
        generator_inputs = [value.name for value in self._generator.get_inputs()]
        self._nothing_carried = no_carried_statistics(generator_inputs)
        # Each norm's output next to the input that carries it into the next window.
        self._carried = [name for name in self._nothing_carried if name != CARRIED_WEIGHT]
        self._norm_outputs = [norm_output(name) for name in self._carried]

    def encode(self, ids: list[int], style: npt.NDArray[np.float32], speed: float) -> SentenceFeatures:
        tokens = np.array([[0, *ids, 0]], dtype=np.int64)
        inputs = {"tokens": tokens, "style": style, "speed": np.array([speed], dtype=np.float32)}
        outputs = dict(
            zip(ENCODER_OUTPUTS, self._encoder.run(list(ENCODER_OUTPUTS), inputs, self._shrink), strict=True)
        )
        return SentenceFeatures(**outputs)

    def decode(
        self, features: SentenceFeatures, window: Window, carried: NormStatistics | None = None
    ) -> tuple[FloatAudio, NormStatistics]:
        """The audio of the window's generator span (600 samples per frame), its norms blended with
        the statistics `carried` from the sentence's earlier windows; and the statistics to carry
        on to the next."""
        (hidden,) = self._frontend.run(["hidden"], features.frontend_inputs(window), self._shrink)
        inputs = features.generator_inputs(window, hidden)
        if carried is None:
            inputs.update(self._nothing_carried)
            frames_before = 0
        else:
            inputs.update(carried.values)
            inputs[CARRIED_WEIGHT] = np.array([carried.weight_against(window.frames)], dtype=np.float32)
            frames_before = carried.frames
        audio, *statistics = self._generator.run(["audio", *self._norm_outputs], inputs, self._shrink)
        after = NormStatistics(dict(zip(self._carried, statistics, strict=True)), frames_before + window.frames)
        return np.asarray(audio, dtype=np.float32).reshape(-1), after

    def durations(self, features: SentenceFeatures) -> npt.NDArray[np.int64]:
        return features.durations

    def window_decoder(self) -> Callable[[SentenceFeatures, Window], FloatAudio]:
        """One piece's windows in order, each normalised with the statistics carried from the
        windows before it (graphs.py): the audio of each window's generator span."""
        carried: NormStatistics | None = None

        def decode(features: SentenceFeatures, window: Window) -> FloatAudio:
            nonlocal carried
            audio, carried = self.decode(features, window, carried)
            return audio

        return decode

    def stream(
        self,
        features: SentenceFeatures,
        plan: WindowPlan | None,
        start: int = 0,
        *,
        ahead: int = 0,
        behind: bool = False,
    ) -> Generator[FloatAudio, None, None]:
        """Each window's audio as soon as it is decoded (one window when `plan` is None): the
        shared pipeline's windows (streaming/pipeline.py) over this runtime, unpaced."""
        for decoded in decode_windows(self, features, plan, start, ahead=ahead, behind=behind):
            yield decoded.samples


def join(head: SentenceFeatures, whole: SentenceFeatures, token: int) -> SentenceFeatures:
    """The head's frames before `token`, then the whole piece's from `token` on.

    The harmonic source's phase is a running sum: the whole piece's continues from the head's
    last value with its own increments, so the source never jumps at the join.
    """
    head_frames, whole_frames = frames_before(head.durations, token), frames_before(whole.durations, token)
    h, w = 2 * head_frames, 2 * whole_frames  # f0, energy and phase have two points per frame
    phase_offset = head.phase[:, :, h - 1 : h].astype(np.float64) - whole.phase[:, :, w - 1 : w]
    rest_phase = (whole.phase[:, :, w:].astype(np.float64) + phase_offset).astype(np.float32)
    return SentenceFeatures(
        asr=np.concatenate([head.asr[:, :, :head_frames], whole.asr[:, :, whole_frames:]], axis=2),
        f0=np.concatenate([head.f0[:, :h], whole.f0[:, w:]], axis=1),
        energy=np.concatenate([head.energy[:, :h], whole.energy[:, w:]], axis=1),
        decoder_style=whole.decoder_style,
        phase=np.concatenate([head.phase[:, :, :h], rest_phase], axis=2),
        durations=np.concatenate([head.durations[:, : token + 1], whole.durations[:, token + 1 :]], axis=1),
    )
