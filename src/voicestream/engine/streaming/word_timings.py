"""When each word is spoken, from the encoder's durations (frames per phoneme token).

The G2P says which phonemes belong to which word (g2p.Phonemes); the model turns phonemes into
vocabulary ids (characters outside the vocabulary are dropped) and predicts how many frames
each id lasts (`durations`, 600 samples = 25 ms per frame, the leading and trailing pad
included). A word starts where its first id's frames start and ends where its last id's frames
end, so the silence of a pause (a comma, the pads) belongs to no word.

Chunk rule: a word goes with the audio chunk in which it starts; times are seconds from the
start of the `synthesize()` call's audio (the engine adds the pieces before).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import WordTiming
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME
from voicestream.engine.text.g2p import Phonemes
from voicestream.wire.bidi import SAMPLE_RATE

FRAME_S = SAMPLES_PER_FRAME / SAMPLE_RATE


@dataclass(frozen=True, slots=True)
class TokenWord:
    """A word as model tokens: ids[first:end] (pads excluded)."""

    text: str
    first: int
    end: int


def tokenize(piece: Phonemes, vocab: Mapping[str, int]) -> tuple[list[int], list[TokenWord]]:
    """The piece's vocabulary ids, and each of its words' id range (words with no ids dropped)."""
    ids: list[int] = []
    token_at = []  # token_at[c]: ids before character c
    for char in piece.text:
        token_at.append(len(ids))
        if char in vocab:
            ids.append(vocab[char])
    token_at.append(len(ids))
    words = [TokenWord(w.text, token_at[w.start], token_at[w.end]) for w in piece.words]
    return ids, [word for word in words if word.end > word.first]


def word_frames(words: list[TokenWord], durations: npt.NDArray[np.int64]) -> list[tuple[str, int, int]]:
    """(word, first frame, end frame) of each word, from durations [1, tokens + 2] (pads included).
    Words past the durations' tokens (a head encoding's, lookahead.py) are left out."""
    edges = np.concatenate([[0], np.cumsum(durations[0])])  # edges[t]: frames before token t (pad = 0)
    return [
        (word.text, int(edges[word.first + 1]), int(edges[word.end + 1])) for word in words if word.end + 1 < len(edges)
    ]


def words_starting_in(
    words: list[TokenWord], durations: npt.NDArray[np.int64], start: int, end: int, offset_s: float
) -> tuple[WordTiming, ...]:
    """The words whose first frame is in [start, end), timed from `offset_s`."""
    return tuple(
        WordTiming(text, round(offset_s + first * FRAME_S, 4), round(offset_s + last * FRAME_S, 4))
        for text, first, last in word_frames(words, durations)
        if start <= first < end
    )
