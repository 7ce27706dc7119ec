"""Text as the G2P should see it: canonical, bounded, and read the way a person would read it.

misaki's G2P is quick on prose but superlinear on some inputs, and a few crash it: one letter
with a thousand accents takes seconds, "9" * 400 raises OverflowError in num2words, "9" * 300
is read as a 300-digit cardinal ("nine duodecillion …", ~23 phonemes per digit). These rules
remove those known cases before G2P; the G2P time limit (`g2p.G2P`) and the per-request phoneme
budget (`Limits.max_phonemes`) bound whatever is left. What they change (docs/protocol.md):

- Unicode NFC (composed characters, as the lexicon spells words);
- format characters (category Cf: zero-width spaces, joiners, direction marks) are dropped and
  control characters become spaces: neither is spoken;
- at most `MAX_MARKS` combining marks follow one base character (no script needs more, and the
  extra ones have no sound);
- a run of one repeated symbol or punctuation character is cut to `MAX_REPEATS` ("!!!!!!" is
  said as "!!!");
- a number of more than `MAX_NUMBER_DIGITS` digits is read as digit groups, as people read card
  and account numbers: "4111111111111111" → "4 1 1 1, 1 1 1 1, 1 1 1 1, 1 1 1 1".
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

MAX_MARKS: Final = 4
MAX_REPEATS: Final = 3
MAX_NUMBER_DIGITS: Final = 12
DIGIT_GROUP: Final = 4

# ASCII digits only: misaki reads other scripts' digits through espeak, digit by digit.
_NUMBER: Final = re.compile(r"[0-9]+(?:[.,][0-9]+)*")
_SEPARATOR_WORDS: Final = {".": " point ", ",": ", "}


def normalize_text(text: str) -> str:
    """`text` with the rules of the module docstring applied (idempotent)."""
    text = unicodedata.normalize("NFC", text)
    text = _drop_invisible_and_excess(text)
    return _NUMBER.sub(_read_number, text)


def _drop_invisible_and_excess(text: str) -> str:
    out: list[str] = []
    marks = 0  # combining marks since the last base character
    repeats = 0  # how many times the last symbol/punctuation character repeated
    previous = ""
    for char in text:
        category = unicodedata.category(char)
        if category == "Cf":
            continue
        if category == "Cc" and not char.isspace():
            char, category = " ", "Zs"
        if category[0] == "M":
            marks += 1
            if marks > MAX_MARKS:
                continue
        else:
            marks = 0
        if category[0] in "PS" and char == previous:
            repeats += 1
            if repeats >= MAX_REPEATS:
                continue
        else:
            repeats = 0
        previous = char
        out.append(char)
    return "".join(out)


def _read_number(match: re.Match[str]) -> str:
    token = match.group()
    if sum(char.isdigit() for char in token) <= MAX_NUMBER_DIGITS:
        return token  # a number misaki reads as one ("1,234,567", "3.14")
    pieces: list[str] = []
    for part in re.split(r"([.,])", token):
        if part in _SEPARATOR_WORDS:
            pieces.append(_SEPARATOR_WORDS[part])
            continue
        groups = [part[start : start + DIGIT_GROUP] for start in range(0, len(part), DIGIT_GROUP)]
        pieces.append(", ".join(" ".join(group) for group in groups))
    return f" {''.join(pieces).strip()} "
