"""Text to the phoneme pieces a Kokoro model speaks: the front end every engine shares.

One implementation for the CPU (ONNX) and GPU (torch) engines, so that both get the same
guarantees: G2P runs in the pooled worker processes of g2p.py (sessions convert text side by
side; a conversion past its time limit has its worker killed and replaced and ends with
`text_too_complex`), the phoneme count that bounds a request's work (`count`) comes from the
same G2P task that synthesis then finds cached, and a text's phonemes are cut into pieces of
at most 510 with the words that start in each (for word timings).

Where the phonemes come from is a `PhonemeSource`: the G2P pool unless the engine is given
another, such as a table of fixed sentences' phonemes (phoneme_table.py: the prepared GPU check,
which runs where misaki and spaCy are not installed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from voicestream.engine.base import check_voice
from voicestream.engine.text.g2p import G2P, G2PSettings, Phonemes


class PhonemeSource(Protocol):
    """Text to phonemes for the front end; `G2P` (g2p.py) is the default one."""

    def phonemize_many(self, texts: Sequence[str], language: str) -> list[Phonemes]:
        """The phonemes of each text, in one time-bounded task (the work budget's measure)."""
        ...

    def warm(self, language: str) -> None: ...

    def close(self) -> None: ...


class TextFrontend:
    """Thread-safe: any number of synthesis threads may call it at once."""

    def __init__(
        self, voices: tuple[str, ...], g2p: G2PSettings | None = None, *, source: PhonemeSource | None = None
    ) -> None:
        """`g2p`: the default source's worker pool; `source`: phonemes from elsewhere (then `g2p` is unused)."""
        self._voices = voices
        self._g2p: PhonemeSource = source or G2P(g2p)

    def language(self, voice: str) -> str:
        """The G2P language of a voice spec (every voice of a blend speaks the same one)."""
        return check_voice(voice, self._voices).language

    def pieces(self, text: str, voice: str) -> list[Phonemes]:
        """The phoneme pieces (each <= 510) of `text`, with their words (English voices only)."""
        return self._g2p.phonemize_many([text], self.language(voice))[0].pieces()

    def count(self, texts: list[str], voice: str) -> int:
        """The phonemes of a request's texts, in ONE time-bounded G2P task (the work budget's
        measure); synthesis then finds each text cached."""
        return sum(len(phonemes.text) for phonemes in self._g2p.phonemize_many(texts, self.language(voice)))

    def warm(self) -> None:
        """Start the G2P workers (English loaded) before the first request needs them."""
        self._g2p.warm("en-us")

    def close(self) -> None:
        self._g2p.close()
