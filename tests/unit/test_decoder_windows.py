"""Window planning and stitching of the chunked decoder: every sample exactly once, seams faded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicestream.engine.streaming.windows import (
    Stitcher,
    Window,
    WindowPlan,
    ahead_frames,
    core_sizes,
    cores,
    fade_in,
    plan_windows,
    stitch,
)

SPF = 600


def decode_by_position(window: Window) -> np.ndarray:
    """A stand-in decoder whose sample i depends on nothing but i: any stitching error shows."""
    positions = np.arange(window.span_start * SPF, window.span_end * SPF, dtype=np.float64)
    return np.sin(positions * 0.01).astype(np.float32) + (positions / 1e6).astype(np.float32)


def test_first_window_is_small_later_ones_grow_to_the_cap() -> None:
    plan = WindowPlan(first=12, growth=2.0, largest=60, context=14, crossfade=2)
    cores = [(w.start, w.end) for w in plan_windows(400, plan)]
    assert cores[:5] == [(0, 12), (12, 36), (36, 84), (84, 144), (144, 204)]
    assert all(end - start <= 60 for start, end in cores[:-1])
    assert cores[-1][1] == 400


def test_context_is_added_on_both_sides_and_clipped_at_the_sentence_ends() -> None:
    plan = WindowPlan(first=10, growth=2.0, largest=40, context=6, frontend_context=10, crossfade=2)
    windows = plan_windows(100, plan)
    assert windows[0] == Window(0, 10, 0, 16, 0, 26)
    assert windows[1] == Window(10, 30, 4, 36, 0, 46)
    assert windows[2] == Window(30, 70, 24, 76, 14, 86)
    assert windows[-1].span_end == windows[-1].frontend_end == 100


def test_windows_after_the_first_take_the_carried_context_and_the_frontend_follows() -> None:
    plan = WindowPlan(first=10, growth=2.0, largest=40, context=12, carried_context=6, frontend_context=8)
    windows = plan_windows(100, plan)
    assert windows[0] == Window(0, 10, 0, 22, 0, 30)  # no statistics carried yet: the full context
    assert windows[1] == Window(10, 30, 4, 36, 0, 44)
    assert windows[2] == Window(30, 70, 24, 76, 16, 84)
    assert plan.later_context == 6 and WindowPlan(context=12).later_context == 12
    # A carried context above the first window's is no reason to compute more.
    assert WindowPlan(context=8, carried_context=10).later_context == 8


def test_the_first_window_may_end_its_span_nearer_its_core_than_it_starts() -> None:
    # The ONNX engine's first window: 12 frames into the leading silence before, 8 after (reach
    # and crossfade), so a 16-frame core costs the span a 12-frame one had with 12 after.
    plan = WindowPlan(first=16, growth=2.0, largest=64, context=12, carried_context=8, first_right_context=8)
    windows = plan_windows(200, plan, start=10)
    assert windows[0] == Window(10, 26, 0, 34, 0, 42)
    assert windows[0].frames == plan_windows(200, WindowPlan(first=12, carried_context=8), start=10)[0].frames
    assert windows[1] == Window(26, 58, 18, 66, 10, 74)
    assert plan.first_window_right_context == 8 and WindowPlan(context=12).first_window_right_context == 12
    assert WindowPlan(context=8, first_right_context=10).first_window_right_context == 8


def test_a_window_without_frontend_span_computes_its_span_in_both_stages() -> None:
    window = Window(10, 20, 4, 26)
    assert (window.frontend_start, window.frontend_end) == (4, 26)
    with pytest.raises(ValueError, match="inconsistent"):
        Window(10, 20, 4, 26, 6, 26)  # the frontend must cover the generator's span


def test_a_last_sliver_smaller_than_the_first_window_joins_the_window_before() -> None:
    windows = plan_windows(40, WindowPlan(first=12, growth=2.0, largest=240))
    assert [(w.start, w.end) for w in windows] == [(0, 12), (12, 40)]
    assert [(w.start, w.end) for w in plan_windows(15, WindowPlan(first=12))] == [(0, 15)]


def test_a_sliver_is_not_merged_into_a_window_the_limit_cut() -> None:
    # 45 frames left after the first window: 32 scheduled would leave 13, merged into one window of
    # 45; when the listener's audio affords 40, the window leaves the last one the first's size.
    plan = WindowPlan(first=16, growth=2.0, largest=144)
    assert list(cores(61, plan, limit=lambda scheduled: 40)) == [(0, 16), (16, 45), (45, 61)]
    assert list(cores(61, plan, limit=lambda scheduled: 45)) == [(0, 16), (16, 61)]
    # less than two first windows left: the cut window keeps the first's size, a sliver follows
    assert list(cores(40, plan, limit=lambda scheduled: 10)) == [(0, 16), (16, 32), (32, 40)]


def test_cores_short_of_an_open_end_leave_the_rest_to_the_next_call() -> None:
    # A lookahead's head: the sentence goes on past its frames, so a rest smaller than the first
    # window is not merged (nor left as a window of its own): the next call begins with it.
    plan = WindowPlan(first=16, growth=2.0, largest=144)
    sizes = core_sizes(plan)
    head = list(cores(61, plan, sizes=sizes, open_end=True))
    assert head == [(0, 16), (16, 48)]
    assert list(cores(200, plan, start=head[-1][1], sizes=sizes)) == [(48, 112), (112, 200)]
    assert list(cores(70, plan, open_end=True, limit=lambda scheduled: 20)) == [(0, 16), (16, 36), (36, 56)]


def test_audio_ahead_grows_the_first_window_by_as_much_up_to_the_cap() -> None:
    plan = WindowPlan(first=12, growth=2.0, largest=144)
    cores = [(w.start, w.end) for w in plan_windows(400, plan, ahead=40)]
    assert cores[:3] == [(0, 52), (52, 156), (156, 300)]  # 12 + 40, then doubling, then the cap
    assert next((w.start, w.end) for w in plan_windows(2000, plan, ahead=1000)) == (0, 144)
    # Nothing ahead is the plan as it was.
    assert plan_windows(400, plan, ahead=0) == plan_windows(400, plan)


def test_a_sentence_the_audio_ahead_covers_is_one_window_whatever_its_length() -> None:
    plan = WindowPlan(first=12, growth=2.0, largest=144, context=12)
    assert plan_windows(300, plan, ahead=288) == [Window(0, 300, 0, 300)]
    assert [(w.start, w.end) for w in plan_windows(300, plan, ahead=287)] == [(0, 144), (144, 288), (288, 300)]
    # From a later first frame (the leading silence cut), the frames from there on count.
    assert plan_windows(300, plan, 40, ahead=250) == [Window(40, 300, 28, 300, 20, 300)]


def test_seconds_ahead_become_whole_frames() -> None:
    assert ahead_frames(1.0, 0.025) == 40
    assert ahead_frames(0.0249, 0.025) == 0
    with pytest.raises(ValueError, match="frames ahead must be >= 0"):
        next(core_sizes(WindowPlan(), ahead=-1))


def test_a_server_behind_its_listener_starts_at_half_the_largest_window_and_doubles() -> None:
    plan = WindowPlan(first=12, growth=2.0, largest=144)
    assert list(itertools.islice(core_sizes(plan, behind=True), 3)) == [72, 144, 144]
    assert list(itertools.islice(core_sizes(plan), 6)) == [12, 24, 48, 96, 144, 144]
    cores = [(w.start, w.end) for w in plan_windows(400, plan, behind=True)]
    assert cores == [(0, 72), (72, 216), (216, 360), (360, 400)]
    # More audio ahead than that still grows the first window; a sentence it covers is one run.
    assert next(core_sizes(plan, behind=True, ahead=100)) == 112
    assert next(core_sizes(plan, behind=True, ahead=1000)) == 144
    assert plan_windows(80, plan, behind=True) == [Window(0, 80, 0, 80)]


def test_no_plan_means_one_window_over_the_whole_sentence() -> None:
    assert plan_windows(350, None) == [Window(0, 350, 0, 350)]
    assert plan_windows(0, WindowPlan()) == []


@settings(max_examples=200, deadline=None)
@given(
    total=st.integers(1, 900),
    first=st.integers(1, 40),
    growth=st.floats(1.0, 4.0),
    extra=st.integers(0, 300),
    context=st.integers(0, 20),
    carried=st.one_of(st.none(), st.integers(0, 20)),
    ahead=st.integers(0, 400),
    behind=st.booleans(),
)
def test_cores_tile_the_sentence_exactly_once(
    total: int, first: int, growth: float, extra: int, context: int, carried: int | None, ahead: int, behind: bool
) -> None:
    plan = WindowPlan(
        first=first,
        growth=growth,
        largest=first + extra,
        context=context,
        carried_context=carried,
        frontend_context=20 - context,
        crossfade=min(2, context, context if carried is None else carried),
    )
    windows = plan_windows(total, plan, ahead=ahead, behind=behind)
    covered = np.zeros(total, dtype=int)
    for index, window in enumerate(windows):
        covered[window.start : window.end] += 1
        reach = context if index == 0 or carried is None else min(context, carried)
        assert window.span_start == max(0, window.start - reach)
        assert window.span_end == min(total, window.end + reach)
        assert window.frontend_start == max(0, window.start - reach - 20 + context)
        assert window.frontend_end == min(total, window.end + reach + 20 - context)
    assert covered.tolist() == [1] * total
    assert [w.start for w in windows[1:]] == [w.end for w in windows[:-1]]


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(1, 300),
    first=st.integers(1, 30),
    context=st.integers(0, 16),
    carried=st.integers(0, 16),
    crossfade=st.integers(0, 4),
)
def test_stitching_gives_every_sample_once_in_order(
    total: int, first: int, context: int, carried: int, crossfade: int
) -> None:
    plan = WindowPlan(
        first=first,
        growth=2.0,
        largest=120,
        context=context,
        carried_context=carried,
        crossfade=min(crossfade, context, carried),
    )
    windows = plan_windows(total, plan)
    audio = stitch(windows, iter(decode_by_position(w) for w in windows), SPF, plan.crossfade)
    expected = decode_by_position(Window(0, total, 0, total))
    assert len(audio) == total * SPF
    # Where windows agree (this stand-in decoder always does) a crossfade changes nothing.
    np.testing.assert_allclose(audio, expected, rtol=0, atol=1e-6)


def test_a_seam_between_disagreeing_windows_is_faded_not_stepped() -> None:
    # Window 1 says 0.0 everywhere, window 2 says 1.0: the seam must ramp, not jump.
    windows = plan_windows(40, WindowPlan(first=10, growth=3.0, largest=100, context=4, crossfade=2))
    assert len(windows) == 2
    first, second = windows
    stitcher = Stitcher(SPF, crossfade_frames=2)
    head = stitcher.push(first, np.zeros(first.frames * SPF, dtype=np.float32))
    tail = stitcher.push(second, np.ones(second.frames * SPF, dtype=np.float32))
    audio = np.concatenate([head, tail])
    seam = first.end * SPF
    assert np.all(audio[:seam] == 0.0)
    ramp = audio[seam : seam + 2 * SPF]
    assert np.all(np.diff(ramp) > 0) and ramp[0] < 0.01 and ramp[-1] > 0.99
    assert np.max(np.abs(np.diff(audio))) < 0.01  # no step anywhere
    assert np.all(audio[seam + 2 * SPF :] == 1.0)


def test_fade_weights_are_complementary_and_monotonic() -> None:
    weights = fade_in(1200)
    assert np.all(np.diff(weights) > 0)
    np.testing.assert_allclose(weights + weights[::-1], 1.0, atol=1e-6)


def test_a_window_out_of_order_or_of_the_wrong_length_is_refused() -> None:
    windows = plan_windows(60, WindowPlan(first=10))
    stitcher = Stitcher(SPF, crossfade_frames=2)
    with pytest.raises(ValueError, match="starts at frame 10, expected 0"):
        stitcher.push(windows[1], np.zeros(windows[1].frames * SPF, dtype=np.float32))
    with pytest.raises(ValueError, match="samples"):
        stitcher.push(windows[0], np.zeros(5, dtype=np.float32))


@pytest.mark.parametrize(
    "options",
    [
        {"first": 0},
        {"first": 20, "largest": 10},
        {"growth": 0.5},
        {"context": 1, "crossfade": 2},
        {"carried_context": 1, "crossfade": 2},
        {"carried_context": -1, "crossfade": 0},
        {"first_right_context": 1, "crossfade": 2},
        {"first_right_context": -1, "crossfade": 0},
        {"frontend_context": -1},
    ],
)
def test_impossible_plans_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        WindowPlan(**options)  # type: ignore[arg-type]
