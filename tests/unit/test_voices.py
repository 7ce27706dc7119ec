import numpy as np
import pytest

from voicestream.engine.base import InvalidRequestError, UnknownVoiceError, check_voice
from voicestream.engine.text.voices import VoiceTables, blend_key
from voicestream.wire.voices import OFFICIAL_VOICES, parse_voice_spec


def test_the_engine_raises_its_own_errors_for_a_bad_voice() -> None:
    with pytest.raises(UnknownVoiceError) as caught:
        check_voice("af_nobody", OFFICIAL_VOICES)
    assert (caught.value.code, caught.value.voice, caught.value.valid) == (
        "unknown_voice",
        "af_nobody",
        OFFICIAL_VOICES,
    )
    with pytest.raises(InvalidRequestError, match="weight") as invalid:
        check_voice("af_heart:-1", OFFICIAL_VOICES)
    assert invalid.value.code == "invalid_request" and invalid.value.status == 400
    assert check_voice("af_heart,am_adam", OFFICIAL_VOICES).parts == (("af_heart", 0.5), ("am_adam", 0.5))


# --- blends: canonical keys and the bounded table cache -------------------------------------

VOICE_SHAPE = (510, 256)


class VoiceFiles:
    """Stands in for the engine's voice files: a distinct constant table per voice, counted."""

    def __init__(self) -> None:
        self.loads: list[str] = []

    def __call__(self, name: str) -> np.ndarray:
        self.loads.append(name)
        return np.full(VOICE_SHAPE, OFFICIAL_VOICES.index(name) + 1, dtype=np.float32)


@pytest.mark.parametrize(
    "same",
    [
        "af_heart:0.5,am_adam:0.5",
        "am_adam,af_heart",
        "af_heart:2,am_adam:2",
        " am_adam:1 , af_heart:1 ",
        "af_heart:0.25,am_adam:0.5,af_heart:0.25",
        "af_heart:0.5,am_adam:0.50001",
    ],
)
def test_equivalent_blends_share_one_key(same: str) -> None:
    assert blend_key(parse_voice_spec(same, OFFICIAL_VOICES)) == (("af_heart", 0.5), ("am_adam", 0.5))


def test_parts_that_round_to_nothing_are_dropped() -> None:
    assert blend_key(parse_voice_spec("af_heart:1,am_adam:0.0001", OFFICIAL_VOICES)) == (("af_heart", 1.0),)


def test_a_blend_table_is_the_weighted_sum() -> None:
    tables = VoiceTables(VoiceFiles(), OFFICIAL_VOICES)
    heart, adam = OFFICIAL_VOICES.index("af_heart") + 1, OFFICIAL_VOICES.index("am_adam") + 1
    table = tables.get("af_heart:3,am_adam:1")
    assert table.shape == VOICE_SHAPE and table.dtype == np.float32
    assert np.allclose(table, 0.75 * heart + 0.25 * adam)


def test_equivalent_specs_are_computed_once() -> None:
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES)
    first = tables.get("af_heart:0.7,am_michael:0.3")
    assert tables.get("am_michael:3,af_heart:7") is first
    assert files.loads == ["af_heart", "am_michael"] and len(tables) == 3  # the blend and its two voices


def test_blend_churn_over_the_same_voices_reads_each_file_once() -> None:
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES, max_tables=8)
    for step in range(1, 101):
        tables.get(f"af_heart:{step},am_adam:{101 - step}")
    assert files.loads == ["af_heart", "am_adam"]  # the voices stay cached: each blend uses them


def test_distinct_blends_never_hold_more_than_the_cap() -> None:
    """The issue: 500 distinct blend strings kept 500 tables (+247 MB). Now at most `max_tables`."""
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES, max_tables=8)
    for step in range(1, 501):
        tables.get(f"af_heart:{step},am_adam:{501 - step}")
        assert len(tables) <= 8
    assert len(tables) == 8


def test_the_least_recently_used_blend_goes_first() -> None:
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES, max_tables=2)
    tables.get("af_heart")
    tables.get("am_adam")
    tables.get("af_heart")  # used again: am_adam is now the oldest
    tables.get("bf_emma")
    files.loads.clear()
    tables.get("af_heart")
    assert files.loads == []  # still cached
    tables.get("am_adam")
    assert files.loads == ["am_adam"]  # was dropped


def test_bad_specs_are_refused_before_any_file_is_read() -> None:
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES)
    with pytest.raises(UnknownVoiceError):
        tables.get("af_nobody:1,af_heart:1")
    assert files.loads == []
