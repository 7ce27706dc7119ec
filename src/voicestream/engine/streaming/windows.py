"""Which frames each decoder run computes, and how their audio is stitched back together.

A sentence of N frames is decoded in windows: a small first one (its audio is the first audio
a listener hears) and larger later ones (fewer runs, less context recomputed). Each window's
*core* frames are the audio it contributes. The decoder runs in two stages (onnx/graphs.py),
each with its own reach: the generator computes `context` extra frames on each side of the
core (its *span*), and the frontend, which feeds it, `frontend_context` more on each side of
that span (its *frontend span*), all clipped at the sentence's ends. The context's audio is
dropped, except the first `crossfade` frames after a core: the next window's first samples fade
in over them, so a seam never steps (adjacent windows normalise their activations over
different spans, so their samples differ slightly; a fade hides it).

Pure arithmetic and numpy: no model here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from voicestream.engine.base import FloatAudio

# Kokoro's frame: the unit of its durations and of every window, 25 ms at 24 kHz.
SAMPLES_PER_FRAME = 600


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """Window sizes in frames (25 ms each at Kokoro's 600 samples per frame)."""

    first: int = 12  # frames of the first window's core: sets the first audio's latency
    # Each later core is `growth` times the one before, up to `largest` frames. Fewer windows pay
    # the context below fewer times, but windows much longer than their neighbours failed the seam
    # gate (tests/integration/test_engine_lookahead.py): 144 passes, 192 did not (docs/engine.md,
    # "Why these sizes"; the numbers: docs/engine-evidence.md).
    growth: float = 2.0
    largest: int = 144
    # Generator frames computed on each side of a core. Its receptive field is 6 frames, but
    # its instance norms normalise over the span: with 6, short sentences lost words to the
    # ASR ("meet at noon" heard as "meet in Newnd"); 12 (and 8 below) heard every test sentence
    # as the whole-sentence decode does (docs/engine.md, "Quality gate").
    context: int = 12
    # Generator frames on each side of every core after the first, for a decoder that carries its
    # norms' statistics from window to window (the ONNX engine: onnx/graphs.py): those windows
    # normalise nearly as the whole sentence does, and need less context than a window
    # normalising on its own. 8 on the ONNX engine: 6 (the receptive field) let a short
    # sentence's second window drift ("We will meet at noon." heard as "We will meet it now");
    # 8 is heard as well as 12 (docs/engine.md, "Carried statistics"). None: `context`, for a
    # decoder whose windows normalise on their own (the torch engine).
    carried_context: int | None = None
    # Generator frames after the first core (None: `context`). The first window normalises on its
    # own over its span, and what its norms need is the span's length (the leading silence and 24
    # frames of speech on the ONNX engine), not 12 frames beyond the core: the core may run on to
    # the reach plus the crossfade (8) before the span's end. The ONNX engine's first window thereby
    # emits 16 frames for the compute of 12 (docs/engine.md, "The first window's span").
    first_right_context: int | None = None
    frontend_context: int = 8  # frontend frames on each side of the generator's span (its field: 10)
    crossfade: int = 2  # frames over which a core fades in over the previous window's right context

    def __post_init__(self) -> None:
        if self.first < 1 or self.largest < self.first:
            raise ValueError(f"window sizes need 1 <= first <= largest, got first={self.first} largest={self.largest}")
        if self.growth < 1.0:
            raise ValueError(f"window growth must be >= 1, got {self.growth}")
        if (
            self.context < 0
            or self.frontend_context < 0
            or not 0 <= self.crossfade <= min(self.later_context, self.first_window_right_context)
        ):
            raise ValueError(
                f"need 0 <= crossfade <= context (and carried_context, first_right_context) and frontend_context >= 0,"
                f" got crossfade={self.crossfade} context={self.context} carried_context={self.carried_context} "
                f"first_right_context={self.first_right_context} frontend_context={self.frontend_context}"
            )

    @property
    def later_context(self) -> int:
        """Generator context of every window after the first (at most `context`)."""
        return self.context if self.carried_context is None else min(self.context, self.carried_context)

    @property
    def first_window_right_context(self) -> int:
        """Generator frames after the first core (at most `context`)."""
        return self.context if self.first_right_context is None else min(self.context, self.first_right_context)


@dataclass(frozen=True, slots=True)
class Window:
    """Frames [start, end) are this window's core; the generator computes [span_start, span_end),
    the frontend [frontend_start, frontend_end) (by default the generator's span)."""

    start: int
    end: int
    span_start: int
    span_end: int
    frontend_start: int = -1
    frontend_end: int = -1

    def __post_init__(self) -> None:
        if self.frontend_start < 0:
            object.__setattr__(self, "frontend_start", self.span_start)
        if self.frontend_end < 0:
            object.__setattr__(self, "frontend_end", self.span_end)
        if not self.frontend_start <= self.span_start <= self.start < self.end <= self.span_end <= self.frontend_end:
            raise ValueError(f"inconsistent window {self}")

    @property
    def frames(self) -> int:
        return self.span_end - self.span_start

    def core_offset(self) -> int:
        """Index of the core's first frame within the computed span."""
        return self.start - self.span_start


def ahead_frames(ahead_s: float, frame_s: float) -> int:
    """Whole frames of `ahead_s` seconds of audio (rounded down): what a piece's first window may add."""
    return int(ahead_s / frame_s)


def core_sizes(plan: WindowPlan, *, ahead: int = 0, behind: bool = False) -> Iterator[int]:
    """The cores' sizes in order: `first` plus `ahead`, then `growth` times the one before, up to
    `largest`; the first at least half of `largest` when the server is `behind`.

    `ahead`: frames of earlier audio the listener has yet to hear when the piece starts (the
    sentences before it, still playing: listener.py). They count as audio before the first window,
    which grows by as much (up to `largest`, or the whole piece when that fits): the window then
    has that much more time to compute, and the piece needs fewer windows. The doubling after it
    keeps every later window's margin. `behind`: the listener ran out of audio though this text
    was already waiting: the server has more work than workers, and each window waits for a
    worker whatever its size, so a small first one buys little and recomputes its context for
    every listener in the queue. Not 12 then 144 at once: a window 12 times its neighbour's size
    failed the seam gate (docs/engine.md, "A server behind its listeners")."""
    if ahead < 0:
        raise ValueError(f"frames ahead must be >= 0, got {ahead}")
    first = plan.first + ahead
    size = float(min(plan.largest, max(first, plan.largest // 2) if behind else first))
    while True:
        yield round(size)
        size = min(float(plan.largest), size * plan.growth)


def cores(
    total_frames: int,
    plan: WindowPlan,
    *,
    start: int = 0,
    sizes: Iterator[int] | None = None,
    limit: Callable[[int], int] | None = None,
    open_end: bool = False,
    ahead: int = 0,
    behind: bool = False,
) -> Iterator[tuple[int, int]]:
    """Cores that tile [start, total_frames) exactly once, in order, each decided only when it is
    asked for: `limit` (pacing.py) may then cut the schedule's next size (not below `first`) to
    what the listener's audio leaves time for. `sizes` lets a later call continue the same
    schedule (a sentence decoded in two parts: lookahead.py). `open_end`: the sentence goes on
    past `total_frames` (a lookahead's head), so the cores stop before a rest smaller than the
    first window instead of merging it: the next call's first core begins with it. `ahead`,
    `behind`: the listener as the piece starts (`core_sizes`)."""
    if plan.first + ahead >= total_frames - start and (
        limit is None or limit(total_frames - start) >= total_frames - start
    ):
        # The audio ahead covers the first window and all the rest (and the pace decodes it in
        # time): one run, no seams.
        if start < total_frames:
            yield (start, total_frames)
        return
    sizes = sizes if sizes is not None else core_sizes(plan, ahead=ahead, behind=behind)
    while start < total_frames:
        if open_end and total_frames - start < plan.first:
            return
        size = next(sizes)
        # A last sliver smaller than the first window is cheaper merged into this one.
        if not open_end and total_frames - (start + size) < plan.first:
            size = total_frames - start
        if limit is not None:  # a cut, never a growth, nor below the first window's size
            size = max(plan.first, min(size, limit(size)))
        end = min(total_frames, start + size)
        if 0 < total_frames - end < plan.first and not open_end:
            # Cut short of the end with a sliver left: a first window's worth is left instead (the
            # merged window would outlast the listener's audio: a stall).
            end = max(start + plan.first, total_frames - plan.first)
        yield (start, end)
        start = end


def plan_cores(
    total_frames: int,
    plan: WindowPlan,
    *,
    start: int = 0,
    sizes: Iterator[int] | None = None,
    ahead: int = 0,
    behind: bool = False,
) -> list[tuple[int, int]]:
    """All of `cores` at once, on the plan's schedule alone."""
    return list(cores(total_frames, plan, start=start, sizes=sizes, ahead=ahead, behind=behind))


def window_around(core: tuple[int, int], total_frames: int, plan: WindowPlan, *, first: bool) -> Window:
    """The core with the plan's context on both sides, clipped to [0, total_frames): for the
    sentence's first window `context` before and `first_window_right_context` after, for the others
    `later_context` on both sides."""
    start, end = core
    before, after = (plan.context, plan.first_window_right_context) if first else (plan.later_context,) * 2
    span_start, span_end = max(0, start - before), min(total_frames, end + after)
    return Window(
        start,
        end,
        span_start,
        span_end,
        max(0, span_start - plan.frontend_context),
        min(total_frames, span_end + plan.frontend_context),
    )


def with_context(
    cores: list[tuple[int, int]], total_frames: int, plan: WindowPlan, *, first: bool = True
) -> list[Window]:
    """Each core with the plan's context on both sides, clipped to [0, total_frames): the frames
    the features hold (which may go on past the last core: lookahead.py's head). `first`: the
    first core is the sentence's first window (`context`; the others get `later_context`)."""
    return [window_around(core, total_frames, plan, first=first and index == 0) for index, core in enumerate(cores)]


def plan_windows(
    total_frames: int, plan: WindowPlan | None, start: int = 0, *, ahead: int = 0, behind: bool = False
) -> list[Window]:
    """Windows whose cores tile [start, total_frames) exactly once, in order; one window when
    plan is None (computing every frame, so its samples are the whole sentence's)."""
    if total_frames <= start:
        return []
    if plan is None:
        return [Window(start, total_frames, 0, total_frames)]
    cores = plan_cores(total_frames, plan, start=start, ahead=ahead, behind=behind)
    return with_context(cores, total_frames, plan)


def fade_in(length: int) -> FloatAudio:
    """Raised-cosine weights rising from ~0 to ~1 over `length` samples (a fade-out is 1 - this)."""
    return (0.5 - 0.5 * np.cos(np.pi * (np.arange(length) + 0.5) / length)).astype(np.float32)


class Stitcher:
    """Turns each window's computed audio into the samples to emit now, in order.

    `push` returns the window's core (faded in over the previous window's overlap) and keeps
    the start of its right context for the next one; concatenating every `push` gives exactly
    one sample per frame sample of the sentence from `start_frame` on.
    """

    def __init__(self, samples_per_frame: int, crossfade_frames: int, start_frame: int = 0) -> None:
        self.samples_per_frame = samples_per_frame
        self.crossfade_frames = crossfade_frames
        self._tail: FloatAudio | None = None
        self._next_start = start_frame

    def push(self, window: Window, audio: FloatAudio) -> FloatAudio:
        spf = self.samples_per_frame
        if window.start != self._next_start:
            raise ValueError(f"window starts at frame {window.start}, expected {self._next_start}")
        if len(audio) != window.frames * spf:
            expected = window.frames * spf
            raise ValueError(f"window of {window.frames} frames gave {len(audio)} samples, expected {expected}")
        offset = window.core_offset() * spf
        core = audio[offset : offset + (window.end - window.start) * spf].astype(np.float32, copy=True)
        if self._tail is not None:
            overlap = min(len(self._tail), len(core))
            weights = fade_in(overlap)
            core[:overlap] = self._tail[:overlap] * (1.0 - weights) + core[:overlap] * weights
        tail_frames = min(self.crossfade_frames, window.span_end - window.end)
        end = offset + (window.end - window.start) * spf
        self._tail = audio[end : end + tail_frames * spf] if tail_frames > 0 else None
        self._next_start = window.end
        return core


def stitch(windows: list[Window], audios: Iterator[FloatAudio], samples_per_frame: int, crossfade: int) -> FloatAudio:
    """Every window's emitted samples, concatenated (for tests and offline use)."""
    stitcher = Stitcher(samples_per_frame, crossfade)
    parts = [stitcher.push(window, audio) for window, audio in zip(windows, audios, strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
