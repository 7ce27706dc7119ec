"""The incremental sentence chunker: real LLM-output edge cases, and properties over any text."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.chunker import SentenceChunker, split_sentences


def stream(fragments: list[str], **options: int | None) -> list[str]:
    """Every piece a chunker gives for `fragments` fed one by one, flush included."""
    chunker = SentenceChunker(**options)  # type: ignore[arg-type]
    pieces = [piece for fragment in fragments for piece in chunker.feed(fragment)]
    if (rest := chunker.flush()) is not None:
        pieces.append(rest)
    return pieces


def reproduces(text: str, pieces: list[str]) -> bool:
    """True when whitespace gaps and the pieces, interleaved, are exactly `text`."""
    pos = 0
    for piece in pieces:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if not text.startswith(piece, pos):
            return False
        pos += len(piece)
    return not text[pos:].strip()


# -- abbreviations, numbers, addresses -----------------------------------------------------------


def test_titles_and_latin_abbreviations_do_not_end_a_sentence() -> None:
    text = "Dr. Smith met Mr. and Mrs. Jones at St. Mary's, e.g. in the U.S. office, i.e. here, etc. and left. Then"
    assert split_sentences(text) == [text.removesuffix(" Then"), "Then"]


def test_title_then_capitalised_name_does_not_cut() -> None:
    assert split_sentences("I saw Dr. Who. Prof. Xavier came. Gen. Lee too.") == [
        "I saw Dr. Who.",
        "Prof. Xavier came.",
        "Gen. Lee too.",
    ]


def test_initialism_ends_a_sentence_only_before_a_sentence_opener() -> None:
    assert split_sentences("We moved to the U.S. The weather is nice. The U.S. Army was there.") == [
        "We moved to the U.S.",
        "The weather is nice.",
        "The U.S. Army was there.",
    ]


def test_etc_before_a_new_sentence_cuts() -> None:
    assert split_sentences("Bring pens, paper, etc. We start at nine.") == [
        "Bring pens, paper, etc.",
        "We start at nine.",
    ]


def test_initials_of_a_name_do_not_cut() -> None:
    assert split_sentences("J. R. R. Tolkien wrote books. Vitamin C. It helps.") == [
        "J. R. R. Tolkien wrote books.",
        "Vitamin C.",
        "It helps.",
    ]


def test_decimals_times_and_money_do_not_cut() -> None:
    assert split_sentences("Pi is 3.14 and it is 9:40 now. It costs $4.50 today.") == [
        "Pi is 3.14 and it is 9:40 now.",
        "It costs $4.50 today.",
    ]


def test_number_at_the_end_of_a_sentence_cuts() -> None:
    assert split_sentences("It happened in 1999. 2000 was better.") == ["It happened in 1999.", "2000 was better."]


def test_urls_and_emails_do_not_cut() -> None:
    assert split_sentences("Visit example.com/a.b for details. Email john.doe@x.org. Or www.x.io/?q=1!") == [
        "Visit example.com/a.b for details.",
        "Email john.doe@x.org.",
        "Or www.x.io/?q=1!",
    ]


def test_lowercase_after_a_period_continues_the_sentence() -> None:
    assert split_sentences("Take approx. five. Use fig. three and vs. them.") == [
        "Take approx. five.",
        "Use fig. three and vs. them.",
    ]


# -- enders, quotes, brackets ---------------------------------------------------------------------


def test_ellipsis_before_a_capital_cuts_and_before_lowercase_does_not() -> None:
    assert split_sentences("Well... I think so. I waited… and waited. Hmm...") == [
        "Well...",
        "I think so.",
        "I waited… and waited.",
        "Hmm...",
    ]


def test_closing_quote_stays_with_its_sentence() -> None:
    assert split_sentences("He said \"Go.\" Then he left. She said 'Stop!' Nobody did.") == [
        'He said "Go."',
        "Then he left.",
        "She said 'Stop!'",
        "Nobody did.",
    ]


def test_closing_bracket_and_markdown_emphasis_stay_with_their_sentence() -> None:
    assert split_sentences("(This is an aside.) **Be careful.** Next one.") == [
        "(This is an aside.)",
        "**Be careful.**",
        "Next one.",
    ]


def test_question_then_lowercase_speech_tag_does_not_cut() -> None:
    assert split_sentences('"Why?" she asked. Nobody knew.') == ['"Why?" she asked.', "Nobody knew."]


def test_interrobang_runs_end_a_sentence() -> None:
    assert split_sentences("Really?! That is great!? Yes!!! OK.") == [
        "Really?!",
        "That is great!?",
        "Yes!!!",
        "OK.",
    ]


def test_cjk_and_full_width_enders_cut_without_spaces() -> None:
    assert split_sentences("你好。我是小明！你呢？好的") == ["你好。", "我是小明！", "你呢？", "好的"]


def test_japanese_closing_bracket_stays_with_the_sentence() -> None:
    assert split_sentences("「はい。」次です。") == ["「はい。」", "次です。"]


def test_ascii_ender_directly_before_cjk_cuts() -> None:
    assert split_sentences("OK.你好") == ["OK.", "你好"]


# -- lines and lists ------------------------------------------------------------------------------


def test_numbered_list_items_are_pieces_and_their_numbers_do_not_cut() -> None:
    assert split_sentences("Here are the steps:\n1. First item\n2. Second item.\n10. Tenth") == [
        "Here are the steps:",
        "1. First item",
        "2. Second item.",
        "10. Tenth",
    ]


def test_blank_lines_bullets_and_crlf_are_boundaries() -> None:
    assert split_sentences("Title\n\nFirst paragraph here\r\n- apples\n- pears") == [
        "Title",
        "First paragraph here",
        "- apples",
        "- pears",
    ]


def test_newline_after_an_abbreviation_still_cuts() -> None:
    assert split_sentences("We met in the U.S.\nArmy bases were near.") == [
        "We met in the U.S.",
        "Army bases were near.",
    ]


# -- stray punctuation ----------------------------------------------------------------------------


def test_trailing_punctuation_stays_with_the_last_sentence() -> None:
    assert split_sentences("Hello there. ---") == ["Hello there. ---"]
    assert split_sentences("Hello there.\n\n---\n") == ["Hello there.\n\n---"]


def test_leading_punctuation_stays_with_the_next_sentence() -> None:
    assert split_sentences("Hello. ... World is big. -- Yes.") == ["Hello.", "... World is big.", "-- Yes."]


def test_text_without_letters_or_digits_gives_no_piece() -> None:
    assert split_sentences("... !!! ---") == []
    assert split_sentences("   ") == []
    assert split_sentences("") == []


# -- streaming ------------------------------------------------------------------------------------


def test_first_sentence_is_out_as_soon_as_its_end_is_certain() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("Hello there.") == []  # "." may be "there.com" or an ellipsis
    assert chunker.feed(" ") == []  # the next word may start in lower case
    assert chunker.feed("W") == ["Hello there."]


def test_whole_boundary_in_one_fragment_is_emitted_at_once() -> None:
    assert SentenceChunker().feed("Hello there. W") == ["Hello there."]


def test_sentence_end_split_across_fragments_is_not_cut_early() -> None:
    chunker = SentenceChunker(first_clause_min_words=None)
    assert chunker.feed("I saw Dr") == []
    assert chunker.feed(".") == []
    assert chunker.feed(" Smith today") == []
    assert chunker.feed(". T") == ["I saw Dr. Smith today."]


def test_decimal_split_across_fragments_is_not_cut() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("It costs 3.") == []
    assert chunker.feed("14 dollars. And") == ["It costs 3.14 dollars."]


def test_abbreviation_waits_only_while_the_next_word_can_open_a_sentence() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("We moved to the U.S. The") == []  # "The" or "Theodore"?
    assert chunker.feed(" ") == ["We moved to the U.S."]


def test_flush_returns_the_rest_and_resets_for_the_next_reply() -> None:
    chunker = SentenceChunker(first_clause_min_words=2)
    assert chunker.feed("One two, three. Four, five") == ["One two,", "three."]
    assert chunker.flush() == "Four, five"
    assert chunker.flush() is None
    assert chunker.feed("Six seven, eight") == ["Six seven,"]  # a new reply: fast first clause again


# -- fast first clause and max_chars ----------------------------------------------------------------


def test_first_piece_may_be_a_clause_later_pieces_are_sentences() -> None:
    text = "Sure, here is the plan: first we go, then we stay. Next, we will eat, and then sleep."
    assert stream([text]) == [
        "Sure, here is the plan:",
        "first we go, then we stay.",
        "Next, we will eat, and then sleep.",
    ]


def test_first_clause_needs_the_minimum_number_of_words() -> None:
    assert stream(["Well, I think so, yes. Ok."], first_clause_min_words=3) == ["Well, I think so,", "yes.", "Ok."]


def test_first_clause_at_dashes_and_semicolons() -> None:
    assert stream(["Short one—then the rest."], first_clause_min_words=2) == ["Short one—", "then the rest."]
    assert stream(["Short one - then the rest."], first_clause_min_words=2) == ["Short one -", "then the rest."]
    assert stream(["Short one; then the rest."], first_clause_min_words=2) == ["Short one;", "then the rest."]


def test_first_clause_ignores_commas_in_numbers_and_times() -> None:
    assert stream(["It cost 1,000 dollars at 9:40 today. Ok."], first_clause_min_words=1) == [
        "It cost 1,000 dollars at 9:40 today.",
        "Ok.",
    ]


def test_first_clause_disabled() -> None:
    text = "Sure, here is the plan: first we go. Then"
    assert stream([text], first_clause_min_words=None) == ["Sure, here is the plan: first we go.", "Then"]


def test_max_chars_cuts_at_the_last_clause_mark_first() -> None:
    text = "one two, three four five six seven eight nine ten."
    assert split_sentences(text, max_chars=30) == ["one two,", "three four five six seven", "eight nine ten."]


def test_max_chars_cuts_at_whitespace_without_a_clause_mark() -> None:
    assert split_sentences("aaa bbb ccc ddd eee", max_chars=9) == ["aaa bbb", "ccc ddd", "eee"]


def test_max_chars_cuts_hard_inside_a_word_longer_than_the_limit() -> None:
    assert split_sentences("x" * 25, max_chars=10) == ["x" * 10, "x" * 10, "x" * 5]


def test_bad_options_and_input_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        SentenceChunker(max_chars=0)
    with pytest.raises(ValueError, match="first_clause_min_words"):
        SentenceChunker(first_clause_min_words=0)
    with pytest.raises(TypeError, match="bytes"):
        SentenceChunker().feed(b"Hello.")  # type: ignore[arg-type]


# -- properties -----------------------------------------------------------------------------------

TOKENS = [
    "Hello", "there", "world", "the", "The", "Theo", "It", "it", "I", "we", "We", "a", "A", "cats",
    "Army", "Then", "Inc.", "p", "m",
    "Dr.", "Mr.", "St.", "e.g.", "i.e.", "U.S.", "etc.", "p.m.", "No.", "J.", "3.14", "9:40",
    "$4.50", "1,000", "example.com/a.b", "john.doe@x.org", "1.", "2.", "10.", "你好", "。", "！",
    ".", "..", "...", "…", "!", "?", "?!", ",", ";", ":", "—", "-", "–", '"', "'", "(", ")",
    "**", "”", "」", "\n", "\n\n", "\r\n", "\t", "  ",
]  # fmt: skip

texts = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=60).flatmap(
        lambda tokens: st.lists(st.sampled_from([" ", "", "", "\n"]), min_size=len(tokens), max_size=len(tokens)).map(
            lambda seps: "".join(t + s for t, s in zip(tokens, seps, strict=True))
        )
    ),
    st.text(alphabet="aZ1 .!?,:;\n\"')。—…", max_size=120),
)
options = st.fixed_dictionaries(
    {"first_clause_min_words": st.sampled_from([None, 1, 4]), "max_chars": st.sampled_from([6, 25, 300])}
)


@st.composite
def split_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(texts)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(split_text(), options)
def test_any_fragmentation_gives_the_pieces_of_the_whole_text(
    case: tuple[str, list[str]], opts: dict[str, int]
) -> None:
    text, fragments = case
    whole = stream([text], **opts)
    assert stream(fragments, **opts) == whole
    assert stream(list(text), **opts) == whole  # one character at a time: every end is a fragment end


@settings(max_examples=300, deadline=None)
@given(split_text(), options)
def test_pieces_and_whitespace_gaps_reproduce_the_input(case: tuple[str, list[str]], opts: dict[str, int]) -> None:
    text, fragments = case
    pieces = stream(fragments, **opts)
    if any(ch.isalnum() for ch in text):
        assert reproduces(text, pieces), pieces
    else:
        assert pieces == []
    for piece in pieces:
        assert piece == piece.strip() and any(ch.isalnum() for ch in piece), piece


@settings(max_examples=300, deadline=None)
@given(texts, options)
def test_fed_pieces_respect_max_chars(text: str, opts: dict[str, int]) -> None:
    for piece in SentenceChunker(**opts).feed(text):
        first_word = next(i for i, ch in enumerate(piece) if ch.isalnum())
        assert len(piece) <= max(opts["max_chars"], first_word + 1), piece


def test_agent_entities_streamed_in_small_fragments_are_never_cut_inside() -> None:
    # What agent_text.py reads as one entity must reach it whole, however an LLM streams it.
    reply = (
        "Dr. Smith can see you at 3:45 PM on Dec. 3rd, e.g. for the $1,249.99 plan, i.e. the 3.5 GB one. "
        "Call +1 (415) 555-0132, email support@example.com or read https://example.com/docs/v2.1.3 first. "
        "It is 5 km from St. Louis, approx. 20 min."
    )
    expected = [
        "Dr. Smith can see you at 3:45 PM on Dec. 3rd,",
        "e.g. for the $1,249.99 plan, i.e. the 3.5 GB one.",
        "Call +1 (415) 555-0132, email support@example.com or read https://example.com/docs/v2.1.3 first.",
        "It is 5 km from St. Louis, approx. 20 min.",
    ]
    chunker = SentenceChunker(first_clause_min_words=5)
    pieces = [piece for start in range(0, len(reply), 3) for piece in chunker.feed(reply[start : start + 3])]
    assert [*pieces, chunker.flush()] == expected
