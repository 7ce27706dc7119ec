"""Kokoro-82M v1.0 int8 ONNX on onnxruntime: the CPU default engine.

The graph takes `tokens` int64 [1, N+2] (phoneme ids wrapped in pad 0s), `style` float32
[1, 256] (the voice's row N-1: Kokoro voices hold one style vector per input length) and
`speed` float32 [1]; it returns float32 audio at 24 kHz.

The graph runs as two derived graphs (kokoro_split.py): per phoneme piece (<= 510 phonemes) the
encoder runs once, then the decoder runs over windows of frames (windows.py), each window's
audio yielded as soon as it is computed, so first audio does not wait for the whole sentence.
`decoder_windows=None` decodes each piece in one window: the original graph's samples exactly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicestream import env
from voicestream.engine.assets import OnnxAssets, manifest, onnx_assets
from voicestream.engine.base import AudioChunk, EngineError, SpeechEngine
from voicestream.engine.g2p import G2P, split_phonemes
from voicestream.engine.kokoro_split import choose_derived_dir, split_graphs
from voicestream.engine.split_runtime import SplitKokoro
from voicestream.engine.voices import OFFICIAL_VOICES, parse_voice_spec
from voicestream.engine.windows import WindowPlan
from voicestream.env import DecoderWindows

VoiceArray = npt.NDArray[np.float32]
VOICE_SHAPE = (510, 256)
DEFAULT_WINDOWS = WindowPlan()


def window_plan(setting: DecoderWindows) -> WindowPlan | None:
    """The plan a VOICESTREAM_DECODER_WINDOWS setting names ("off": None, whole sentences)."""
    if setting == "off":
        return None
    first, growth, largest = setting
    return dataclasses.replace(DEFAULT_WINDOWS, first=first, growth=growth, largest=largest)


def default_threads() -> int:
    """Inference threads when none are given: every core, up to 4 (more did not help here)."""
    return min(os.cpu_count() or 1, 4)


class OnnxEngine(SpeechEngine):
    name = "onnx"

    def __init__(
        self,
        model_dir: Path | None = None,
        threads: int | None = None,
        *,
        decoder_windows: WindowPlan | None = DEFAULT_WINDOWS,
        derived_dir: Path | None = None,
    ) -> None:
        """`decoder_windows=None`: whole-sentence decoding. `derived_dir`: where the split graphs
        are derived (default: `derived/` in the model directory)."""
        super().__init__()
        self.model_dir = model_dir
        self.threads = threads or default_threads()
        self.decoder_windows = decoder_windows
        self.derived_dir = derived_dir
        self._g2p = G2P()
        self._voice_cache: dict[str, VoiceArray] = {}
        self._voice_lock = threading.Lock()
        self._assets: OnnxAssets | None = None
        self._split: SplitKokoro | None = None
        self._vocab: dict[str, int] = {}

    @property
    def split(self) -> SplitKokoro:
        """The loaded encoder/decoder pair (its `encode` also gives per-token durations)."""
        if self._split is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        return self._split

    def _load(self) -> None:
        # The model and config are verified now; voices are verified as each is first used.
        assets = onnx_assets(self.model_dir, voices=())
        source_sha256 = manifest()["onnx_model"]["sha256"]
        derived_dir = self.derived_dir or choose_derived_dir(assets.model.parent, source_sha256, env.cache_dir())
        graphs = split_graphs(assets.model, source_sha256, derived_dir)
        self.derived_dir = derived_dir
        self._split = SplitKokoro(graphs, self.threads)
        self._vocab = json.loads(assets.config.read_text())["vocab"]
        self._assets = assets
        self._voice("af_heart")
        self._g2p.warm("en-us")

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def _voice(self, spec: str) -> VoiceArray:
        """The (blended) style table of a voice spec, cached per spec."""
        with self._voice_lock:
            cached = self._voice_cache.get(spec)
            if cached is not None:
                return cached
            blend = parse_voice_spec(spec, self.voices())
            table = np.zeros(VOICE_SHAPE, dtype=np.float32)
            for name, weight in blend.parts:
                table += weight * self._voice_file(name)
            self._voice_cache[spec] = table
            return table

    def _voice_file(self, name: str) -> VoiceArray:
        assert self._assets is not None
        onnx_assets(self.model_dir, voices=(name,))  # size + sha256 check before first use
        raw = np.fromfile(self._assets.voice_path(name), dtype="<f4")
        return raw.reshape(VOICE_SHAPE)

    def phonemes(self, text: str, voice: str) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        language = parse_voice_spec(voice, self.voices()).language
        return split_phonemes(self._g2p.phonemize(text, language))

    def _synthesize(self, text: str, voice: str, speed: float) -> Iterator[AudioChunk]:
        style_table = self._voice(voice)
        pieces = self.phonemes(text, voice)
        return self._run_pieces(pieces, style_table, speed)

    def _run_pieces(self, pieces: list[str], style_table: VoiceArray, speed: float) -> Iterator[AudioChunk]:
        for piece in pieces:
            ids = [self._vocab[p] for p in piece if p in self._vocab]
            if not ids:
                continue
            features = self.split.encode(ids, style_table[len(ids) - 1 : len(ids)], speed)
            for samples in self.split.stream(features, self.decoder_windows):
                yield AudioChunk(samples=samples)
