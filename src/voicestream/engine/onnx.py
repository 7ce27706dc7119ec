"""Kokoro-82M v1.0 int8 ONNX on onnxruntime: the CPU default engine.

The graph takes `tokens` int64 [1, N+2] (phoneme ids wrapped in pad 0s), `style` float32
[1, 256] (the voice's row N-1: Kokoro voices hold one style vector per input length) and
`speed` float32 [1]; it returns float32 audio at 24 kHz. One inference per phoneme piece
(<= 510 phonemes), each yielded as soon as it is computed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicestream.engine.assets import OnnxAssets, onnx_assets
from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.g2p import G2P, G2PSettings, split_phonemes
from voicestream.engine.ort_options import run_options, session_options
from voicestream.engine.voices import OFFICIAL_VOICES, VoiceTables, parse_voice_spec

VoiceArray = npt.NDArray[np.float32]
VOICE_SHAPE = (510, 256)


def default_threads() -> int:
    """Inference threads when none are given: every core, up to 4 (more did not help here)."""
    return min(os.cpu_count() or 1, 4)


class OnnxEngine(SpeechEngine):
    name = "onnx"

    def __init__(
        self, model_dir: Path | None = None, threads: int | None = None, g2p: G2PSettings | None = None
    ) -> None:
        super().__init__()
        self.model_dir = model_dir
        self.threads = threads or default_threads()
        self._g2p = G2P(g2p)  # worker processes, each conversion time-bounded (g2p.py)
        self._voice_tables = VoiceTables(self._voice_file, self.voices())  # bounded LRU of blends
        self._assets: OnnxAssets | None = None
        self._session: object | None = None
        self._run_options: object | None = None
        self._vocab: dict[str, int] = {}

    def _load(self) -> None:
        import onnxruntime

        # The model and config are verified now; voices are verified as each is first used.
        assets = onnx_assets(self.model_dir, voices=())
        options = session_options(onnxruntime, self.threads)  # arena settings: ort_options.py
        self._session = onnxruntime.InferenceSession(str(assets.model), options, providers=["CPUExecutionProvider"])
        self._run_options = run_options(onnxruntime)
        self._vocab = json.loads(assets.config.read_text())["vocab"]
        self._assets = assets
        self._voice("af_heart")
        self._g2p.warm("en-us")

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def close(self) -> None:
        self._g2p.close()

    def _voice(self, spec: str) -> VoiceArray:
        """The (blended) style table of a voice spec (cached by canonical blend, bounded)."""
        return self._voice_tables.get(spec)

    def _voice_file(self, name: str) -> VoiceArray:
        assert self._assets is not None
        onnx_assets(self.model_dir, voices=(name,))  # size + sha256 check before first use
        raw = np.fromfile(self._assets.voice_path(name), dtype="<f4")
        return raw.reshape(VOICE_SHAPE)

    def phonemes(self, text: str, voice: str) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        language = parse_voice_spec(voice, self.voices()).language
        return split_phonemes(self._g2p.phonemize(text, language))

    def _count_phonemes(self, texts: list[str], voice: str) -> int:
        # One G2P task for the whole request, time-bounded; synthesis then finds each text cached.
        language = parse_voice_spec(voice, self.voices()).language
        return sum(len(phonemes) for phonemes in self._g2p.phonemize_many(texts, language))

    def _synthesize(self, text: str, voice: str, speed: float) -> Iterator[AudioChunk]:
        style_table = self._voice(voice)
        pieces = self.phonemes(text, voice)
        return self._run_pieces(pieces, style_table, speed)

    def _run_pieces(self, pieces: list[str], style_table: VoiceArray, speed: float) -> Iterator[AudioChunk]:
        import onnxruntime

        session = self._session
        assert isinstance(session, onnxruntime.InferenceSession)
        for piece in pieces:
            ids = [self._vocab[p] for p in piece if p in self._vocab]
            if not ids:
                continue
            tokens = np.array([[0, *ids, 0]], dtype=np.int64)
            style = style_table[len(ids) - 1 : len(ids)]
            (audio,) = session.run(
                None,
                {"tokens": tokens, "style": style, "speed": np.array([speed], dtype=np.float32)},
                self._run_options,
            )
            yield AudioChunk(samples=np.asarray(audio, dtype=np.float32).reshape(-1))
