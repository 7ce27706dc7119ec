"""Text normalization before G2P: canonical, bounded, long numbers read as digit groups."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicestream.engine.text.normalize import MAX_MARKS, MAX_NUMBER_DIGITS, MAX_REPEATS, normalize_text


def test_prose_is_unchanged() -> None:
    text = "Sure! The museum opens at 10:30, costs $12.50 and 1,234 people came in 1999 (about 45%)."
    assert normalize_text(text) == text


def test_decomposed_accents_are_composed() -> None:
    assert normalize_text("cafe\u0301 de\u0301ja\u0300") == "café déjà"


def test_a_pile_of_combining_marks_is_cut_to_the_cap() -> None:
    # The input: one letter and 1,999 acute accents took 13.6 s of G2P.
    normalized = normalize_text("a" + "\u0301" * 1999)
    assert normalized == "\u00e1" + "\u0301" * MAX_MARKS  # NFC composes the first into á
    assert len(normalized) == MAX_MARKS + 1


def test_marks_of_ordinary_scripts_survive() -> None:
    hindi = "नमस्ते दुनिया"  # virama and vowel signs: never more than two marks in a row
    assert normalize_text(hindi) == unicodedata.normalize("NFC", hindi)


def test_invisible_characters_are_dropped_and_controls_are_spaces() -> None:
    assert normalize_text("zero\u200bwidth\u200d joiner\u2066x") == "zerowidth joinerx"
    assert normalize_text("tab\tand\x00nul") == "tab\tand nul"


def test_long_runs_of_one_symbol_are_cut() -> None:
    assert normalize_text("Wow!!!!!!!!") == "Wow" + "!" * MAX_REPEATS
    assert normalize_text("%" * 2000) == "%" * MAX_REPEATS
    assert normalize_text("'" * 1000 + "a") == "'" * MAX_REPEATS + "a"
    assert normalize_text("...") == "..." and normalize_text("aaaaaa") == "aaaaaa"  # letters are words


def test_a_long_number_is_read_as_digit_groups() -> None:
    assert normalize_text("Card 4111111111111111.") == "Card  4 1 1 1, 1 1 1 1, 1 1 1 1, 1 1 1 1 ."
    assert normalize_text("pi is 3.14159265358979") == "pi is  3 point 1 4 1 5, 9 2 6 5, 3 5 8 9, 7 9 "


def test_numbers_up_to_the_limit_stay_numbers() -> None:
    number = "9" * MAX_NUMBER_DIGITS
    assert normalize_text(number) == number
    assert normalize_text("1,000,000,000") == "1,000,000,000"


def test_two_thousand_nines_become_groups_of_four() -> None:
    normalized = normalize_text("9" * 2000)
    assert normalized.split(", ")[0].strip() == "9 9 9 9"
    assert normalized.count("9") == 2000 and normalized.count(",") == 499


def test_comma_chains_that_crashed_misaki_are_read_as_a_list() -> None:
    # "1,1,1,…" was parsed as one number too large for num2words: OverflowError.
    assert normalize_text("1," * 20 + "1").strip() == ", ".join(["1"] * 21)


@given(st.text(max_size=300))
def test_normalization_is_idempotent_and_bounded(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    digits = sum(char in "0123456789" for char in text)
    # Only digit grouping can grow a text (by at most a space or comma and a space per digit).
    assert len(once) <= len(unicodedata.normalize("NFC", text)) + 3 * digits + 2


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u2066\u2069"])
def test_text_of_only_invisible_characters_normalizes_to_nothing(text: str) -> None:
    assert normalize_text(text).strip() == ""
