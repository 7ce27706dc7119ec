"""Listener: the audio a listener who plays every chunk as it comes has yet to hear, whether the
server left it waiting, and how every engine hands it each chunk once."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.support.clocks import ManualClock
from tests.support.fakes import ToneEngine
from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.streaming.listener import GAP_S, Listener
from voicestream.engine.text.options import TextOptions
from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.voices import OFFICIAL_VOICES


def test_audio_produced_faster_than_it_plays_is_ahead_until_it_has_played() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    assert listener.ahead_s() == 0.0
    listener.produced(0.3)
    now.now += 0.1
    listener.produced(0.5)  # queued behind the first: plays from 50.3 to 50.8
    assert listener.ahead_s() == pytest.approx(0.7)
    assert listener.pushed_s == pytest.approx(0.8)
    now.now += 0.7
    assert listener.ahead_s() == 0.0


def test_a_chunk_after_a_gap_plays_from_when_it_comes() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    listener.produced(0.2)
    now.now += 1.0  # the listener heard 0.8 s of silence
    listener.produced(0.4)
    assert listener.ahead_s() == pytest.approx(0.4)


def test_audio_still_playing_when_the_listener_is_made_counts_as_ahead() -> None:
    now = ManualClock(50.0)
    listener = Listener(ahead_s=1.0, now=now)
    now.now += 0.25
    assert listener.ahead_s() == pytest.approx(0.75)
    listener.produced(0.5)  # after what was playing
    assert listener.ahead_s() == pytest.approx(1.25)


@pytest.mark.parametrize("ahead_s", [-0.5, float("inf"), float("nan")])
def test_audio_ahead_that_is_not_a_finite_positive_time_is_refused(ahead_s: float) -> None:
    with pytest.raises(ValueError, match="ahead_s must be a finite number of seconds >= 0"):
        Listener(ahead_s=ahead_s)


def test_a_listener_runs_dry_on_the_server_only_when_the_text_was_there_before_the_audio_ran_out() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    received = now.now
    assert not listener.ran_dry_since(received)  # nothing produced yet: waiting for first audio
    listener.produced(0.5)  # plays until 50.5
    now.now += 0.3
    assert not listener.ran_dry_since(received)  # still hearing it
    now.now += 0.4
    assert listener.ran_dry_since(received)  # the text was here at 50.0; the audio ran out at 50.5
    assert not listener.ran_dry_since(now.now - 0.1)  # a text that came after the audio ran out
    listener.produced(0.5)  # the gap (50.5 to 50.7) is filled, and remembered
    assert listener.ran_dry_since(received) and listener.ran_dry_since(50.4)
    assert not listener.ran_dry_since(50.6)  # a sentence that started after the gap began


def test_a_silence_shorter_than_a_frame_is_not_running_dry() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    listener.produced(0.3)
    now.now += 0.3 + GAP_S / 2  # late by half a frame: the clock's rounding, not a gap
    assert not listener.ran_dry_since(0.0)
    listener.produced(0.3)
    assert not listener.ran_dry_since(0.0)
    now.now += 0.3 + 2 * GAP_S
    assert listener.ran_dry_since(0.0)


def test_behind_and_the_deadline_follow_the_text_waiting() -> None:
    """`waiting_since` is the server's word for when the next text came: the listener is behind
    once it ran dry after that, and its next step is due when it runs dry (or the text came)."""
    now = ManualClock(50.0)
    listener = Listener(now=now)
    assert not listener.behind() and listener.runs_dry_at() == 50.0  # a first sentence: due at once
    listener.produced(0.5)
    assert listener.runs_dry_at() == pytest.approx(50.5)
    now.now += 1.0  # ran dry at 50.5, the text there since 50.0
    assert listener.behind()
    listener.waiting_since(50.7)  # a text that came after the audio ran out
    assert not listener.behind() and listener.runs_dry_at() == pytest.approx(50.7)


def test_a_stopped_listener_has_nothing_ahead() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    listener.produced(3.0)
    listener.stop()
    assert listener.ahead_s() == 0.0
    now.now += 5.0
    assert not listener.ran_dry_since(0.0)  # a barge-in's silence is the caller's doing


def chunk(seconds: float) -> AudioChunk:
    return AudioChunk(samples=np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32))


def test_a_chunk_passed_on_by_an_engine_wrapping_another_is_heard_once() -> None:
    now = ManualClock(50.0)
    listener = Listener(now=now)
    audio = chunk(0.2)
    for _ in range(2):
        listener.push(audio)
    assert listener.pushed_s == pytest.approx(0.2)
    listener.push(chunk(0.2))  # another chunk of the same length
    assert listener.pushed_s == pytest.approx(0.4)


def test_audio_a_synthesis_yields_after_a_stop_is_not_heard() -> None:
    """A barge-in stops the listener while a worker finishes its step: that step's chunk never
    plays, so it must not count as audio ahead of the next request."""
    now = ManualClock(50.0)
    listener = Listener(now=now)
    chunks = listener.hearing(iter([chunk(0.2), chunk(0.2)]))
    next(chunks)
    assert listener.pushed_s == pytest.approx(0.2)
    listener.stop()
    assert list(chunks) == [] and listener.ahead_s() == 0.0 and listener.pushed_s == pytest.approx(0.2)


class Relay(SpeechEngine):
    """An engine that speaks through another, passing its listener on (as benchmarks' TimedEngine)."""

    name = "relay"

    def __init__(self, inner: SpeechEngine) -> None:
        super().__init__()
        self.inner = inner

    def _load(self) -> None:
        self.inner.load()

    def voices(self) -> tuple[str, ...]:
        return OFFICIAL_VOICES

    def _synthesize(
        self, text: str, voice: str, speed: float, listener: Listener, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        return self.inner.synthesize(text, voice, speed, listener=listener, text_options=text_options)


def test_every_engine_hands_each_chunk_to_the_listener_as_it_yields_it() -> None:
    now = ManualClock(50.0)
    tone = ToneEngine(ms_per_char=10, chunk_ms=100)
    engine = Relay(tone)
    engine.load()
    listener = Listener(now=now)
    chunks = engine.synthesize("Hello there.", listener=listener)  # 12 characters: 120 ms
    assert listener.pushed_s == 0.0  # nothing before the consumer asks
    first = next(chunks)
    assert listener.pushed_s == pytest.approx(first.duration_s) == pytest.approx(0.1)
    rest = list(chunks)
    assert listener.pushed_s == pytest.approx(0.12) == pytest.approx(sum(c.duration_s for c in [first, *rest]))
    assert tone.aheads == [0.0]  # the engine read the same listener
