"""PhonemeTable (engine/text/phoneme_table.py): phonemes looked up instead of converted, as the
text front end's source (frontend.py `PhonemeSource`). No model: words and pieces only."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from voicestream.engine.base import EngineError
from voicestream.engine.text.frontend import TextFrontend
from voicestream.engine.text.g2p import MAX_PHONEMES, Phonemes, SpokenWord
from voicestream.engine.text.phoneme_table import PhonemeTable, Recording
from voicestream.wire.voices import OFFICIAL_VOICES

HELLO = Phonemes("həlˈO ðˈɛɹ.", (SpokenWord("Hello", 0, 5), SpokenWord("there", 6, 10)))


class Letters:
    """A PhonemeSource of our own: each text's letters, one word per space-separated token."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def phonemize_many(self, texts: Sequence[str], language: str) -> list[Phonemes]:
        self.asked.append(tuple(texts))
        return [Phonemes(text.lower(), (SpokenWord(text, 0, len(text)),)) for text in texts]

    def warm(self, language: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_saved_table_loads_with_its_words(tmp_path: Path) -> None:
    table = PhonemeTable({("en-us", "Hello there."): HELLO})
    table.save(tmp_path / "phonemes.json")
    loaded = PhonemeTable.load(tmp_path / "phonemes.json")
    assert loaded.phonemize_many(["Hello there."], "en-us") == [HELLO]


def test_a_text_the_table_lacks_is_an_error_that_names_it() -> None:
    table = PhonemeTable({("en-us", "Hello there."): HELLO})
    with pytest.raises(EngineError, match=r"'Goodbye\.'"):
        table.phonemize_many(["Hello there.", "Goodbye."], "en-us")
    with pytest.raises(EngineError, match="en-gb"):
        table.phonemize_many(["Hello there."], "en-gb")  # another language is another text


def test_a_recording_keeps_what_the_front_end_asked_for_and_answers_it_alone() -> None:
    source = Letters()
    recording = Recording(source)
    frontend = TextFrontend(OFFICIAL_VOICES, source=recording)
    said = frontend.pieces("A.", "af_heart")
    assert frontend.count(["B.", "A."], "af_heart") == 4
    table = recording.table()
    assert len(table) == 2 and source.asked == [("A.",), ("B.", "A.")]
    assert TextFrontend(OFFICIAL_VOICES, source=table).pieces("A.", "af_heart") == said


def test_the_front_end_takes_its_phonemes_from_the_source_it_is_given() -> None:
    long = "x" * (MAX_PHONEMES + 10)
    frontend = TextFrontend(OFFICIAL_VOICES, source=PhonemeTable({("en-us", "Hello there."): HELLO}))
    assert frontend.pieces("Hello there.", "af_heart") == [HELLO]
    assert frontend.count(["Hello there.", "Hello there."], "af_heart") == 2 * len(HELLO.text)
    with pytest.raises(EngineError, match="phoneme table"):
        frontend.pieces("Hello there.", "bf_emma")  # a British voice: en-gb, not in the table
    pieces = TextFrontend(OFFICIAL_VOICES, source=Letters()).pieces(long, "af_heart")
    assert len(pieces) == 2 and all(len(piece.text) <= MAX_PHONEMES for piece in pieces)
