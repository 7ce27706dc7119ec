"""Text to Kokoro phonemes with misaki (the G2P that `kokoro` itself uses), offline.

English (US/GB) uses misaki's lexicon + spaCy tagger with espeak-ng as the out-of-vocabulary
fallback; Spanish, French, Hindi, Italian and Portuguese use misaki's espeak-ng G2P. Japanese
and Chinese need misaki's extra dependencies, which this install does not carry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from voicestream.engine.base import UnsupportedLanguageError

# Kokoro's hard limit on phonemes per inference (its context length minus the two pad tokens).
MAX_PHONEMES = 510

# misaki's espeak G2P language names for the non-English voices.
ESPEAK_LANGUAGES = {"es": "es", "fr-fr": "fr-fr", "hi": "hi", "it": "it", "pt-br": "pt-br"}

# Break preference when a text's phonemes exceed MAX_PHONEMES: sentence ends, then clauses, then words.
_BREAK_CLASSES = (".!?", ":;", ",—…", " ")


class G2P:
    """Thread-safe, lazily built phonemizers per language.

    espeak-ng keeps process-global state and misaki's English G2P is not documented as
    re-entrant, so every conversion holds one lock; it costs milliseconds, inference runs outside it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._phonemizers: dict[str, Callable[[str], str]] = {}

    def phonemize(self, text: str, language: str) -> str:
        with self._lock:
            phonemizer = self._phonemizers.get(language)
            if phonemizer is None:
                phonemizer = self._phonemizers[language] = _build(language)
            return phonemizer(text).strip()

    def warm(self, language: str = "en-us") -> None:
        self.phonemize("Hello.", language)


def _build(language: str) -> Callable[[str], str]:
    if language in ("en-us", "en-gb"):
        from misaki import en, espeak

        british = language == "en-gb"
        english = en.G2P(trf=False, british=british, fallback=espeak.EspeakFallback(british=british))

        def english_phonemes(text: str) -> str:
            phonemes, _tokens = english(text)
            return str(phonemes)

        return english_phonemes
    if language in ESPEAK_LANGUAGES:
        from misaki import espeak

        other = espeak.EspeakG2P(language=ESPEAK_LANGUAGES[language])

        def espeak_phonemes(text: str) -> str:
            phonemes, _ = other(text)
            return str(phonemes)

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
