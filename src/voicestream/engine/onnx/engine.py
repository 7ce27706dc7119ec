"""Kokoro-82M v1.0 int8 ONNX on onnxruntime: the CPU default engine.

The graph takes `tokens` int64 [1, N+2] (phoneme ids wrapped in pad 0s), `style` float32
[1, 256] (the voice's row N-1: Kokoro voices hold one style vector per input length) and
`speed` float32 [1]; it returns float32 audio at 24 kHz.

The graph runs as three derived graphs (graphs.py): per phoneme piece (<= 510 phonemes) the
encoder runs once (a long piece's head first: lookahead.py), then the decoder's frontend and
generator run over windows of frames (windows.py), each window's audio yielded as soon as it is
computed, with the words that start in it (word_timings.py), so first audio waits neither for
the whole sentence's decoding nor for its encoding. The leading pad's silence is cut to
`lead_in_frames`. `OnnxStrategy(decoder_windows=None, lead_in_frames=None)` gives the original
graph's samples exactly. docs/engine.md has the design, docs/engine-evidence.md its measurements.
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
from voicestream.engine.base import AudioChunk, EngineError, SpeechEngine
from voicestream.engine.models.assets import OnnxAssets, manifest, onnx_assets, read_voice
from voicestream.engine.onnx.graphs import choose_derived_dir, split_graphs
from voicestream.engine.onnx.lookahead import LookaheadPlan, frames_before, head_split, join
from voicestream.engine.onnx.runtime import DecodedWindow, OnnxSplitRuntime, SentenceFeatures
from voicestream.engine.streaming.pacing import MARGIN as PACING_MARGIN
from voicestream.engine.streaming.pacing import DecodeSpeed, WindowPacer, checked_margin
from voicestream.engine.streaming.windows import WindowPlan, for_listener
from voicestream.engine.streaming.word_timings import FRAME_S, tokenize, words_starting_in
from voicestream.engine.text.frontend import TextFrontend
from voicestream.engine.text.g2p import G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.engine.text.voices import VoiceTables
from voicestream.env import DecoderWindows
from voicestream.wire.voices import OFFICIAL_VOICES

VoiceArray = npt.NDArray[np.float32]
VOICE_SHAPE = (510, 256)
# Later windows carry their norms' statistics (8 frames of context); the first window computes 12
# frames into the leading silence and 8 past its 16-frame core: the span a 12-frame core had with
# 12 after it, 4 more frames of first audio for the same compute (docs/engine.md, "The first
# window's span").
DEFAULT_WINDOWS = WindowPlan(first=16, carried_context=8, first_right_context=8)
DEFAULT_LOOKAHEAD = LookaheadPlan()
# Frames (25 ms) of the leading pad's silence kept before a piece's first phoneme: speech starts
# that much after the first sample (Kokoro's ~0.3-0.45 s lead-in is otherwise heard as latency).
DEFAULT_LEAD_IN_FRAMES = 4


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
        checked_margin(self.pacing_margin)  # refused when the engine is made, not at its first synthesis


PRODUCTION: Final = OnnxStrategy()


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
        strategy: OnnxStrategy = PRODUCTION,
        derived_dir: Path | None = None,
        g2p: G2PSettings | None = None,
    ) -> None:
        """`strategy`: how sentences are streamed (production's by default). `derived_dir`: where
        the split graphs are derived (default: `derived/` beside the model when it holds them or
        is writable, else voicestream's cache). `g2p`: its worker processes (each conversion
        time-bounded: g2p.py)."""
        super().__init__()
        self.model_dir = model_dir
        self.threads = threads or default_threads()
        self.strategy = strategy
        self.derived_dir = derived_dir
        self._decode_speed = DecodeSpeed()
        self._frontend = TextFrontend(self.voices(), g2p)
        self._voice_tables = VoiceTables(self._voice_file, self.voices())  # bounded LRU of blends
        self._assets: OnnxAssets | None = None
        self._split: OnnxSplitRuntime | None = None
        self._vocab: dict[str, int] = {}

    @property
    def split(self) -> OnnxSplitRuntime:
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
        self._split = OnnxSplitRuntime(graphs, self.threads, spinning=self.strategy.spinning)
        self._vocab = json.loads(assets.config.read_text())["vocab"]
        self._frontend.vocabulary = frozenset(self._vocab)
        self._assets = assets
        self._voice("af_heart")
        self._frontend.warm()

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def close(self) -> None:
        self._frontend.close()

    def _voice(self, spec: str) -> VoiceArray:
        """The (blended) style table of a voice spec (cached by canonical blend, bounded)."""
        return self._voice_tables.get(spec)

    def _voice_file(self, name: str) -> VoiceArray:
        """One voice's table, from bytes checked as read (`read_voice`): once per voice, and
        never the 92 MB model again (it was verified when the engine loaded)."""
        assert self._assets is not None
        raw = np.frombuffer(read_voice(self._assets, name), dtype="<f4").copy()
        return raw.reshape(VOICE_SHAPE)

    def phonemes(self, text: str, voice: str, text_options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        return [piece.text for piece in self.phoneme_pieces(text, voice, text_options)]

    def phoneme_pieces(self, text: str, voice: str, text_options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[Phonemes]:
        """The pieces with their words (English voices; other languages carry no words)."""
        return self._frontend.pieces(text, voice, text_options)

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return self._frontend.count(texts, voice, text_options)

    def phoneme_vocabulary(self) -> frozenset[str]:
        return self._frontend.vocabulary

    def _phonemize(self, texts: list[str], voice: str, text_options: TextOptions) -> list[str]:
        return [phonemes.text for phonemes in self._frontend.phonemize(texts, voice, text_options)]

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        style_table = self._voice(voice)
        pieces = self.phoneme_pieces(text, voice, text_options)
        return self._run_pieces(pieces, style_table, speed, ahead_s, behind)

    def _run_pieces(
        self, pieces: list[Phonemes], style_table: VoiceArray, speed: float, ahead_s: float, behind: bool
    ) -> Iterator[AudioChunk]:
        offset_s = 0.0  # audio of the pieces before: word times count from the call's first sample
        strategy = self.strategy
        pace = (
            WindowPacer(self._decode_speed, FRAME_S, ahead_s=ahead_s, margin=strategy.pacing_margin)
            if strategy.pacing
            else None
        )
        for index, piece in enumerate(pieces):
            ids, words = tokenize(piece, self._vocab)
            if not ids:
                continue
            style = style_table[len(ids) - 1 : len(ids)]
            # Only the first piece knows what is ahead of it: when a later one starts is unknown here.
            plan = for_listener(
                strategy.decoder_windows, FRAME_S, ahead_s=ahead_s if index == 0 else 0.0, behind=behind
            )
            emitted = 0
            for decoded in self._windows(ids, style, speed, plan, pace):
                window = decoded.window
                # Seconds of the piece's frame 0 (window.start - emitted: the lead-in frames not emitted).
                start_s = offset_s - (window.start - emitted) * FRAME_S
                timed = words_starting_in(words, decoded.features.durations, window.start, window.end, start_s)
                emitted += window.end - window.start
                yield AudioChunk(samples=decoded.samples, words=timed)
            offset_s += emitted * FRAME_S

    def _windows(
        self, ids: list[int], style: VoiceArray, speed: float, plan: WindowPlan | None, pace: WindowPacer | None
    ) -> Iterator[DecodedWindow]:
        """The piece's decoded windows: after a head encoding when the piece is long (lookahead.py),
        without the leading silence beyond `lead_in_frames`."""
        split = self.split
        # The head is encoded first for the first audio's sake. With a first window's worth of audio
        # (300 ms) still playing, the whole piece's encoding (a fraction of that even at 50 words:
        # docs/engine-evidence.md, "Lookahead") fits in it, and the head's would be spent for
        # nothing; likewise when the server is behind (a first window of 72+ frames, which waits for
        # a worker anyway).
        wants_head = plan is not None and plan.ahead < plan.first and not plan.behind
        head = head_split(ids, self.strategy.lookahead) if wants_head else None
        if plan is None or head is None:
            features = split.encode(ids, style, speed)
            return split.windows(features, plan, self._first_frame(features), pace)
        head_features = split.encode(ids[: head.end], style, speed)

        def whole_piece() -> SentenceFeatures:
            return join(head_features, split.encode(ids, style, speed), head.join)

        join_frame = frames_before(head_features, head.join)
        first_frame = self._first_frame(head_features)
        return split.windows_after_head(head_features, join_frame, whole_piece, plan, first_frame, pace)

    def _first_frame(self, features: SentenceFeatures) -> int:
        """The first frame to emit: the leading pad's frames are silence (Kokoro predicts ~0.3-0.45 s
        of it before every sentence), of which only the last `lead_in_frames` are kept."""
        lead_in_frames = self.strategy.lead_in_frames
        if lead_in_frames is None:
            return 0
        return max(0, int(features.durations[0, 0]) - lead_in_frames)
