"""The voice grammar (wire/voices.py): ids, blends, languages; standard library only."""

import pytest

from voicestream.wire.errors import ProtocolError
from voicestream.wire.voices import OFFICIAL_VOICES, UnknownVoice, parse_voice_spec


def test_single_voice_has_full_weight_and_its_language() -> None:
    blend = parse_voice_spec("bf_emma", OFFICIAL_VOICES)
    assert blend.parts == (("bf_emma", 1.0),)
    assert blend.language == "en-gb"


def test_blend_weights_are_normalised() -> None:
    blend = parse_voice_spec("af_heart:0.7, am_michael:0.3", OFFICIAL_VOICES)
    assert [name for name, _ in blend.parts] == ["af_heart", "am_michael"]
    assert [round(weight, 6) for _, weight in blend.parts] == [0.7, 0.3]


def test_blend_without_weights_shares_equally() -> None:
    blend = parse_voice_spec("af_heart,af_bella", OFFICIAL_VOICES)
    assert [weight for _, weight in blend.parts] == [0.5, 0.5]


def test_unknown_voice_lists_the_valid_ids() -> None:
    with pytest.raises(UnknownVoice) as caught:
        parse_voice_spec("af_nobody", OFFICIAL_VOICES)
    assert caught.value.code == "unknown_voice" and caught.value.voice == "af_nobody"
    assert "af_nobody" in str(caught.value)
    assert "af_heart" in str(caught.value) and "zm_yunyang" in str(caught.value)


@pytest.mark.parametrize("spec", ["af_heart:abc", "af_heart:-1", "af_heart:0", "af_heart:nan"])
def test_bad_weights_are_clear_errors(spec: str) -> None:
    with pytest.raises(ProtocolError, match="weight") as caught:
        parse_voice_spec(spec, OFFICIAL_VOICES)
    assert caught.value.code == "invalid_request"


def test_blend_across_languages_is_refused() -> None:
    with pytest.raises(ProtocolError, match="one language") as caught:
        parse_voice_spec("af_heart:0.5,ff_siwis:0.5", OFFICIAL_VOICES)
    assert caught.value.code == "invalid_request"


@pytest.mark.parametrize("spec", ["", "  ", "af_heart:0.5,"])
def test_empty_specs_are_unknown_voices(spec: str) -> None:
    with pytest.raises(UnknownVoice):
        parse_voice_spec(spec, OFFICIAL_VOICES)


def test_all_54_official_voices_are_known() -> None:
    assert len(OFFICIAL_VOICES) == len(set(OFFICIAL_VOICES)) == 54
