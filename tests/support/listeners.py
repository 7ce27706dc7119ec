"""Listeners (engine/streaming/listener.py) in a chosen state, on a clock that stands still: an
engine then plans a sentence for exactly that state, however long its work takes."""

from __future__ import annotations

from tests.support.clocks import ManualClock
from voicestream.engine.streaming.listener import Listener


def listener_ahead(seconds: float) -> Listener:
    """A listener with `seconds` of earlier audio still to hear: a sentence that follows others."""
    return Listener(ahead_s=seconds, now=ManualClock())


def listener_behind() -> Listener:
    """A listener that ran out of audio while the text was waiting: a server behind its listeners."""
    clock = ManualClock()
    listener = Listener(now=clock)
    listener.produced(0.1)
    clock.now += 1.0
    return listener
