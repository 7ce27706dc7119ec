import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    "spec",
    [
        "af_heart:abc",
        "af_heart:-1",
        "af_heart:0",
        "af_heart:nan",
        "af_heart:inf",
        "af_heart:1e308,af_bella:1e308",  # the sum overflowed: every share 0, an AssertionError (500)
        "af_heart:1001,af_bella:1",
    ],
)
def test_bad_weights_are_clear_errors(spec: str) -> None:
    with pytest.raises(InvalidRequestError, match="weight") as caught:
        VoiceTables(VoiceFiles(), OFFICIAL_VOICES).get(spec)
    assert caught.value.code == "invalid_request" and caught.value.status == 400


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.sampled_from([v for v in OFFICIAL_VOICES if v.startswith("a")]),
            st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.none()),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_any_blend_is_a_table_or_a_coded_400(parts: list[tuple[str, float | str | None]]) -> None:
    spec = ",".join(name if weight is None else f"{name}:{weight}" for name, weight in parts)
    try:
        table = VoiceTables(VoiceFiles(), OFFICIAL_VOICES).get(spec)
    except InvalidRequestError as error:
        assert error.status == 400 and error.code in ("invalid_request", "unknown_voice")
    else:
        assert table.shape == VOICE_SHAPE and np.isfinite(table).all()


def test_blend_across_languages_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="one language"):
        check_voice("af_heart:0.5,ff_siwis:0.5", OFFICIAL_VOICES)


@pytest.mark.parametrize("spec", ["", "  ", "af_heart:0.5,"])
def test_empty_specs_are_unknown_voices(spec: str) -> None:
    with pytest.raises(UnknownVoiceError):
        check_voice(spec, OFFICIAL_VOICES)


def test_all_54_official_voices_are_known() -> None:
    assert len(OFFICIAL_VOICES) == len(set(OFFICIAL_VOICES)) == 54


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
    assert files.loads == ["af_heart", "am_michael"] and len(tables) == 1 and tables.voices_held == 2


@pytest.mark.parametrize("max_tables", [1, 8])
def test_blend_churn_over_the_same_voices_reads_each_file_once(max_tables: int) -> None:
    """Voices are kept apart from blends: rotating blends never evicts (and re-reads, which
    verified the whole model again: ~2 s of a worker) the voices they are made of."""
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES, max_tables=max_tables)
    for step in range(1, 101):
        tables.get(f"af_heart:{step},am_adam:{101 - step}")
        tables.get("bf_emma" if step % 2 else "am_adam")
    assert files.loads == ["af_heart", "am_adam", "bf_emma"]


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
    first, second, third = "af_heart:1,am_adam:1", "af_heart:1,am_adam:2", "af_heart:1,am_adam:3"
    kept = tables.get(first)
    dropped = tables.get(second)
    assert tables.get(first) is kept  # used again: the second is now the oldest
    tables.get(third)
    assert tables.get(first) is kept  # still cached
    assert tables.get(second) is not dropped  # was dropped, blended anew
    assert files.loads == ["af_heart", "am_adam"]  # from the voices, never re-read


def test_bad_specs_are_refused_before_any_file_is_read() -> None:
    files = VoiceFiles()
    tables = VoiceTables(files, OFFICIAL_VOICES)
    with pytest.raises(UnknownVoiceError):
        tables.get("af_nobody:1,af_heart:1")
    assert files.loads == []
