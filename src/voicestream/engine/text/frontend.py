"""Text to the phoneme pieces a Kokoro model speaks: the front end every engine shares.

One implementation for the CPU (ONNX) and GPU (torch) engines, so that both get the same
guarantees: G2P runs in the pooled worker processes of g2p.py (sessions convert text side by
side; a conversion past its time limit has its worker killed and replaced and ends with
`text_too_complex`), the phoneme count that bounds a request's work (`count`) comes from the
same G2P task that synthesis then finds cached, and a text's phonemes are cut into pieces of
at most 510 with the words that start in each (for word timings). Unless a request says
`normalize: false`, the text is first read as a person would (agent_text.py), and the words
timed are named as the request's own text wrote them.
"""

from __future__ import annotations

from voicestream.engine.base import check_voice
from voicestream.engine.text.agent_text import ENGLISH, NormalizedText, normalize_agent_text, source_words
from voicestream.engine.text.g2p import G2P, G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions


class TextFrontend:
    """Thread-safe: any number of synthesis threads may call it at once."""

    def __init__(self, voices: tuple[str, ...], g2p: G2PSettings | None = None) -> None:
        self._voices = voices
        self._g2p = G2P(g2p)

    @property
    def settings(self) -> G2PSettings:
        return self._g2p.settings

    def language(self, voice: str) -> str:
        """The G2P language of a voice spec (every voice of a blend speaks the same one)."""
        return check_voice(voice, self._voices).language

    def pieces(self, text: str, voice: str, options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[Phonemes]:
        """The phoneme pieces (each <= 510) of `text`, with their words (English voices only),
        each word named as `text` writes it."""
        language = self.language(voice)
        normalized = self._normalized(text, language, options)
        if not normalized.text.strip():
            return []  # only markup or emoji: nothing to say
        phonemes = self._g2p.phonemize_words(normalized.text, language)
        return source_words(phonemes, normalized).pieces()

    def count(self, texts: list[str], voice: str, options: TextOptions = DEFAULT_TEXT_OPTIONS) -> int:
        """The phonemes of a request's texts, in ONE time-bounded G2P task (the work budget's
        measure); synthesis then finds each text cached."""
        language = self.language(voice)
        spoken = [
            normalized.text for text in texts if (normalized := self._normalized(text, language, options)).text.strip()
        ]
        return sum(len(phonemes.text) for phonemes in self._g2p.phonemize_many(spoken, language))

    @staticmethod
    def _normalized(text: str, language: str, options: TextOptions) -> NormalizedText:
        if not options.normalize:
            return NormalizedText(text, text)
        return normalize_agent_text(text, english=language in ENGLISH, british=language == "en-gb")

    def warm(self) -> None:
        """Start the G2P workers (English loaded) before the first request needs them."""
        self._g2p.warm("en-us")

    def close(self) -> None:
        self._g2p.close()
