"""Words through G2P and durations: misaki's tokens to phoneme spans, spans to frames and chunks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from voicestream.engine.streaming.word_timings import FRAME_S, TokenWord, tokenize, word_frames, words_starting_in
from voicestream.engine.text.g2p import Phonemes, SpokenWord, align_words


@dataclass
class Token:
    """The fields of misaki's MToken that the alignment reads."""

    text: str
    phonemes: str | None
    whitespace: str


TOKENS = [
    Token("I", "ˌI", " "),
    Token("paid", "pˈAd", " "),
    Token("$", "", ""),
    Token("5", "fˈIv dˈɑləɹz", ""),
    Token(",", ",", " "),
    Token("zxq", None, ""),
    Token("!", "!", ""),
]


def test_words_are_the_tokens_that_hold_letters_or_digits_with_their_phoneme_spans() -> None:
    aligned = align_words(TOKENS)
    assert aligned.text == "ˌI pˈAd fˈIv dˈɑləɹz, ❓!"  # as misaki joins them
    assert [(w.text, aligned.text[w.start : w.end]) for w in aligned.words] == [
        ("I", "ˌI"),
        ("paid", "pˈAd"),
        ("$5", "fˈIv dˈɑləɹz"),  # "$" speaks nothing: it joins the word it touches
        ("zxq", "❓"),  # an unknown word keeps misaki's mark (not in the vocabulary: no frames)
    ]


def test_pieces_keep_each_word_in_the_piece_where_it_starts() -> None:
    text = "ab cd, ef gh. ij kl."
    words = tuple(SpokenWord(w, text.index(w), text.index(w) + 2) for w in ("ab", "cd", "ef", "gh", "ij", "kl"))
    pieces = Phonemes(text, words).pieces(limit=8)
    assert [piece.text for piece in pieces] == ["ab cd,", "ef gh.", "ij kl."]
    for piece in pieces:
        assert [piece.text[w.start : w.end] for w in piece.words] == [w.text for w in piece.words]
    assert [w.text for piece in pieces for w in piece.words] == ["ab", "cd", "ef", "gh", "ij", "kl"]


@given(st.lists(st.text(alphabet="abcdef", min_size=1, max_size=6), min_size=1, max_size=120), st.integers(8, 60))
def test_every_word_lands_in_exactly_one_piece_at_its_own_phonemes(words: list[str], limit: int) -> None:
    text = " ".join(words)
    spans, position = [], 0
    for word in words:
        spans.append(SpokenWord(word, position, position + len(word)))
        position += len(word) + 1
    pieces = Phonemes(text, tuple(spans)).pieces(limit=limit)
    placed = [(w.text, piece.text[w.start : w.end]) for piece in pieces for w in piece.words]
    assert [text for text, _ in placed] == words
    for word, phonemes in placed:
        assert word.startswith(phonemes) and phonemes  # a hard cut may shorten the last word of a piece


def test_word_frames_come_from_the_durations_of_their_tokens() -> None:
    piece = Phonemes("ab c!", (SpokenWord("ab", 0, 2), SpokenWord("c", 3, 4)))
    vocab = {"a": 1, "b": 2, " ": 16, "c": 3, "!": 5}
    ids, words = tokenize(piece, vocab)
    assert ids == [1, 2, 16, 3, 5] and words == [TokenWord("ab", 0, 2), TokenWord("c", 3, 4)]
    durations = np.array([[10, 2, 3, 4, 5, 6, 7]])  # pad, a, b, space, c, !, pad
    assert word_frames(words, durations) == [("ab", 10, 15), ("c", 19, 24)]
    first = words_starting_in(words, durations, 0, 19, offset_s=1.0)
    assert [(w.word, w.start_s, w.end_s) for w in first] == [("ab", 1.0 + 10 * FRAME_S, 1.0 + 15 * FRAME_S)]
    assert [w.word for w in words_starting_in(words, durations, 19, 40, 0.0)] == ["c"]
    # Durations of a head encoding that stops before "c": only "ab" can be placed.
    assert [w for w, _, _ in word_frames(words, np.array([[10, 2, 3, 4]]))] == ["ab"]


def test_characters_outside_the_vocabulary_take_no_frames() -> None:
    piece = Phonemes("a❓ b", (SpokenWord("a", 0, 1), SpokenWord("zxq", 1, 2), SpokenWord("b", 3, 4)))
    ids, words = tokenize(piece, {"a": 1, " ": 16, "b": 2})
    assert ids == [1, 16, 2]
    assert [w.text for w in words] == ["a", "b"]  # the unknown word has no tokens, so no timing
