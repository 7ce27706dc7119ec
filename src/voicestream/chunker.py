"""Incremental sentence chunker: cuts speakable pieces out of an LLM's token stream.

`SentenceChunker.feed(fragment)` returns every piece whose end is already certain;
`flush()` returns the rest when the stream ends. The pieces are the same however the
text is split into fragments, because a cut is made only once the text seen so far
decides it: a "." at the end of a fragment waits for the next characters, and no
cut ever waits for more than it needs.

What the pieces are. The text is cut into pieces and gaps: every gap is whitespace
(possibly empty), every piece is non-empty, has no surrounding whitespace and holds at
least one letter or digit, and ``gap + piece + gap + piece + ... + gap`` is the input,
character for character. (Only a text with no letter or digit at all gives no piece.)

Where the cuts are (``|`` marks a cut):

- Sentence enders ``. ! ? …`` (and runs such as ``?!`` or ``...``) end a sentence when
  followed by whitespace and then a character that is not a lower-case letter.
  Closing quotes, brackets and markdown emphasis right after the ender stay with the
  sentence: ``He said "Go." | Then``.
- A "." directly followed by a non-space never cuts: 3.14, $4.50, example.com/a.b,
  john.doe@x.org, U.S.
- Abbreviations. After titles and the like (Dr. Mr. Mrs. Prof. e.g. i.e. vs. ...) a "."
  never cuts. After ambiguous ones (etc. Inc. St. No. Jr. Jan. ..., initialisms such
  as U.S. or a.m., single letters) it cuts only before a capitalised common sentence
  opener: ``in the U.S. | The trip`` but ``the U.S. Army``; ``J. R. R. Tolkien``.
- A list number or letter at the start of a line (``1. First``) never ends a sentence.
- Ellipses are sentence enders like "." (without the abbreviation rules): ``Well... |
  I think so.`` but ``I waited... and waited.`` The speech engine renders a trailing
  "..." as a pause either way, and the earlier cut gets audio out sooner.
- CJK and full-width enders ``。！？`` cut with no space after them; any ender directly
  followed by a CJK character cuts too. A Japanese quotation closed right after its ender
  and followed by the quotative と goes on: ``「はい。」と言った。`` is one sentence.
- The punctuation of Kokoro's other languages (tests/unit/test_chunker_languages.py):
  Hindi ends sentences with the danda ``।`` (and ``॥``); a Spanish ``¿`` or ``¡`` after an
  ender opens a sentence; French puts a space before ``? ! : ;`` and inside guillemets,
  so a ``»`` after an ender and a space still closes that sentence: ``« Oui ! » | Puis``.
- Every line break is a cut (blank lines, list items, headings).
- Fast first piece: the first piece of a reply may end at a clause mark (``, ; : —``
  and their full-width forms, a spaced `` - ``) once it holds `first_clause_min_words`
  words, so speech starts before the first sentence is complete. Later pieces are
  whole sentences.
- `max_chars`: a piece that would grow longer is cut at its last clause mark, else at
  its last whitespace, else hard at `max_chars`.
- Stray punctuation stays with a neighbour: a cut is made only when the text after it
  holds a letter or digit, and a piece cannot end before its first letter or digit.

`flush()` returns the rest as one piece: a cut that only text which never came could
have confirmed (``at 5 p.m. Thanks`` at the very end) is not made. So `max_chars` bounds
every piece `feed()` returns (after any leading punctuation); the rest that `flush()`
returns can exceed it by the one word a pending abbreviation was waiting on. After
`flush()` the chunker is ready for the next reply.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Final

_ENDERS: Final = frozenset(".!?…‼⁇⁈⁉。！？｡؟۔।॥")
# Enders that need no whitespace after them (Chinese and Japanese use none).
_FULL_WIDTH_ENDERS: Final = frozenset("。！？｡")
_CLOSERS: Final = frozenset("\"'”’»›)]}）］｝」』】》〉〕*_")
# French sets its closing guillemets off with a (no-break) space: `« Oui ! »`.
_SPACED_CLOSERS: Final = frozenset("»›")
# Spanish opens questions and exclamations with these: after an ender they start a sentence.
_OPENING_MARKS: Final = frozenset("¿¡")
# Japanese closing quotes; after one, the quotative particle と continues the sentence.
_JAPANESE_QUOTE_CLOSERS: Final = frozenset("」』")
_QUOTATIVE: Final = "と"
_LINE_BREAKS: Final = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_FULL_WIDTH_CLAUSE_MARKS: Final = frozenset("，、；：")
_CLAUSE_MARKS: Final = frozenset(",;:—–-") | _FULL_WIDTH_CLAUSE_MARKS

# fmt: off
# A "." after these never ends a sentence: a name, a number or an example follows.
_NEVER_END: Final = frozenset({
    "mr", "mrs", "ms", "mx", "dr", "prof", "rev", "fr", "hon", "gen", "col", "capt", "cpt", "lt", "sgt",
    "maj", "cmdr", "adm", "gov", "sen", "rep", "pres", "supt", "e.g", "i.e", "cf", "viz", "vs", "fig",
    "figs", "eq", "eqs", "vol", "vols", "pp", "approx", "dept", "univ",
})
# A "." after these ends a sentence only before a common sentence opener.
_AMBIGUOUS: Final = frozenset({
    "etc", "inc", "ltd", "co", "corp", "llc", "plc", "jr", "sr", "st", "ave", "blvd", "rd", "no", "al",
    "esq", "ph.d", "sec", "min", "hr", "hrs", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
})
_INITIALISM: Final = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
# Capitalised, these open a sentence (checked after an ambiguous abbreviation).
_SENTENCE_OPENERS: Final = frozenset({
    "a", "an", "the", "this", "that", "these", "those", "it", "it's", "its", "i", "i'm", "i'll", "i've",
    "i'd", "we", "we're", "we'll", "you", "you're", "your", "he", "he's", "she", "she's", "they", "they're",
    "there", "there's", "here", "here's", "our", "my", "his", "her", "their", "in", "on", "at", "for",
    "from", "to", "with", "by", "after", "before", "during", "when", "while", "if", "but", "and", "so",
    "or", "yet", "as", "then", "now", "also", "however", "meanwhile", "still", "what", "why", "how",
    "where", "who", "which", "yes", "no", "please", "let", "let's", "thank", "thanks", "today", "tomorrow",
    "next", "finally", "first", "second", "third", "overall", "instead", "otherwise", "although", "though",
    "because", "since", "once", "all", "each", "every", "some", "many", "most", "both", "one", "just",
    "not", "never", "always", "again",
})
# fmt: on


# The fast first clause's default: the first piece may end at a clause mark once it holds this
# many words. Chosen by benchmarks/first_clause.py over 32 agent replies (3 vs 4 vs none: its
# JSON and benchmarks/REPORT.md have the numbers): 3 cuts more replies sooner at the same WER,
# and the openers only 3 catches ("Thanks for holding,", "Just to confirm,") are what agents say
# first.
FIRST_CLAUSE_MIN_WORDS: Final = 3


class _Verdict(enum.Enum):
    CUT = enum.auto()
    NO = enum.auto()
    WAIT = enum.auto()  # the answer depends on text not seen yet


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF  # hangul
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


def _count_words(text: str) -> int:
    """Whitespace-separated words holding a letter or digit; each CJK character is a word."""
    count = 0
    for token in text.split():
        cjk = sum(1 for ch in token if _is_cjk(ch))
        count += cjk or any(ch.isalnum() for ch in token)
    return count


def _closers_end(buf: str, end: int) -> int:
    """The end of the closers after an ender run that ends at `end` (closing quotes, brackets,
    emphasis), a French spaced guillemet included: `Oui ! »` keeps its `»`."""
    n = len(buf)
    while end < n:
        if buf[end] in _CLOSERS:
            end += 1
            continue
        spaced = end
        while spaced < n and buf[spaced] in " \u00a0\u202f":
            spaced += 1
        if spaced > end and spaced < n and buf[spaced] in _SPACED_CLOSERS:
            end = spaced + 1
            continue
        break
    return end


def _core(token: str) -> str:
    """`token` without leading and trailing punctuation: '"(U.S' -> 'U.S'."""
    start, end = 0, len(token)
    while start < end and not token[start].isalnum():
        start += 1
    while end > start and not token[end - 1].isalnum():
        end -= 1
    return token[start:end]


@dataclass
class SentenceChunker:
    """Feed LLM text fragments in; get speakable pieces out as soon as they are certain."""

    first_clause_min_words: int | None = FIRST_CLAUSE_MIN_WORDS
    max_chars: int = 300
    _buffer: str = field(default="", init=False, repr=False)
    _pieces: int = field(default=0, init=False, repr=False)  # pieces emitted in this reply

    def __post_init__(self) -> None:
        if self.first_clause_min_words is not None and self.first_clause_min_words < 1:
            raise ValueError(f"first_clause_min_words must be >= 1 or None, got {self.first_clause_min_words}")
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {self.max_chars}")

    def feed(self, fragment: str) -> list[str]:
        """Add a fragment of the reply; return the pieces it completed, in order."""
        if not isinstance(fragment, str):
            raise TypeError(f"feed() takes str, not {type(fragment).__name__}")
        # The buffer always starts at the next piece: whitespace there is a gap.
        self._buffer = self._buffer + fragment if self._buffer else fragment.lstrip()
        pieces: list[str] = []
        while (cut := self._find_cut(self._buffer)) is not None:
            end, resume = cut
            pieces.append(self._buffer[:end].rstrip())
            self._buffer = self._buffer[resume:]
            self._pieces += 1
        return pieces

    def flush(self) -> str | None:
        """End the reply: the rest as one piece (None when it holds no letter or digit)."""
        rest = self._buffer.strip()
        self._buffer, self._pieces = "", 0
        return rest if any(ch.isalnum() for ch in rest) else None

    # -- scanning ---------------------------------------------------------------------------

    def _find_cut(self, buf: str) -> tuple[int, int] | None:
        """(end of the piece, start of the next) for the first certain cut, else None."""
        first_word = next((i for i, ch in enumerate(buf) if ch.isalnum()), None)
        if first_word is None:
            return None
        limit = max(self.max_chars, first_word + 1)
        clauses = self._pieces == 0 and self.first_clause_min_words is not None
        n = len(buf)
        i = first_word + 1
        while i < n:
            ch = buf[i]
            if ch in _LINE_BREAKS:
                return self._confirm(buf, i)
            if i >= limit:
                # Only whitespace since the limit so far; anything else overflows the piece.
                if not ch.isspace():
                    return self._forced_cut(buf, first_word, limit)
            elif ch in _ENDERS:
                run_end = i
                while run_end < n and buf[run_end] in _ENDERS:
                    run_end += 1
                end = _closers_end(buf, run_end)
                if end > limit:
                    return self._forced_cut(buf, first_word, limit)
                verdict = self._sentence_end(buf, i, run_end, end)
                if verdict is _Verdict.WAIT:
                    return None
                if verdict is _Verdict.CUT:
                    return self._confirm(buf, end)
                i = run_end
                continue
            elif clauses and ch in _CLAUSE_MARKS:
                verdict = self._clause_end(buf, i)
                if verdict is _Verdict.WAIT:
                    return None
                if verdict is _Verdict.CUT:
                    return self._confirm(buf, i + 1)
            i += 1
        return None

    @staticmethod
    def _confirm(buf: str, end: int) -> tuple[int, int] | None:
        """Cut at `end` once a letter or digit follows, so the next piece is speakable."""
        if not any(ch.isalnum() for ch in buf[end:]):
            return None
        resume = end
        while buf[resume].isspace():
            resume += 1
        return end, resume

    def _forced_cut(self, buf: str, first_word: int, limit: int) -> tuple[int, int] | None:
        """The piece would pass `limit`: cut at the last clause mark, whitespace, or hard."""
        for i in range(limit - 1, first_word, -1):
            if buf[i] in _FULL_WIDTH_CLAUSE_MARKS or (buf[i] in _CLAUSE_MARKS and buf[i + 1].isspace()):
                return self._confirm(buf, i + 1)
        for i in range(limit, first_word, -1):
            if buf[i].isspace():
                return self._confirm(buf, i)
        return self._confirm(buf, limit)

    def _clause_end(self, buf: str, i: int) -> _Verdict:
        """May the first piece end after the clause mark at `i`?"""
        ch = buf[i]
        if ch not in _FULL_WIDTH_CLAUSE_MARKS:
            if i + 1 >= len(buf):
                return _Verdict.WAIT
            after = buf[i + 1]
            if ch == "—":
                fits = after.isspace() or after.isalpha()
            elif ch == "-":
                fits = after.isspace() and buf[i - 1].isspace()
            else:
                fits = after.isspace()  # not 1,000 or 9:40
            if not fits:
                return _Verdict.NO
        assert self.first_clause_min_words is not None
        return _Verdict.CUT if _count_words(buf[: i + 1]) >= self.first_clause_min_words else _Verdict.NO

    def _sentence_end(self, buf: str, run_start: int, run_end: int, end: int) -> _Verdict:
        """Does the ender run buf[run_start:run_end] (closers up to `end`) end a sentence?"""
        n = len(buf)
        if end >= n:
            return _Verdict.WAIT  # more enders or closers may follow
        run = buf[run_start:run_end]
        after = buf[end]
        if after == _QUOTATIVE and buf[end - 1] in _JAPANESE_QUOTE_CLOSERS:
            return _Verdict.NO  # 「はい。」と言った: the quote is part of the sentence
        if _FULL_WIDTH_ENDERS.intersection(run) or _is_cjk(after):
            return _Verdict.CUT
        if not after.isspace():
            return _Verdict.NO
        start = end
        while start < n and buf[start].isspace():
            start += 1
        if start == n:
            return _Verdict.WAIT
        if any(ch in _LINE_BREAKS for ch in buf[end:start]):
            return _Verdict.CUT
        nxt = buf[start]
        if nxt in _OPENING_MARKS:
            return _Verdict.CUT  # ¿ or ¡ opens a Spanish sentence, whatever the word before
        if nxt.islower():
            return _Verdict.NO  # e.g. apples; "Why?" she asked
        if run != ".":
            return _Verdict.CUT  # ! ? ?! ... …
        token_start = run_start
        while token_start > 0 and not buf[token_start - 1].isspace():
            token_start -= 1
        word = _core(buf[token_start:run_start])
        key = word.lower()
        if not key:
            return _Verdict.CUT
        if key in _NEVER_END:
            return _Verdict.NO
        if (len(key) <= 3 and key.isdigit()) or (len(key) == 1 and key.isalpha()):
            line = buf[:token_start].rstrip(" \t")
            if not line or line[-1] in _LINE_BREAKS or line[-1] == ":":
                return _Verdict.NO  # a list marker: "1. First", "Steps: 1. Mix", "A. Apples"
        if key in _AMBIGUOUS or _INITIALISM.fullmatch(key) or (len(key) == 1 and key.isalpha()):
            return self._opens_sentence(buf, start)
        return _Verdict.CUT

    @staticmethod
    def _opens_sentence(buf: str, start: int) -> _Verdict:
        """Is the word at `start` a capitalised common sentence opener (The, It, We, ...)?"""
        if not buf[start].isupper():
            return _Verdict.NO
        end = start
        while end < len(buf) and (buf[end].isalpha() or buf[end] in "'’"):
            end += 1
        word = buf[start:end].lower().replace("’", "'")
        if end == len(buf):  # the word may go on: wait only while it can still become an opener
            return _Verdict.WAIT if any(o.startswith(word) for o in _SENTENCE_OPENERS) else _Verdict.NO
        return _Verdict.CUT if word in _SENTENCE_OPENERS else _Verdict.NO


def split_sentences(text: str, *, first_clause_min_words: int | None = None, max_chars: int = 300) -> list[str]:
    """Cut a whole text into pieces (no fast first clause unless asked for)."""
    chunker = SentenceChunker(first_clause_min_words=first_clause_min_words, max_chars=max_chars)
    pieces = chunker.feed(text)
    if (rest := chunker.flush()) is not None:
        pieces.append(rest)
    return pieces
