"""Where a long piece's head is cut (engine/streaming/lookahead.py): at word boundaries, never for short pieces."""

from __future__ import annotations

from voicestream.engine.streaming.lookahead import SPACE_ID, HeadSplit, LookaheadPlan, head_split


def test_the_head_is_cut_at_word_boundaries_and_short_pieces_are_not_cut() -> None:
    word = [50, 83, 54]
    ids = [*word, SPACE_ID] * 40  # 40 words of 3 phonemes
    split = head_split(ids, LookaheadPlan(spoken_tokens=10, lookahead_tokens=10, min_rest_tokens=5))
    assert split == HeadSplit(join=12, end=23)  # word starts at 12 and 24; the head ends before the space
    assert ids[split.join - 1] == SPACE_ID and ids[split.end] == SPACE_ID
    assert head_split(ids[:28], LookaheadPlan(spoken_tokens=10, lookahead_tokens=10, min_rest_tokens=5)) is None
    assert head_split(ids, None) is None
    assert head_split(word * 50, LookaheadPlan(spoken_tokens=10, lookahead_tokens=10)) is None  # no boundary
