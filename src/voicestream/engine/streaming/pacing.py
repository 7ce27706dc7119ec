"""Decoder windows paced by the engine's speed: no later window outlasts the listener's audio.

The window schedule (windows.py) doubles each core, which keeps a listener in audio only while
the generator decodes a frame well under the frame's duration. Not every host of the same size is
that fast (docs/engine.md, "Machine classes"): on a slower one the second window outlasts the
first window's audio, and the window after a long sentence's lookahead join (lookahead.py)
outlasts what the head had buffered: the listener hears the stream stop (timelines and numbers:
docs/engine-evidence.md, "Pacing").

So before each window after the first, the schedule's size is cut to what the engine, at the
speed it measured on its recent runs, decodes within `MARGIN` of the audio the listener has yet
to hear. Never below the first window's size; not at all when even a first-size window decodes
slower than it plays (smaller windows would only add context, and the listener falls behind
either way), nor when the server is behind (`Listener.behind`: the listener ran dry while the
text waited, before the call or during it): then windows wait for workers busy with other
sessions, and larger windows, which cost less, are the remedy (without this rule, a loaded server's listeners heard
longer silences paced than on the schedule alone: docs/engine-evidence.md, "Pacing"). On a
machine fast enough for the schedule nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.windows import WindowPlan

# Share of the audio ahead a window may take to decode: runs vary from one to the next, and the
# window's audio must also reach the listener. A smaller margin cuts windows smaller than needed,
# and every cut adds a seam's context: the largest margin that never left a listener waiting is
# the cheapest (swept, with its numbers: docs/engine-evidence.md, "Pacing").
MARGIN: Final = 0.9


def checked_margin(margin: float) -> float:
    """`margin` if it is a share of the audio ahead (0 < margin <= 1), else a ValueError."""
    if not 0.0 < margin <= 1.0:
        raise ValueError(f"pacing margin must be in (0, 1], got {margin}")
    return margin


@dataclass(slots=True)
class DecodeSpeed:
    """Seconds a window's decoding takes per frame of its generator span (frontend and each run's
    fixed cost included), over an engine's recent runs; shared by its syntheses."""

    seconds_per_frame: float | None = None

    def record(self, frames: int, seconds: float) -> None:
        sample = seconds / frames
        # Halfway to each new run: the machine's load changes (other sessions, other processes).
        previous = self.seconds_per_frame
        self.seconds_per_frame = sample if previous is None else (previous + sample) / 2


def paced_core(
    scheduled: int, ahead_s: float, seconds_per_frame: float, plan: WindowPlan, frame_s: float, margin: float = MARGIN
) -> int:
    """The next core's frames: the schedule's, or fewer when decoding that many (and the window's
    context) would take longer than `margin` of the `ahead_s` seconds the listener has left."""
    context = 2 * plan.later_context
    if seconds_per_frame * (plan.first + context) >= plan.first * frame_s or seconds_per_frame <= 0.0:
        return scheduled  # even the smallest window plays shorter than it decodes (or a clock stood still)
    # Whole frames, with a tolerance for float rounding (0.9 * 0.3 s / 9 ms is 29.99999999999997).
    affordable = int(margin * ahead_s / seconds_per_frame + 1e-6) - context
    return max(plan.first, min(scheduled, affordable))


class WindowPacer:
    """One synthesis call's pacing: the engine's speed, and the listener's clock (listener.py, the
    one the server reads too), which hears each window's audio as the engine yields it."""

    def __init__(self, speed: DecodeSpeed, listener: Listener, frame_s: float, *, margin: float = MARGIN) -> None:
        self.speed = speed
        self.listener = listener
        self.frame_s = frame_s
        self.margin = checked_margin(margin)
        # Nothing to pace while the listener hears nothing of this call or before it: the first
        # window, unless earlier audio still plays.
        self._pushed_before = listener.pushed_s
        self._ahead_before = listener.ahead_s() > 0

    def now(self) -> float:
        return self.listener.now()

    def decoded(self, frames: int, seconds: float) -> None:
        """A window of `frames` span frames took `seconds` to decode."""
        self.speed.record(frames, seconds)

    def _playing(self) -> bool:
        return self._ahead_before or self.listener.pushed_s > self._pushed_before

    def limit(self, plan: WindowPlan) -> Callable[[int], int]:
        """For windows.cores, over one piece's windows: each scheduled size cut to what the
        listener's audio leaves time for. After a cut the schedule grows again from the cut size,
        each window at most `growth` times the one before: a window 2.6 times its neighbour's
        size failed the seam gate (docs/engine-evidence.md, "Pacing")."""
        regrowing_from: int | None = None  # the last size below the schedule's

        def paced(scheduled: int) -> int:
            nonlocal regrowing_from
            size = scheduled if regrowing_from is None else min(scheduled, round(regrowing_from * plan.growth))
            seconds_per_frame = self.speed.seconds_per_frame
            # behind (the listener ran dry while this text waited, before or during the call):
            # larger windows are the remedy; unmeasured, or nothing played yet: nothing to pace
            if not (seconds_per_frame is None or not self._playing() or self.listener.behind()):
                size = paced_core(size, self.listener.ahead_s(), seconds_per_frame, plan, self.frame_s, self.margin)
            regrowing_from = size if size < scheduled else None
            return size

        return paced
