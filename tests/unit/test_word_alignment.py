"""The word aligner behind the timing-accuracy check (no model: made-up timings)."""

from __future__ import annotations

import pytest

from tests.support.word_alignment import align, normalize

ENGINE = [
    ("Thanks", 0.00, 0.55),
    ("for", 0.58, 0.75),
    ("waiting,", 0.78, 1.15),
    ("I", 1.50, 1.60),
    ("found", 1.62, 1.85),
    ("your", 1.86, 2.02),
    ("booking", 2.05, 2.35),
    ("and", 2.36, 2.48),
    ("checked", 2.50, 2.78),
    ("every", 2.80, 3.05),
    ("option.", 3.10, 3.50),
]
# What Whisper made of it: "and checked" heard as "unchecked", one word merged, times off a little.
HEARD = [
    ("Thanks", 0.0, 0.6),
    ("for", 0.6, 0.78),
    ("waiting.", 0.78, 1.1),
    ("I", 1.52, 1.64),
    ("found", 1.64, 1.84),
    ("your", 1.84, 2.06),
    ("booking", 2.06, 2.3),
    ("unchecked", 2.3, 2.72),
    ("every", 2.72, 3.12),
    ("option.", 3.12, 3.42),
]


def test_misheard_words_are_left_out_and_the_rest_line_up() -> None:
    alignment = align(ENGINE, HEARD)
    assert [engine[0] for engine, _ in alignment.pairs] == [
        "Thanks", "for", "waiting,", "I", "found", "your", "booking", "every", "option.",
    ]  # fmt: skip
    assert alignment.matched_share == pytest.approx(9 / 11)
    assert alignment.median_start_error_s() == pytest.approx(0.02)
    assert max(alignment.start_errors_s()) == pytest.approx(0.08)


def test_a_constant_offset_shows_as_bias() -> None:
    shifted = [(w, s + 0.2, e + 0.2) for w, s, e in ENGINE]
    alignment = align(shifted, ENGINE)
    assert alignment.start_bias_s() == pytest.approx(0.2)
    assert alignment.median_start_error_s() == pytest.approx(0.2)


def test_normalization_and_nothing_to_compare() -> None:
    assert normalize("Don’t,") == "don't" and normalize("—") == ""
    with pytest.raises(ValueError, match="no word matched"):
        align([("hello", 0, 1)], [("bye", 0, 1)]).median_start_error_s()
