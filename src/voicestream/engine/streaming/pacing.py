"""Decoder windows paced by the engine's speed: no later window outlasts the listener's audio.

The window schedule (windows.py) doubles each core, which keeps a listener in audio only while
the generator decodes a frame well under the frame's duration. Not every host of the same size is
that fast (docs/engine.md, "Machine classes"): on a slower one the second window outlasts the
first window's audio, and the window after a long sentence's lookahead join (lookahead.py)
outlasts what the head had buffered: the listener hears the stream stop (timelines and numbers:
docs/engine-evidence.md, "Pacing").

So every window is planned against the listener's clock with the speeds measured on this host
(`DecodeSpeed`: seconds per generator frame; `EncodeSpeed`: seconds per encoder token), which
makes a stream gapless by construction on any host that decodes faster than real time:

- Each window after the first: the schedule's size, cut to what the engine decodes within
  `MARGIN` of the audio the listener has yet to hear (`paced_core`). Never below the first
  window's size; not at all on a host slower than real time (no size keeps up), nor when the
  server is behind (`Listener.behind`: the listener ran dry while the text waited, before the
  call or during it): then windows wait for workers busy with other sessions, and larger windows,
  which cost less, are the remedy (without this rule, a loaded server's listeners heard longer
  silences paced than on the schedule alone: docs/engine-evidence.md, "Pacing").
- A piece's first window, when nothing plays yet: the smallest core after which those paced
  windows keep the listener in audio to the piece's end and leave it audio that no longer shrinks
  (`planned_first`, which runs the pacer's own rule ahead of time on the measured speeds, taken
  `RUN_VARIATION` slower: runs vary). On a fast host that is the plan's `first`; on a slow one
  (RTF ~0.6) a 16-frame window's audio is shorter than any next window takes, and the first
  audio waits a little longer instead.
- A lookahead's whole-piece encoding (lookahead.py) runs as soon as the audio ahead covers it and
  a first-size window after it, and the head's first window is planned so that it does before
  the head runs out (else the piece is encoded whole before its first window).
- A piece is decoded in one run when that delays no audio: it is no longer than its first window
  would compute, or the audio ahead covers decoding all of it twice over (`WindowPacer.decodes_whole`,
  `WHOLE_RUN_SHARE`: one run is one bet on the speed, with no window after which to correct it).

On a machine fast enough for the schedule nothing changes. docs/engine.md, "Gapless by
construction", has the reasoning; tests/unit/test_gapless_hosts.py simulates hosts from RTF 0.2
to 0.8.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.windows import WindowPlan

# Share of the audio ahead a window may take to decode: runs vary from one to the next, and the
# window's audio must also reach the listener. A smaller margin cuts windows smaller than needed,
# and every cut adds a seam's context. 0.9 never left a listener waiting on the hosts it was swept
# on; a real 2-core AVX2-only host's runs came in up to a third slower than their median, in
# streaks (benchmarks/run_variation.py), which 0.9 did not cover and 0.75 does
# (docs/engine-evidence.md, "A real AVX2-only host").
MARGIN: Final = 0.75

# How much slower than the measured speed the first window's plan takes every run to be. The plan
# is exact at the measured speed, and on a slow host its windows run near the break-even, where
# runs that vary (they do, quiet or not) empty the listener's lead: the emulated slow host's
# paragraph ran on windows that each added ~5 ms, then stalled 0.7 s at the next sentence.
# Planned slow, the first window buys a lead that grows: no gap, larger later windows (less context
# recomputed), and some more first audio there; the fast class's first window is the plan's either
# way (docs/engine-evidence.md, "Gapless on a slow host" and "A real AVX2-only host").
RUN_VARIATION: Final = 1.2

# Share of the audio ahead that a piece decoded in one run may take to decode (at the measured
# speed). Windows re-measure the speed after each run, so a load that starts mid-piece costs at
# most one window's excess; a whole piece is one run of seconds with nothing to correct until it
# ends. Half: the run may take twice its measured time (another process taking one of two cores)
# and the listener still hears no gap. With the margin instead, the emulated slow host stalled
# 0.9-1.4 s when a load began during such a run (docs/engine-evidence.md, "Gapless on a slow host").
WHOLE_RUN_SHARE: Final = 0.5


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


@dataclass(slots=True)
class EncodeSpeed:
    """Seconds an encoder run takes per token (its fixed cost included, so a short run's rate
    overestimates a long one's: the safe side), over an engine's recent runs."""

    seconds_per_token: float | None = None

    def record(self, tokens: int, seconds: float) -> None:
        sample = seconds / max(1, tokens)
        previous = self.seconds_per_token
        self.seconds_per_token = sample if previous is None else (previous + sample) / 2

    def estimate(self, tokens: int) -> float:
        """Seconds an encoder run over `tokens` takes (0 while unmeasured)."""
        return 0.0 if self.seconds_per_token is None else self.seconds_per_token * tokens


def headroom(seconds_per_frame: float, plan: WindowPlan, frame_s: float) -> float:
    """How many times faster than it plays the largest later window decodes (with its context):
    over 1 on a host faster than real time (infinite when decoding takes no time)."""
    decode_s = seconds_per_frame * (plan.largest + 2 * plan.later_context)
    return plan.largest * frame_s / decode_s if decode_s > 0.0 else math.inf


def real_time(seconds_per_frame: float, plan: WindowPlan, frame_s: float) -> bool:
    """Whether the engine keeps up with a listener at all: its largest later window decodes (with
    its context) in less time than it plays."""
    return seconds_per_frame > 0.0 and headroom(seconds_per_frame, plan, frame_s) > 1.0


def room_for_variation(seconds_per_frame: float, plan: WindowPlan, frame_s: float) -> float:
    """How much slower than `seconds_per_frame` a first window's plan takes runs to be:
    `RUN_VARIATION`, or half the host's headroom over real time where that is less (near real
    time, RTF ~0.8, a plan for runs a fifth slower is a plan for a host slower than real time,
    which keeps nobody in audio)."""
    return max(1.0, min(RUN_VARIATION, (1.0 + headroom(seconds_per_frame, plan, frame_s)) / 2))


def gaining_core(seconds_per_frame: float, plan: WindowPlan, frame_s: float) -> int:
    """The smallest core worth cutting a window to: one whose audio outlasts its decoding (with its
    context), s (c + k) < c f. A smaller window takes more time than it adds audio, so cutting to
    it after a load spike would leave the listener ever shorter of audio (a stream of 16-frame
    windows each a little late). The plan's `first` on a host fast enough."""
    # No margin: the break-even itself (a window that gains any audio regains the listener's lead).
    s, f, k = seconds_per_frame, frame_s, 2 * plan.later_context
    if s <= 0.0 or s >= f:
        return plan.largest if s > 0.0 else plan.first
    return min(plan.largest, max(plan.first, math.floor(k * s / (f - s) + 1e-9) + 1))  # float rounding


