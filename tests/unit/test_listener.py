"""PlaybackClock: the audio a listener who plays every chunk as it comes has yet to hear; and
what an engine makes of a bad value of it."""

from __future__ import annotations

import pytest

from tests.support.clocks import ManualClock
from tests.support.fakes import ToneEngine
from voicestream.engine.streaming.listener import PlaybackClock


def test_audio_produced_faster_than_it_plays_is_ahead_until_it_has_played() -> None:
    now = ManualClock(50.0)
    clock = PlaybackClock(now)
    assert clock.ahead_s() == 0.0
    clock.produced(0.3)
    now.now += 0.1
    clock.produced(0.5)  # queued behind the first: plays from 50.3 to 50.8
    assert clock.ahead_s() == pytest.approx(0.7)
    now.now += 0.7
    assert clock.ahead_s() == 0.0


def test_a_chunk_after_a_gap_plays_from_when_it_comes() -> None:
    now = ManualClock(50.0)
    clock = PlaybackClock(now)
    clock.produced(0.2)
    now.now += 1.0  # the listener heard 0.8 s of silence
    clock.produced(0.4)
    assert clock.ahead_s() == pytest.approx(0.4)


def test_a_listener_runs_dry_on_the_server_only_when_the_text_was_there_before_the_audio_ran_out() -> None:
    now = ManualClock(50.0)
    clock = PlaybackClock(now)
    received = now.now
    assert not clock.ran_dry_since(received)  # nothing produced yet: waiting for first audio
    clock.produced(0.5)  # plays until 50.5
    now.now += 0.3
    assert not clock.ran_dry_since(received)  # still hearing it
    now.now += 0.4
    assert clock.ran_dry_since(received)  # the text was here at 50.0; the audio ran out at 50.5
    assert not clock.ran_dry_since(now.now - 0.1)  # a text that came after the audio ran out
    clock.produced(0.5)  # the gap (50.5 to 50.7) is filled, and remembered
    assert clock.ran_dry_since(received) and clock.ran_dry_since(50.4)
    assert not clock.ran_dry_since(50.6)  # a sentence that started after the gap began


def test_a_stopped_listener_has_nothing_ahead() -> None:
    now = ManualClock(50.0)
    clock = PlaybackClock(now)
    clock.produced(3.0)
    clock.stop()
    assert clock.ahead_s() == 0.0
    now.now += 5.0
    assert not clock.ran_dry_since(0.0)  # a barge-in's silence is the caller's doing


@pytest.mark.parametrize("ahead_s", [-0.5, float("inf"), float("nan")])
def test_an_engine_refuses_audio_ahead_that_is_not_a_finite_positive_time(ahead_s: float) -> None:
    engine = ToneEngine()
    engine.load()
    with pytest.raises(ValueError, match="ahead_s must be a finite number of seconds >= 0"):
        engine.synthesize("Hello.", ahead_s=ahead_s)
    assert engine.texts == []  # refused before any work
