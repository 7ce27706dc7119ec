"""Pronunciation control in the front end: the lexicon rewritten into Kokoro's inline markup,
user-written phonemes checked against the model's vocabulary, phoneme input's words.

Kokoro's inline markup `[word](/phonemes/)` is read natively by misaki's English G2P: the word
keeps its place in the token stream (so its word timing names `word`) and is said as the
phonemes. A lexicon entry is applied by rewriting each matching word of the text into that
markup before G2P (a respelling is converted to phonemes first, by the same G2P), so one
mechanism serves the lexicon and the markup a client writes itself.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Final

from voicestream.engine.base import InvalidRequestError
from voicestream.engine.text.g2p import MARKUP, Phonemes, SpokenWord
from voicestream.engine.text.options import TextOptions
from voicestream.wire.errors import ErrorCode
from voicestream.wire.pronunciation import WORD, Lexicon, phonemes_of

# Kokoro's punctuation symbols: a phoneme-input group made of them alone is a pause, not a word.
_PUNCTUATION: Final = ';:,.!?¡¿—…"«»“”()'
_SENTENCE_END: Final = re.compile(r"(?<=[.!?…])\s+")


class InvalidPhonemesError(InvalidRequestError):
    code = ErrorCode.INVALID_PHONEMES


def check_phonemes(phonemes: str, vocabulary: frozenset[str], where: str) -> None:
    """InvalidPhonemesError naming the first symbol of `phonemes` outside `vocabulary` and its
    position (characters from 0); whitespace is always allowed (it is Kokoro's word break)."""
    for position, symbol in enumerate(phonemes):
        if symbol not in vocabulary and not symbol.isspace():
            name = unicodedata.name(symbol, "unnamed")
            raise InvalidPhonemesError(
                f"{where}: symbol {symbol!r} (U+{ord(symbol):04X} {name}) at position {position} is not in "
                "Kokoro's phoneme vocabulary (POST /v1/audio/phonemize shows the phonemes of a word)"
            )


def check_markup(text: str, vocabulary: frozenset[str]) -> None:
    """Every `[word](/phonemes/)` of `text` speaks only symbols of the vocabulary."""
    for match in MARKUP.finditer(text):
        phonemes = phonemes_of(match.group(2))
        if phonemes is not None:
            check_phonemes(phonemes, vocabulary, f"inline markup {match.group()!r} at position {match.start()}")


def check_lexicon(lexicon: Lexicon, vocabulary: frozenset[str]) -> None:
    for word, value in lexicon:
        phonemes = phonemes_of(value)
        if phonemes is not None:
            check_phonemes(phonemes, vocabulary, f"lexicon[{word!r}]")


def check_request(text: str, options: TextOptions, vocabulary: frozenset[str]) -> None:
    """Everything a request wrote in phonemes (its lexicon, its markup, or its phoneme input)
    against the vocabulary: what the routes check before they queue it (empty: no check)."""
    if not vocabulary:
        return
    if options.phonemes:
        check_phonemes(text, vocabulary, "phonemes")
        return
    check_lexicon(options.lexicon, vocabulary)
    check_markup(text, vocabulary)


def respellings_used(text: str, lexicon: Lexicon) -> set[str]:
    """The respellings (values that are not /phonemes/) of the entries `text` uses."""
    entries = _Entries(lexicon)
    return {value for word in _plain_words(text) if (value := entries.get(word)) and phonemes_of(value) is None}


def apply_lexicon(text: str, lexicon: Lexicon, respelled: Mapping[str, str]) -> str:
    """`text` with each word the lexicon knows written as `[word](/phonemes/)`; `respelled`
    holds the phonemes of the respellings. Existing markup is left as it is."""
    if not lexicon:
        return text
    entries = _Entries(lexicon)
    out: list[str] = []
    cursor = 0
    for start, end in _plain_spans(text):
        out.append(text[cursor:start])
        segment = text[start:end]
        out.append(WORD.sub(lambda match: _rewrite(match.group(), entries, respelled), segment))
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def phoneme_input(phonemes: str) -> Phonemes:
    """Phoneme input as the engine speaks it: each whitespace-separated group that is not only
    punctuation is a word, named by its phonemes (what its word timing reports)."""
    text = phonemes.strip()
    words = []
    for match in re.finditer(r"\S+", text):
        group = match.group()
        core = group.strip(_PUNCTUATION)
        if core:
            start = match.start() + group.index(core)
            words.append(SpokenWord(core, start, start + len(core)))
    return Phonemes(text, tuple(words))


def split_phoneme_sentences(phonemes: str) -> list[str]:
    """Phoneme input cut after each sentence end (. ! ? … then whitespace), as text is cut
    into sentences: the first one's audio need not wait for the rest."""
    return [part for part in _SENTENCE_END.split(phonemes.strip()) if part]


class _Entries:
    """Lookup by the matching rules: exact spelling first, then an all-lowercase key."""

    def __init__(self, lexicon: Lexicon) -> None:
        self.exact = dict(lexicon)
        self.folded = {word: value for word, value in lexicon if word == word.lower()}

    def get(self, word: str) -> str | None:
        return self.exact.get(word) or self.folded.get(word.lower())


def _rewrite(word: str, entries: _Entries, respelled: Mapping[str, str]) -> str:
    value = entries.get(word)
    if value is None:
        return word
    phonemes = phonemes_of(value)
    if phonemes is None:
        phonemes = respelled.get(value)
        if not phonemes:
            return word
    return f"[{word}](/{phonemes}/)"


def _plain_spans(text: str) -> Iterator[tuple[int, int]]:
    """The [start, end) spans of `text` outside inline markup."""
    cursor = 0
    for match in MARKUP.finditer(text):
        yield cursor, match.start()
        cursor = match.end()
    yield cursor, len(text)


def _plain_words(text: str) -> Iterator[str]:
    for start, end in _plain_spans(text):
        for match in WORD.finditer(text, start, end):
            yield match.group()