def keeps_playing(
    first: int,
    frames: int,
    seconds_per_frame: float,
    plan: WindowPlan,
    frame_s: float,
    margin: float = MARGIN,
    *,
    encode_s: float = 0.0,
    encode_by: int | None = None,
    reserve_s: float = 0.0,
) -> bool:
    """Whether a piece of `frames` core frames, whose first window has `first`, plays without a
    gap when each later window is paced as `WindowPacer` paces it (the largest core that decodes
    within `margin` of the audio ahead, at most `growth` times the one before and `largest`).
    `encode_s`: an encoder run still to come (a lookahead's whole piece), taken as soon as the
    audio ahead covers it and a first-size window after it, and needed before frame `encode_by`
    (the head's last decodable frame). The plan's own rule run ahead of time, on the speeds; the
    piece must also leave the listener audio ahead that never shrinks (`steady`), and `reserve_s`
    more (the next piece's encoding), so that the next piece or sentence starts in time too."""
    s, f, k = seconds_per_frame, frame_s, 2 * plan.later_context
    ahead, done, size = first * f, first, first
    pending = encode_s > 0.0 and encode_by is not None
    steady = k * f * s / (margin * (f - s)) if s < f else math.inf  # audio ahead that never shrinks
    floor = gaining_core(s, plan, f)
    while done < frames:
        if pending and margin * ahead >= encode_s + s * (plan.first + k):
            ahead, pending = ahead - encode_s, False
            continue
        if not pending and ahead >= steady + reserve_s and size >= k * s / (f - s):
            return True  # every window from here adds more audio than it takes to decode
        affordable = int(margin * ahead / s + 1e-6) - k
        core = min(plan.largest, round(size * plan.growth), affordable, frames - done)
        if pending and encode_by is not None:
            core = min(core, encode_by - done)
        if core < min(floor, frames - done):
            return False  # the next window (or the encoding) outlasts the audio ahead
        ahead += core * f - s * (core + k)
        done, size = done + core, max(core, plan.first)
    # The piece ends: what follows (the next piece's encoding and windows, another sentence) needs
    # audio ahead that the paced windows do not shrink.
    return not pending and ahead >= steady + reserve_s


