from hypothesis import given
from hypothesis import strategies as st

from voicestream.engine.text.g2p import MAX_PHONEMES, split_phonemes


def test_short_phonemes_stay_whole() -> None:
    assert split_phonemes("həlˈO wˈɜɹld.") == ["həlˈO wˈɜɹld."]


def test_long_phonemes_are_cut_after_sentence_punctuation_first() -> None:
    sentence = "ðə kwˈɪk bɹˈWn fˈɑks, ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ. "
    pieces = split_phonemes(sentence * 20)
    assert all(len(piece) <= MAX_PHONEMES for piece in pieces)
    assert all(piece.endswith(".") for piece in pieces[:-1])


def test_falls_back_to_clauses_then_words() -> None:
    clauses = ("ab cd, " * 200).strip()
    assert all(piece.endswith(",") for piece in split_phonemes(clauses, limit=50)[:-1])
    words = ("ab " * 200).strip()
    assert all(len(piece) <= 50 and not piece.endswith(" ") for piece in split_phonemes(words, limit=50))


@given(st.text(alphabet="abc ,.!?;", max_size=2000), st.integers(min_value=5, max_value=600))
def test_pieces_respect_the_limit_and_lose_nothing(phonemes: str, limit: int) -> None:
    pieces = split_phonemes(phonemes, limit=limit)
    assert all(0 < len(piece) <= limit for piece in pieces)
    assert "".join(pieces).replace(" ", "") == phonemes.replace(" ", "")
