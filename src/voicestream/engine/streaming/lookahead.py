"""Encode a long sentence's start first: first audio that does not grow with the sentence.

The encoder (PL-BERT, the LSTMs, the prosody predictor) runs over the whole sentence before the
first window can be decoded, and its cost grows with the sentence: on 2 cores it was most of
what a 50-word sentence's first audio spent beyond a 5-word one's. So a long piece is encoded
twice: first its *head* (the first `spoken_tokens`+ phonemes, cut at a word boundary, plus
`lookahead_tokens`+ more so the head's last spoken words are shaped by what follows them, not
by an end of sentence), and the head's spoken part is decoded from that at once; then the whole
piece, whose frames from the join onwards follow on (each runtime's `join`: the features'
layout is its own). The join is at a word boundary, and the decoder windows around it see both
sides, like any other seam.

What it costs: the head's encoder run (a short sentence's) once per long piece; what it changes:
the head's words get durations and pitch from a shorter context than the whole sentence's (they
were measured close: docs/engine-evidence.md, "Lookahead"), so a long sentence does not sound
exactly as it would encoded whole. `OnnxEngine(strategy=OnnxStrategy(lookahead=None))` turns it off
(`TorchEngine(lookahead=None)` on torch).

Pure arithmetic and numpy: the runtime runs the encoder and joins the features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

SPACE_ID = 16  # Kokoro's vocabulary id of " ": word boundaries in a token sequence


@dataclass(frozen=True, slots=True)
class LookaheadPlan:
    """In phoneme tokens (one vocabulary id each, ~2.5 frames of speech on average)."""

    spoken_tokens: int = 40  # at least this many tokens are spoken from the head's encoding...
    lookahead_tokens: int = 40  # ...which also encodes at least this many more, not spoken
    min_rest_tokens: int = 20  # a piece whose rest after the head is shorter is encoded whole

    def __post_init__(self) -> None:
        if min(self.spoken_tokens, self.lookahead_tokens, self.min_rest_tokens) < 1:
            raise ValueError(f"lookahead sizes must be >= 1, got {self}")


@dataclass(frozen=True, slots=True)
class HeadSplit:
    """Token indices (into the piece's ids, pads excluded): the head's encoder input is
    ids[:end]; tokens before `join` are spoken from it, the rest from the whole piece."""

    join: int
    end: int


def head_split(ids: list[int], plan: LookaheadPlan | None) -> HeadSplit | None:
    """Where to cut a piece's head, at word boundaries (after a space); None: encode it whole."""
    if plan is None:
        return None
    starts = [index for index in range(1, len(ids)) if ids[index - 1] == SPACE_ID and ids[index] != SPACE_ID]
    join = next((start for start in starts if start >= plan.spoken_tokens), None)
    if join is None:
        return None
    end = next((start for start in starts if start >= join + plan.lookahead_tokens), None)
    if end is None or len(ids) - end < plan.min_rest_tokens:
        return None
    while end > join and ids[end - 1] == SPACE_ID:  # the head ends on its last word, not a space
        end -= 1
    return HeadSplit(join, end)


def frames_before(durations: npt.NDArray[np.int64], token: int) -> int:
    """Frames spoken before the piece's token `token` (its leading pad included), from the
    encoder's durations [1, tokens + 2]."""
    return int(durations[0, : token + 1].sum())
