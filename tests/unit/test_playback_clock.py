"""PlaybackClock: the audio a listener who plays every chunk as it comes has yet to hear; and
what an engine makes of a bad value of it."""

from __future__ import annotations

import pytest

from tests.support.fakes import ToneEngine
from voicestream.kokoro_server.playback import PlaybackClock


class Now:
    def __init__(self) -> None:
        self.value = 50.0

    def __call__(self) -> float:
        return self.value


def test_audio_produced_faster_than_it_plays_is_ahead_until_it_has_played() -> None:
    now = Now()
    clock = PlaybackClock(now)
    assert clock.ahead_s() == 0.0
    clock.produced(0.3)
    now.value += 0.1
    clock.produced(0.5)  # queued behind the first: plays from 50.3 to 50.8
    assert clock.ahead_s() == pytest.approx(0.7)
    now.value += 0.7
    assert clock.ahead_s() == 0.0


def test_a_chunk_after_a_gap_plays_from_when_it_comes() -> None:
    now = Now()
    clock = PlaybackClock(now)
    clock.produced(0.2)
    now.value += 1.0  # the listener heard 0.8 s of silence
    clock.produced(0.4)
    assert clock.ahead_s() == pytest.approx(0.4)


def test_a_stopped_listener_has_nothing_ahead() -> None:
    now = Now()
    clock = PlaybackClock(now)
    clock.produced(3.0)
    clock.stop()
    assert clock.ahead_s() == 0.0


@pytest.mark.parametrize("ahead_s", [-0.5, float("inf"), float("nan")])
def test_an_engine_refuses_audio_ahead_that_is_not_a_finite_positive_time(ahead_s: float) -> None:
    engine = ToneEngine()
    engine.load()
    with pytest.raises(ValueError, match="ahead_s must be a finite number of seconds >= 0"):
        engine.synthesize("Hello.", ahead_s=ahead_s)
    assert engine.texts == []  # refused before any work
