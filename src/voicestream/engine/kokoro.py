"""What every Kokoro engine shares above its runtime: the official voices and the text front end.

The CPU (ONNX) and GPU (torch) engines differ only in the runtime that runs the model's graph
pieces (docs/engine.md); the text side, from a request's text to the phoneme pieces the shared
pipeline speaks, is one `TextFrontend` (text/frontend.py), reached through this base so that
counting, phonemizing and synthesis read the same pieces on every engine.
"""

from __future__ import annotations

from voicestream.engine.base import SpeechEngine
from voicestream.engine.text.frontend import PhonemeSource, TextFrontend
from voicestream.engine.text.g2p import G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.wire.voices import OFFICIAL_VOICES


class KokoroEngine(SpeechEngine):
    """A Kokoro-82M engine: the official voices and one text front end. Subclasses load a runtime
    (setting `_frontend.vocabulary` from the model's config) and run the shared pipeline."""

    def __init__(self, g2p: G2PSettings | None = None, phonemes: PhonemeSource | None = None) -> None:
        """`g2p`: the front end's worker processes (each conversion time-bounded: g2p.py);
        `phonemes`: a source in place of the G2P pool (a PhonemeTable: benchmarks/gpu_check.py)."""
        super().__init__()
        self._frontend = TextFrontend(self.voices(), g2p, source=phonemes)

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def close(self) -> None:
        self._frontend.close()

    def phonemes(self, text: str, voice: str, text_options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[str]:
        """The phoneme pieces (each <= 510) that `synthesize` would speak for `text`."""
        return [piece.text for piece in self.phoneme_pieces(text, voice, text_options)]

    def phoneme_pieces(self, text: str, voice: str, text_options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[Phonemes]:
        """The pieces with their words (English voices; other languages carry no words)."""
        return self._frontend.pieces(text, voice, text_options)

    def phoneme_vocabulary(self) -> frozenset[str]:
        return self._frontend.vocabulary

    def _count_phonemes(self, texts: list[str], voice: str, text_options: TextOptions) -> int:
        return self._frontend.count(texts, voice, text_options)

    def _phonemize(self, texts: list[str], voice: str, text_options: TextOptions) -> list[str]:
        return [phonemes.text for phonemes in self._frontend.phonemize(texts, voice, text_options)]
