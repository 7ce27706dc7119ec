"""Line up an engine's word timings with a recognizer's, word by word, and measure how far apart
their starts are. Pure standard library: the unit tier tests it, the integration test and
benchmarks/word_timings.py use it with Whisper's word timestamps.

Words are matched on their normalized text (lower case, letters, digits and apostrophes) with
difflib's longest-matching-blocks, so a word the recognizer heard differently ("and checked" →
"unchecked") is left out instead of shifting every pair after it.
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Timed = tuple[str, float, float]  # word, start_s, end_s


def normalize(word: str) -> str:
    return re.sub(r"[^a-z0-9']", "", word.lower().replace("’", "'"))


@dataclass(frozen=True)
class Alignment:
    pairs: list[tuple[Timed, Timed]]  # (engine word, recognized word)
    engine_words: int
    recognized_words: int

    @property
    def matched_share(self) -> float:
        return len(self.pairs) / self.engine_words if self.engine_words else 0.0

    def start_errors_s(self) -> list[float]:
        return [abs(engine[1] - heard[1]) for engine, heard in self.pairs]

    def end_errors_s(self) -> list[float]:
        return [abs(engine[2] - heard[2]) for engine, heard in self.pairs]

    def median_start_error_s(self) -> float:
        errors = self.start_errors_s()
        if not errors:
            raise ValueError("no word matched: nothing to compare")
        return statistics.median(errors)

    def start_bias_s(self) -> float:
        """Mean signed difference (engine - recognizer): a constant offset shows here."""
        return statistics.fmean(engine[1] - heard[1] for engine, heard in self.pairs) if self.pairs else 0.0


def align(engine: Sequence[Timed], recognized: Sequence[Timed]) -> Alignment:
    ours = [(normalize(w[0]), w) for w in engine]
    theirs = [(normalize(w[0]), w) for w in recognized]
    ours = [item for item in ours if item[0]]
    theirs = [item for item in theirs if item[0]]
    matcher = difflib.SequenceMatcher(a=[k for k, _ in ours], b=[k for k, _ in theirs], autojunk=False)
    pairs = [
        (ours[block.a + i][1], theirs[block.b + i][1])
        for block in matcher.get_matching_blocks()
        for i in range(block.size)
    ]
    return Alignment(pairs, len(ours), len(theirs))