def planned_first(
    frames: int,
    seconds_per_frame: float,
    plan: WindowPlan,
    frame_s: float,
    margin: float = MARGIN,
    *,
    encode_s: float = 0.0,
    encode_by: int | None = None,
    reserve_s: float = 0.0,
) -> int | None:
    """The smallest first core (from the plan's `first`, at most `encode_by`) after which the piece
    keeps playing (`keeps_playing`): the first audio waits for what the host's speed needs, and no
    more. The plan's `first` on a host too slow for real time (nothing helps); None when no size
    does."""
    if not real_time(seconds_per_frame, plan, frame_s):
        return plan.first
    largest = min(frames, plan.largest, encode_by if encode_by is not None else plan.largest)
    for first in range(plan.first, max(plan.first, largest) + 1):
        if keeps_playing(
            first,
            frames,
            seconds_per_frame,
            plan,
            frame_s,
            margin,
            encode_s=encode_s,
            encode_by=encode_by,
            reserve_s=reserve_s,
        ):
            return first
    return None


def paced_core(
    scheduled: int, ahead_s: float, seconds_per_frame: float, plan: WindowPlan, frame_s: float, margin: float = MARGIN
) -> int:
    """The next core's frames: the schedule's, or fewer when decoding that many (and the window's
    context) would take longer than `margin` of the `ahead_s` seconds the listener has left."""
    context = 2 * plan.later_context
    if not real_time(seconds_per_frame, plan, frame_s):
        return scheduled  # slower than real time whatever the size (or a clock stood still)
    # Whole frames, with a tolerance for float rounding (0.9 * 0.3 s / 9 ms is 29.99999999999997).
    affordable = int(margin * ahead_s / seconds_per_frame + 1e-6) - context
    floor = min(scheduled, gaining_core(seconds_per_frame, plan, frame_s))
    return max(plan.first, floor, min(scheduled, affordable))


