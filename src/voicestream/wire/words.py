"""Word timings on the wire: which word is spoken when, in seconds of a request's audio.

One concept, written once: the engine stamps `WordTiming`s on its audio chunks, the bidi session
sends them in a `words` control frame (docs/protocol.md), the speak function and the OpenAI
route pass them on (docs/speak.md), and clients use `words_heard` to tell, at a barge-in,
which words the listener actually heard. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.framing import json_number

MAX_WORD_CHARS = 256


@dataclass(frozen=True, slots=True)
class WordTiming:
    """One word and where it is spoken, in seconds from the start of its request's audio."""

    word: str
    start_s: float
    end_s: float

    def shifted(self, offset_s: float) -> WordTiming:
        return WordTiming(self.word, round(self.start_s + offset_s, 4), round(self.end_s + offset_s, 4))


def word_dicts(words: Iterable[WordTiming]) -> list[dict[str, Any]]:
    """The JSON form: `[{"word", "start_s", "end_s"}, ...]`, times rounded to 0.1 ms."""
    return [{"word": w.word, "start_s": round(w.start_s, 4), "end_s": round(w.end_s, 4)} for w in words]


def parse_words(value: Any, what: str = "words") -> tuple[WordTiming, ...]:
    """Validate the JSON form; `ProtocolError` invalid_request naming what is wrong."""
    if not isinstance(value, list):
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{what} must be a list, got {type(value).__name__}")
    words = []
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{what}[{position}] must be an object")
        word, start, end = item.get("word"), json_number(item.get("start_s")), json_number(item.get("end_s"))
        if not isinstance(word, str) or not word or len(word) > MAX_WORD_CHARS:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"{what}[{position}].word must be a non-empty string")
        if start is None or end is None or start < 0 or end < start:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, f"{what}[{position}] needs numbers 0 <= start_s <= end_s, got {item!r}"
            )
        words.append(WordTiming(word, start, end))
    return tuple(words)


@dataclass(frozen=True, slots=True)
class HeardWord:
    """A word of a request, and whether the listener heard all of it or only its beginning."""

    request_id: str
    word: str
    start_s: float
    end_s: float
    complete: bool


def words_heard(requests: Sequence[tuple[str, float | None, Sequence[WordTiming]]], played_s: float) -> list[HeardWord]:
    """The words a listener heard after `played_s` seconds of a stream of requests played back to back.

    `requests` are (request_id, seconds of audio, words) in play order; a request's duration may
    be None only for the last one (still streaming). A word counts once its start was played;
    `complete` says whether its end was too."""
    heard: list[HeardWord] = []
    offset = 0.0
    for request_id, duration_s, words in requests:
        position = played_s - offset
        if position <= 0:
            break
        for word in words:
            if word.start_s >= position:
                break
            heard.append(HeardWord(request_id, word.word, word.start_s, word.end_s, word.end_s <= position))
        if duration_s is None:
            break
        offset += duration_s
    return heard
