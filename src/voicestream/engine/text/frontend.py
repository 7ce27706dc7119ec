"""Text to the phoneme pieces a Kokoro model speaks: the front end every engine shares.

One implementation for the CPU (ONNX) and GPU (torch) engines, so that both get the same
guarantees: G2P runs in the pooled worker processes of g2p.py (sessions convert text side by
side; a conversion past its time limit has its worker killed and replaced and ends with
`text_too_complex`), the phoneme count that bounds a request's work (`count`) comes from the
same G2P task that synthesis then finds cached, and a text's phonemes are cut into pieces of
at most 510 with the words that start in each (for word timings). Unless a request says
`normalize: false`, the text is first read as a person would (agent_text.py), and the words
timed are named as the request's own text wrote them.

Pronunciation control (pronunciation.py) happens here too, so every engine gets it: a
request's lexicon is rewritten into inline markup after normalization and before G2P (the
words keep their names: misaki's tokens of markup are the bracketed words), phoneme input
skips both, and phonemes a client wrote are checked against the model's vocabulary
(`vocabulary`, set by the engine when it loads its config.json).

Where the phonemes come from is a `PhonemeSource`: the G2P pool unless the engine is given
another, such as a table of fixed sentences' phonemes (phoneme_table.py: the prepared GPU check,
which runs where misaki and spaCy are not installed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from voicestream.engine.base import check_voice
from voicestream.engine.text.agent_text import ENGLISH, NormalizedText, normalize_agent_text, source_words
from voicestream.engine.text.g2p import G2P, G2PSettings, Phonemes
from voicestream.engine.text.options import DEFAULT_TEXT_OPTIONS, TextOptions
from voicestream.engine.text.pronunciation import apply_lexicon, check_request, phoneme_input, respellings_used


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
        # Kokoro's phoneme symbols (config.json's vocab); empty until the engine has loaded it,
        # and then nothing a client wrote is checked.
        self.vocabulary: frozenset[str] = frozenset()

    def language(self, voice: str) -> str:
        """The G2P language of a voice spec (every voice of a blend speaks the same one)."""
        return check_voice(voice, self._voices).language

    def pieces(self, text: str, voice: str, options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[Phonemes]:
        """The phoneme pieces (each <= 510) of `text`, with their words (English voices only),
        each word named as `text` writes it."""
        return self.phonemize([text], voice, options)[0].pieces()

    def count(self, texts: list[str], voice: str, options: TextOptions = DEFAULT_TEXT_OPTIONS) -> int:
        """The phonemes of a request's texts, in ONE time-bounded G2P task (the work budget's
        measure; a lexicon's respellings take one more); synthesis then finds each text cached."""
        return sum(len(phonemes.text) for phonemes in self.phonemize(texts, voice, options))

    def phonemize(self, texts: list[str], voice: str, options: TextOptions = DEFAULT_TEXT_OPTIONS) -> list[Phonemes]:
        """What each text is said as: its phonemes and words, after the options (a text with
        nothing to say, only markup or emoji, is said as no phonemes)."""
        language = self.language(voice)
        for text in texts:
            check_request(text, options, self.vocabulary)
        if options.phonemes:
            return [phoneme_input(text) for text in texts]
        normalized = [self._normalized(text, language, options) for text in texts]
        spoken = [item for item in normalized if item.text.strip()]
        written = [item.text for item in spoken]
        if options.lexicon:
            respellings = sorted(set().union(*(respellings_used(text, options.lexicon) for text in written)))
            converted = self._g2p.phonemize_many(respellings, language) if respellings else []
            respelled = {word: phonemes.text for word, phonemes in zip(respellings, converted, strict=True)}
            written = [apply_lexicon(text, options.lexicon, respelled) for text in written]
        said = iter(self._g2p.phonemize_many(written, language))
        # source_words finds each word in the normalized text: markup keeps the word itself there.
        return [source_words(next(said), item) if item.text.strip() else Phonemes("") for item in normalized]

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