class WindowPacer:
    """One synthesis call's pacing: the engine's speed, and the listener's clock (listener.py, the
    one the server reads too), which hears each window's audio as the engine yields it."""

    def __init__(
        self,
        speed: DecodeSpeed,
        listener: Listener,
        frame_s: float,
        *,
        margin: float = MARGIN,
        encode_speed: EncodeSpeed | None = None,
    ) -> None:
        self.speed = speed
        self.encode_speed = encode_speed if encode_speed is not None else EncodeSpeed()
        self.listener = listener
        self.frame_s = frame_s
        self.margin = checked_margin(margin)
        # Nothing to pace while the listener hears nothing of this call or before it: the first
        # window, unless earlier audio still plays.
        self._pushed_before = listener.pushed_s
        self._ahead_before = listener.ahead_s() > 0
        self._own_gap_until = -math.inf  # when the last gap this call's own windows caused ended

    def now(self) -> float:
        return self.listener.now()

    def decoded(self, frames: int, seconds: float) -> None:
        """A window of `frames` span frames took `seconds` to decode."""
        self.speed.record(frames, seconds)
        now = self.now()
        if self.listener.ran_dry_since(now - seconds):
            # The listener ran dry while this engine's own window was computing: its speed was
            # misjudged (a load spike), which the pace corrects; not a server behind its listener.
            self._own_gap_until = now

    def behind(self) -> bool:
        """`Listener.behind`, less the gaps this call's own windows caused (`decoded`): the
        listener ran dry while the text waited for the server (a worker, another session)."""
        return self.listener.behind() and self.listener.ran_dry_since(self._own_gap_until)

    def encoded(self, tokens: int, seconds: float) -> None:
        """An encoder run over `tokens` took `seconds`."""
        self.encode_speed.record(tokens, seconds)

    def _playing(self) -> bool:
        return self._ahead_before or self.listener.pushed_s > self._pushed_before

    def _measured(self) -> float | None:
        """The decode speed when windows are to be planned by it: measured, and the server not
        behind its listener (then larger windows are the remedy, whatever the speed)."""
        if self.behind():
            return None
        return self.speed.seconds_per_frame

    def _budget_s(self) -> float:
        """Seconds of work that fit before the listener's audio runs out, with the margin."""
        return self.margin * self.listener.ahead_s() if self._playing() else 0.0

    def first_growth(
        self, plan: WindowPlan, frames: int, tokens: int, *, rest_tokens: int = 0, encode_by: int | None = None
    ) -> int | None:
        """Frames a piece's first window grows by when the listener hears nothing yet: to the
        smallest core after which the paced windows keep the listener in audio (`planned_first`;
        `frames`: the piece's core frames; `rest_tokens`: a lookahead's whole-piece encoding still
        to come, needed before frame `encode_by`; `tokens`: the piece's, whose encoding time is
        kept in reserve for the next piece's). First audio waits for that much more, where the
        alternative is a gap after it. None: no first window keeps the listener in audio."""
        seconds_per_frame = self._measured()
        if seconds_per_frame is None or self._playing():
            return 0
        encode_s = self.encode_speed.estimate(rest_tokens)
        seconds_per_frame *= room_for_variation(seconds_per_frame, plan, self.frame_s)
        first = planned_first(
            frames,
            seconds_per_frame,
            plan,
            self.frame_s,
            self.margin,
            encode_s=encode_s,
            encode_by=encode_by,
            reserve_s=self.encode_speed.estimate(tokens),
        )
        return None if first is None else first - plan.first

    def decodes_whole(self, whole_frames: int, first_frames: int) -> bool:
        """Whether a piece is decoded in one run: when that delays no audio, because its frames
        are no more than the first window's (it costs no more), or because decoding all of them
        takes at most `WHOLE_RUN_SHARE` of the listener's audio ahead (`whole_frames`,
        `first_frames`: generator frames). The first rule only while nothing plays: then the
        first window is first audio, whatever it costs; with audio playing, the pace would cut
        that first window to the audio ahead."""
        seconds_per_frame = self._measured()
        if seconds_per_frame is None:
            return False
        if not self._playing():
            return whole_frames <= first_frames
        return seconds_per_frame * whole_frames <= WHOLE_RUN_SHARE * self.listener.ahead_s()

    def affords_encode(self, tokens: int, plan: WindowPlan) -> bool:
        """Whether an encoder run over `tokens` and then a first-size window both fit in the
        listener's audio ahead (a lookahead's whole-piece encoding: lookahead.py). False while
        either speed is unmeasured."""
        seconds_per_frame = self._measured()
        if seconds_per_frame is None or self.encode_speed.seconds_per_token is None:
            return False
        work = self.encode_speed.estimate(tokens) + seconds_per_frame * (plan.first + 2 * plan.later_context)
        return work <= self._budget_s()

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
            if not (seconds_per_frame is None or not self._playing() or self.behind()):
                size = paced_core(size, self.listener.ahead_s(), seconds_per_frame, plan, self.frame_s, self.margin)
            regrowing_from = size if size < scheduled else None
            return size

        return paced
