"""Text to Kokoro phonemes with misaki (the G2P that `kokoro` itself uses), offline.

English (US/GB) uses misaki's lexicon + spaCy tagger with espeak-ng as the out-of-vocabulary
fallback; Spanish, French, Hindi, Italian and Portuguese use misaki's espeak-ng G2P. Japanese
and Chinese need misaki's extra dependencies, which this install does not carry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from voicestream.engine.base import UnsupportedLanguageError

# Kokoro's hard limit on phonemes per inference (its context length minus the two pad tokens).
MAX_PHONEMES = 510

# misaki's espeak G2P language names for the non-English voices.
ESPEAK_LANGUAGES = {"es": "es", "fr-fr": "fr-fr", "hi": "hi", "it": "it", "pt-br": "pt-br"}

# Break preference when a text's phonemes exceed MAX_PHONEMES: sentence ends, then clauses, then words.
_BREAK_CLASSES = (".!?", ":;", ",—…", " ")


@dataclass(frozen=True, slots=True)
class SpokenWord:
    """A word of the text and where its phonemes are: [start, end) in a phoneme string."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Phonemes:
    """A phoneme string and its words (empty when the G2P does not align words: espeak languages)."""

    text: str
    words: tuple[SpokenWord, ...] = ()

    def pieces(self, limit: int = MAX_PHONEMES) -> list[Phonemes]:
        """`split_phonemes` of the text, each piece with the words that start in it (positions
        re-based to the piece; a word cut by a hard cut ends with its piece)."""
        pieces: list[Phonemes] = []
        cursor = 0
        for piece in split_phonemes(self.text, limit):
            offset = self.text.index(piece, cursor)  # pieces are stripped substrings, in order
            cursor = offset + len(piece)
            words = tuple(
                SpokenWord(word.text, word.start - offset, min(word.end, cursor) - offset)
                for word in self.words
                if offset <= word.start < cursor
            )
            pieces.append(Phonemes(piece, words))
        return pieces


def align_words(tokens: Sequence[Any], unknown: str = "❓") -> Phonemes:
    """The phoneme string misaki builds from its tokens, with each word's span in it.

    misaki joins `(phonemes or its unknown mark) + whitespace` over its tokens. A word is a token
    whose text holds a letter or digit; a token that speaks nothing ("$" before "5") joins the
    word it touches ("$5"). Punctuation tokens are not words (their phonemes are pauses).
    """
    parts: list[str] = []
    words: list[SpokenWord] = []
    position = 0
    prefix = ""
    touching_previous = False  # the previous token had no whitespace after it
    for token in tokens:
        phonemes = unknown if token.phonemes is None else str(token.phonemes)
        text = str(token.text)
        if any(ch.isalnum() for ch in text) or (not phonemes and text.strip()):
            if not phonemes:
                if touching_previous and words:
                    last = words[-1]
                    words[-1] = SpokenWord(last.text + text, last.start, last.end)
                else:
                    prefix += text
            else:
                words.append(SpokenWord(prefix + text, position, position + len(phonemes)))
                prefix = ""
        parts.append(phonemes + str(token.whitespace))
        position += len(phonemes) + len(str(token.whitespace))
        touching_previous = not token.whitespace
    joined = "".join(parts)
    stripped = joined.strip()
    shift = len(joined) - len(joined.lstrip())
    spans = tuple(
        SpokenWord(word.text, word.start - shift, min(word.end - shift, len(stripped)))
        for word in words
        if word.start - shift >= 0 and word.end > word.start
    )
    return Phonemes(stripped, spans)


class G2P:
    """Thread-safe, lazily built phonemizers per language.

    espeak-ng keeps process-global state and misaki's English G2P is not documented as
    re-entrant, so every conversion holds one lock; it costs milliseconds, inference runs outside it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phonemizers: dict[str, Callable[[str], Phonemes]] = {}

    def phonemize(self, text: str, language: str) -> str:
        return self.phonemize_words(text, language).text

    def phonemize_words(self, text: str, language: str) -> Phonemes:
        """The phonemes of `text` and, for English, where each word's phonemes are."""
        with self._lock:
            phonemizer = self._phonemizers.get(language)
            if phonemizer is None:
                phonemizer = self._phonemizers[language] = _build(language)
            return phonemizer(text)

    def warm(self, language: str = "en-us") -> None:
        self.phonemize("Hello.", language)


def _build(language: str) -> Callable[[str], Phonemes]:
    if language in ("en-us", "en-gb"):
        from misaki import en, espeak

        british = language == "en-gb"
        english = en.G2P(trf=False, british=british, fallback=espeak.EspeakFallback(british=british))

        def english_phonemes(text: str) -> Phonemes:
            phonemes, tokens = english(text)
            aligned = align_words(tokens, english.unk)
            # Words only when the alignment rebuilds misaki's own string (a future misaki may differ).
            return aligned if aligned.text == str(phonemes).strip() else Phonemes(str(phonemes).strip())

        return english_phonemes
    if language in ESPEAK_LANGUAGES:
        from misaki import espeak

        other = espeak.EspeakG2P(language=ESPEAK_LANGUAGES[language])

        def espeak_phonemes(text: str) -> Phonemes:
            phonemes, _ = other(text)
            return Phonemes(str(phonemes).strip())

        return espeak_phonemes
    raise UnsupportedLanguageError(
        f"voices of language {language!r} need misaki's {language} extra, which this install does not "
        "include; use an English (a*/b*), Spanish, French, Hindi, Italian or Portuguese voice"
    )


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """Cut a phoneme string into pieces of at most `limit`, preferring punctuation, then spaces.

    A piece ends right after the best break character found in its window, so nothing is lost:
    "".join(pieces) == phonemes (apart from whitespace stripped at the cuts).
    """
    pieces: list[str] = []
    rest = phonemes.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = 0
        for breaks in _BREAK_CLASSES:
            cut = max(window.rfind(char) for char in breaks) + 1
            if cut > 0:
                break
        if cut <= 0:  # one unbroken run longer than the limit: a hard cut is all that is left
            cut = limit
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return [piece for piece in pieces if piece]
