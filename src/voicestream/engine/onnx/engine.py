"""Kokoro-82M v1.0 int8 ONNX on onnxruntime: the CPU default engine.

The graph takes `tokens` int64 [1, N+2] (phoneme ids wrapped in pad 0s), `style` float32
[1, 256] (the voice's row N-1: Kokoro voices hold one style vector per input length) and
`speed` float32 [1]; it returns float32 audio at 24 kHz.

The graph runs as three derived graphs (graphs.py, runtime.py), under the pipeline every engine
shares (streaming/pipeline.py): per phoneme piece (<= 510 phonemes) the encoder runs once (a
long piece's head first: lookahead.py), then the decoder's frontend and generator run over
windows of frames (windows.py), each window's audio yielded as soon as it is computed, with the
words that start in it (word_timings.py), so first audio waits neither for the whole sentence's
decoding nor for its encoding. The leading pad's silence is cut to `lead_in_frames`.
`OnnxStrategy(decoder_windows=None, lead_in_frames=None)` gives the original graph's samples
exactly. docs/engine.md has the design, docs/engine-evidence.md its measurements.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from voicestream import env
from voicestream.engine.base import AudioChunk, EngineError
from voicestream.engine.kokoro import KokoroEngine
from voicestream.engine.models.assets import OnnxAssets, manifest, onnx_assets, read_voice
from voicestream.engine.onnx.graphs import choose_derived_dir, split_graphs
from voicestream.engine.onnx.runtime import OnnxSplitRuntime, SentenceFeatures, join
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.lookahead import LookaheadPlan
from voicestream.engine.streaming.pacing import MARGIN as PACING_MARGIN
from voicestream.engine.streaming.pipeline import LEAD_IN_FRAMES, Pipeline, Streaming
from voicestream.engine.streaming.windows import WindowPlan
from voicestream.engine.text.g2p import G2PSettings, Phonemes
from voicestream.engine.text.options import TextOptions
from voicestream.engine.text.voices import VoiceTables
from voicestream.env import DecoderWindows

VoiceArray = npt.NDArray[np.float32]
VOICE_SHAPE = (510, 256)
# Later windows carry their norms' statistics (8 frames of context); the first window computes 12
# frames into the leading silence and 8 past its 16-frame core: the span a 12-frame core had with
# 12 after it, 4 more frames of first audio for the same compute (docs/engine.md, "The first
# window's span").
DEFAULT_WINDOWS = WindowPlan(first=16, carried_context=8, first_right_context=8)
DEFAULT_LOOKAHEAD = LookaheadPlan()
DEFAULT_LEAD_IN_FRAMES = LEAD_IN_FRAMES


def window_plan(setting: DecoderWindows) -> WindowPlan | None:
    """The plan a `--decoder-windows` setting names ("off": None, whole sentences)."""
    if setting == "off":
        return None
    first, growth, largest = setting
    return dataclasses.replace(DEFAULT_WINDOWS, first=first, growth=growth, largest=largest)


@dataclass(frozen=True, slots=True)
class OnnxStrategy:
    """How the engine streams a sentence: production's choices by default. Benchmarks and tests
    construct an engine with a baseline strategy instead of switching a running engine's parts.

    `decoder_windows=None`: whole-sentence decoding. `lookahead`: how a long piece's head is
    encoded first (lookahead.py); None: never. `lead_in_frames`: frames of the leading silence
    kept before a piece's first phoneme; None: all of it (the original graph's samples, with
    `decoder_windows=None`). `pacing`: cut later windows to what the engine decodes while the
    listener's audio plays (pacing.py); False: the plan's schedule alone. `pacing_margin`: the
    share of that audio a window may take to decode. `spinning`: onnxruntime's busy-waiting
    threads (split_runtime.py)."""

    decoder_windows: WindowPlan | None = DEFAULT_WINDOWS
    lookahead: LookaheadPlan | None = DEFAULT_LOOKAHEAD
    lead_in_frames: int | None = DEFAULT_LEAD_IN_FRAMES
    pacing: bool = True
    pacing_margin: float = PACING_MARGIN
    spinning: bool = False

    def __post_init__(self) -> None:
        self.streaming()  # refused when the engine is made, not at its first synthesis

    def streaming(self) -> Streaming:
        """What the shared pipeline is told (spinning is the runtime's)."""
        return Streaming(
            windows=self.decoder_windows,
            lookahead=self.lookahead,
            lead_in_frames=self.lead_in_frames,
            pacing=self.pacing,
            pacing_margin=self.pacing_margin,
        )


PRODUCTION: Final = OnnxStrategy()


def default_threads() -> int:
    """Inference threads when none are given: every core, up to 4 (more did not help here)."""
    return min(os.cpu_count() or 1, 4)


class OnnxEngine(KokoroEngine):
    name = "onnx"

    def __init__(
        self,
        model_dir: Path | None = None,
        threads: int | None = None,
        *,
        strategy: OnnxStrategy = PRODUCTION,
        derived_dir: Path | None = None,
        g2p: G2PSettings | None = None,
    ) -> None:
        """`strategy`: how sentences are streamed (production's by default). `derived_dir`: where
        the split graphs are derived (default: `derived/` beside the model when it holds them or
        is writable, else voicestream's cache). `g2p`: its worker processes (each conversion
        time-bounded: g2p.py)."""
        super().__init__(g2p)
        self.model_dir = model_dir
        self.threads = threads or default_threads()
        self.strategy = strategy
        self.derived_dir = derived_dir
        self._voice_tables = VoiceTables(self._voice_file, self.voices())  # bounded LRU of blends
        self._assets: OnnxAssets | None = None
        self._split: OnnxSplitRuntime | None = None
        self._pipeline: Pipeline[SentenceFeatures, VoiceArray] | None = None
        self._vocab: dict[str, int] = {}

    @property
    def split(self) -> OnnxSplitRuntime:
        """The loaded encoder/decoder pair (its `encode` also gives per-token durations)."""
        if self._split is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        return self._split

    @property
    def pipeline(self) -> Pipeline[SentenceFeatures, VoiceArray]:
        """The synthesis loop over the split graphs, streaming as the strategy says."""
        if self._pipeline is None:
            raise EngineError(f"{self.name} engine is not loaded: call load() first")
        return self._pipeline

    def _load(self) -> None:
        # The model and config are verified now; voices are verified as each is first used.
        assets = onnx_assets(self.model_dir, voices=())
        source_sha256 = manifest()["onnx_model"]["sha256"]
        derived_dir = self.derived_dir or choose_derived_dir(assets.model.parent, source_sha256, env.cache_dir())
        graphs = split_graphs(assets.model, source_sha256, derived_dir)
        self.derived_dir = derived_dir
        self._split = OnnxSplitRuntime(graphs, self.threads, spinning=self.strategy.spinning)
        self._vocab = json.loads(assets.config.read_text())["vocab"]
        self._frontend.vocabulary = frozenset(self._vocab)
        self._pipeline = Pipeline(self._split, self._vocab, self.strategy.streaming(), join=join)
        self._assets = assets
        self._voice("af_heart")
        self._frontend.warm()

    def _voice(self, spec: str) -> VoiceArray:
        """The (blended) style table of a voice spec (cached by canonical blend, bounded)."""
        return self._voice_tables.get(spec)

    def _voice_file(self, name: str) -> VoiceArray:
        """One voice's table, from bytes checked as read (`read_voice`): once per voice, and
        never the 92 MB model again (it was verified when the engine loaded)."""
        assert self._assets is not None
        raw = np.frombuffer(read_voice(self._assets, name), dtype="<f4").copy()
        return raw.reshape(VOICE_SHAPE)

    def _synthesize(
        self, text: str, voice: str, speed: float, listener: Listener, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        style_table = self._voice(voice)
        pieces = self.phoneme_pieces(text, voice, text_options)
        return self._run_pieces(pieces, style_table, speed, listener)

    def _run_pieces(
        self, pieces: list[Phonemes], style_table: VoiceArray, speed: float, listener: Listener
    ) -> Iterator[AudioChunk]:
        """The shared pipeline (streaming/pipeline.py) over the split graphs; each piece's style is
        the voice table's row for its number of ids (the original graph's rule)."""

        def style_of(_piece: Phonemes, ids: list[int]) -> VoiceArray:
            return style_table[len(ids) - 1 : len(ids)]

        return self.pipeline.run(pieces, style_of, speed, listener)
