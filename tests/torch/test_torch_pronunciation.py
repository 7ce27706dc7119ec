"""Pronunciation control on the torch engine: the same front end as the ONNX engine's
(tests/integration/test_pronunciation.py hears it there), so the lexicon, inline markup and
phoneme input change its phonemes the same way, its word timings name the text's words, and a
symbol outside its model's vocabulary is refused. Random weights: checked by phonemes, not by ear."""

from __future__ import annotations

import pytest

from voicestream.engine.text.options import TextOptions
from voicestream.engine.text.pronunciation import InvalidPhonemesError
from voicestream.engine.torch.engine import TorchEngine
from voicestream.wire.errors import ErrorCode

TEXT = "Bring the blorptang."
SAID = "Bring the umbrella."
UMBRELLA = "/ˌʌmbɹˈɛlə/"


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (TEXT, TextOptions(lexicon=(("blorptang", "umbrella"),))),
        (TEXT, TextOptions(lexicon=(("blorptang", UMBRELLA),))),
        (f"Bring the [blorptang]({UMBRELLA}).", TextOptions()),
    ],
    ids=["respelling", "phonemes", "inline-markup"],
)
def test_lexicon_and_markup_say_the_real_word(engine: TorchEngine, text: str, options: TextOptions) -> None:
    assert engine.phonemes(TEXT, "af_heart") != engine.phonemes(SAID, "af_heart")
    assert engine.phonemes(text, "af_heart", options) == engine.phonemes(SAID, "af_heart")
    words = [word.word for chunk in engine.synthesize(text, text_options=options) for word in chunk.words]
    assert [word.strip(".") for word in words] == ["Bring", "the", "blorptang"]


def test_phoneme_input_round_trips_and_times_its_groups(engine: TorchEngine) -> None:
    [phonemes] = engine.phonemize([SAID], "af_heart")
    as_input = TextOptions(phonemes=True)
    assert engine.phonemes(phonemes, "af_heart", as_input) == engine.phonemes(SAID, "af_heart")
    words = [word.word for chunk in engine.synthesize(phonemes, text_options=as_input) for word in chunk.words]
    assert words == phonemes.rstrip(".").split()


def test_a_symbol_outside_the_models_vocabulary_is_refused(engine: TorchEngine) -> None:
    assert "ʌ" in engine.phoneme_vocabulary() and "§" not in engine.phoneme_vocabulary()
    with pytest.raises(InvalidPhonemesError) as caught:
        list(engine.synthesize("bɹˈɪŋ§", text_options=TextOptions(phonemes=True)))
    assert caught.value.code == ErrorCode.INVALID_PHONEMES and "'§' (U+00A7 SECTION SIGN) at position 5" in str(
        caught.value
    )
