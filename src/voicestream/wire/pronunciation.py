"""Pronunciation control on the wire: a request's or session's `lexicon`, and phoneme input.

A lexicon maps words to how they are said: phonemes in Kokoro's alphabet written between
slashes (`{"Kokoro": "/kˈOkəɹO/"}`), or a respelling in plain letters that the G2P reads
instead of the word (`{"Nguyen": "win"}`). Matching rules (docs/protocol.md, "Pronunciation"):
a key is one word (letters and digits, apostrophes inside); an all-lowercase key matches the
word in any case, a key with a capital matches that exact spelling (and wins over a lowercase
one); keys are compared in Unicode NFC. Phoneme symbols are checked against the model's
vocabulary by the engine, which knows it.

Both are bounded here, before any work: entries, key and value sizes, the phoneme budget.
Standard library only.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Final, TypeAlias

from voicestream.wire.errors import ErrorCode, ProtocolError

MAX_LEXICON_ENTRIES: Final = 256
MAX_LEXICON_WORD_CHARS: Final = 64
MAX_LEXICON_PHONEMES: Final = 128  # symbols between the slashes of one entry
MAX_LEXICON_RESPELLING_CHARS: Final = 64

Lexicon: TypeAlias = tuple[tuple[str, str], ...]
"""(word, value) pairs in the order given; a value is `/phonemes/` or a respelling."""

# One word as the lexicon and the text both see it: letters/digits, apostrophes inside ("don't").
WORD: Final = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# A respelling: words of letters, separated by spaces or hyphens (no markup characters).
_RESPELLING: Final = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*(?:[ -][^\W\d_]+(?:['’][^\W\d_]+)*)*")
# Characters that would end Kokoro's inline markup `[word](/phonemes/)` early, or a line.
_MARKUP_BREAKERS: Final = frozenset("/[]()\n\r")


def phonemes_of(value: str) -> str | None:
    """The phonemes a lexicon value spells (`/.../`), or None for a respelling."""
    return value[1:-1] if len(value) >= 2 and value[0] == "/" and value[-1] == "/" else None


def parse_lexicon(value: Any, field: str = "lexicon") -> Lexicon | None:
    """A JSON object word -> "/phonemes/" | respelling, validated; None when absent.
    `ProtocolError` invalid_lexicon naming the field (and the entry) otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid(f"{field} must be an object mapping words to /phonemes/ or a respelling")
    if len(value) > MAX_LEXICON_ENTRIES:
        raise _invalid(f"{field} has {len(value)} entries; the limit is {MAX_LEXICON_ENTRIES}")
    entries: list[tuple[str, str]] = []
    for key, spoken in value.items():
        word = unicodedata.normalize("NFC", key)  # as normalization writes the text it is matched against
        where = f"{field}[{word[:MAX_LEXICON_WORD_CHARS]!r}]"
        if len(word) > MAX_LEXICON_WORD_CHARS:
            raise _invalid(f"{where}: a word may have at most {MAX_LEXICON_WORD_CHARS} characters, got {len(word)}")
        if not WORD.fullmatch(word):
            raise _invalid(f"{where}: a key must be one word (letters and digits, apostrophes inside)")
        entries.append((word, _entry_value(spoken, where)))
    return tuple(entries)


def _entry_value(spoken: Any, where: str) -> str:
    if not isinstance(spoken, str):
        raise _invalid(f"{where} must be a string: /phonemes/ or a respelling")
    phonemes = phonemes_of(spoken)
    if phonemes is not None:
        if not phonemes.strip() or len(phonemes) > MAX_LEXICON_PHONEMES:
            raise _invalid(f"{where}: 1 to {MAX_LEXICON_PHONEMES} phonemes between the slashes, got {len(phonemes)}")
        bad = next((index for index, char in enumerate(phonemes) if char in _MARKUP_BREAKERS), None)
        if bad is not None:
            raise _invalid(f"{where}: symbol {phonemes[bad]!r} at position {bad} cannot be in phonemes")
        return spoken
    if len(spoken) > MAX_LEXICON_RESPELLING_CHARS or not _RESPELLING.fullmatch(spoken):
        raise _invalid(
            f"{where}: a respelling is 1 to {MAX_LEXICON_RESPELLING_CHARS} characters of letters, spaces and "
            "hyphens (phonemes go between slashes: /kˈOkəɹO/)"
        )
    return spoken


def merge_lexicons(session: Lexicon, request: Lexicon | None) -> Lexicon:
    """The session's lexicon with a request's entries added; a request's entry wins."""
    if not request:
        return session
    words = {word for word, _ in request}
    return tuple(entry for entry in session if entry[0] not in words) + request


def lexicon_json(lexicon: Lexicon) -> dict[str, str]:
    return dict(lexicon)


def parse_phonemes(value: Any, max_phonemes: int, field: str = "phonemes") -> str:
    """Phoneme input: a non-empty string within the phoneme budget (one symbol per character,
    as Kokoro counts them); `ProtocolError` otherwise. Symbols are checked by the engine."""
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.INVALID_PHONEMES, f"{field} must be a string of Kokoro phonemes")
    if not value.strip():
        raise ProtocolError(ErrorCode.EMPTY_TEXT, f"{field} is empty: nothing to speak")
    if len(value) > max_phonemes:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_COMPLEX,
            f"{field} has {len(value)} phonemes; one request may have at most {max_phonemes} "
            f"(the symbol at position {max_phonemes} is the first over)",
        )
    return value


def _invalid(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_LEXICON, message)
