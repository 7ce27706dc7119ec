"""Pacing of the decoder windows: later windows cut to what the listener's audio leaves time for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.clocks import ManualClock
from voicestream.engine.onnx.engine import OnnxEngine, OnnxStrategy
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.pacing import (
    MARGIN,
    RUN_VARIATION,
    DecodeSpeed,
    WindowPacer,
    gaining_core,
    keeps_playing,
    paced_core,
    planned_first,
    real_time,
    room_for_variation,
)
from voicestream.engine.streaming.windows import WindowPlan, core_sizes, cores, plan_cores

FRAME_S = 0.025
PLAN = WindowPlan(first=12, growth=2.0, largest=144, context=12, carried_context=8)


def test_a_fast_engine_keeps_the_schedule() -> None:
    # 4 ms per frame: a 24-frame core and its 16 context frames decode in 160 ms of the 300 ahead.
    assert paced_core(24, 0.300, 0.004, PLAN, FRAME_S) == 24
    assert paced_core(144, 5.0, 0.004, PLAN, FRAME_S) == 144


def test_a_slow_engine_gets_the_core_it_decodes_within_the_margin_of_the_audio_ahead() -> None:
    # 9 ms per frame, 1.2 s ahead: 0.8 * 1.2 / 0.009 = 106 frames decodable, 16 of them context.
    assert paced_core(144, 1.2, 0.009, PLAN, FRAME_S, margin=0.8) == int(0.8 * 1.2 / 0.009) - 16 == 90
    core = paced_core(144, 1.2, 0.009, PLAN, FRAME_S)  # the default margin
    assert (core + 16) * 0.009 <= MARGIN * 1.2 < (core + 17) * 0.009


def test_never_below_the_first_window() -> None:
    # 0.8 * 0.3 / 0.009: 26 decodable, 16 of them context
    assert paced_core(24, 0.300, 0.009, PLAN, FRAME_S, margin=0.8) == PLAN.first
    assert paced_core(24, 0.0, 0.009, PLAN, FRAME_S) == PLAN.first


def test_an_engine_slower_than_real_time_keeps_the_schedule() -> None:
    # 24 ms per frame: even the largest window (144 + 16 context) decodes slower than it plays.
    assert paced_core(96, 0.1, 0.024, PLAN, FRAME_S) == 96


def test_an_engine_slower_than_a_first_size_window_plays_is_still_paced() -> None:
    """11 ms per frame: a first-size window (12 + 16 context) decodes slower than it plays, but a
    larger one keeps up: the first window is planned large enough (planned_first), and the later
    ones are still cut to the audio ahead."""
    assert paced_core(96, 1.0, 0.011, PLAN, FRAME_S) == int(MARGIN * 1.0 / 0.011) - 16


def test_the_decode_speed_follows_recent_runs() -> None:
    speed = DecodeSpeed()
    speed.record(40, 0.4)
    assert speed.seconds_per_frame == pytest.approx(0.010)
    speed.record(100, 0.6)
    assert speed.seconds_per_frame == pytest.approx(0.008)  # halfway to the new run's 6 ms


def paced(speed: DecodeSpeed, clock: ManualClock, *, ahead_s: float = 0.0, margin: float = MARGIN) -> WindowPacer:
    """A pacer over a listener of its own (listener.py), on the test's clock."""
    return WindowPacer(speed, Listener(ahead_s=ahead_s, now=clock), FRAME_S, margin=margin)


def test_nothing_is_paced_before_the_speed_is_known_or_a_listener_waits_or_when_behind() -> None:
    clock = ManualClock()
    unmeasured = paced(DecodeSpeed(), clock, ahead_s=0.5)
    assert unmeasured.limit(PLAN)(96) == 96
    nothing_played = paced(DecodeSpeed(0.009), clock)
    assert nothing_played.limit(PLAN)(96) == 96  # the first window: the listener has nothing yet
    ahead = paced(DecodeSpeed(0.009), clock, ahead_s=0.5)
    assert ahead.limit(PLAN)(96) == int(MARGIN * 0.5 / 0.009) - 16
    # The server behind: the listener ran dry while the text waited.
    listener = Listener(now=clock)
    listener.produced(0.2)
    clock.now += 0.5
    behind = WindowPacer(DecodeSpeed(0.009), listener, FRAME_S)
    listener.produced(0.5)
    assert listener.behind() and behind.limit(PLAN)(96) == 96


def test_an_idle_listener_whose_text_came_late_is_not_paced_before_this_calls_audio() -> None:
    """Audio that ran out before the text came: the first window is nobody's lateness, and there
    is nothing ahead to pace by until it plays."""
    clock = ManualClock()
    listener = Listener(now=clock)
    listener.produced(0.3)
    clock.now += 2.0
    listener.waiting_since(clock.now)
    pace = WindowPacer(DecodeSpeed(0.009), listener, FRAME_S)
    assert not listener.behind() and pace.limit(PLAN)(96) == 96
    listener.produced(0.4)  # this call's first window: now there is something to pace by
    assert pace.limit(PLAN)(96) == int(MARGIN * 0.4 / 0.009) - 16


def test_an_engine_that_decodes_in_no_time_keeps_the_schedule() -> None:
    assert paced_core(96, 0.3, 0.0, PLAN, FRAME_S) == 96


def test_once_the_listener_ran_dry_the_schedule_decides_again() -> None:
    """A gap during the call means windows waited for workers busy with other sessions: smaller
    windows would only add work."""
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.009), clock, margin=0.8)  # the first cut lands on 12
    listener = pace.listener
    limit = pace.limit(PLAN)
    listener.produced(0.3)
    clock.now += 0.3 + FRAME_S / 2  # late by half a frame: not yet a gap worth the name
    listener.produced(0.3)
    assert not listener.behind() and limit(48) < 48
    clock.now += 0.3 + 2 * FRAME_S
    listener.produced(0.3)
    assert listener.behind()
    # 300 ms ahead would cut to 12 again; the schedule instead, regrowing from the last cut
    assert [limit(96), limit(144), limit(144), limit(144)] == [24, 48, 96, 144]


def paced_run(margin: float) -> tuple[list[int], list[float]]:
    """A 400-frame sentence paced on an engine at 9 ms per span frame (16 of them context): each
    core's size, and the audio the listener had left when each later window was decoded."""
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.009), clock, margin=margin)
    sizes, spare = [], []
    for start, end in cores(400, PLAN, limit=pace.limit(PLAN)):
        sizes.append(end - start)
        decoding = (end - start + 16) * 0.009
        if len(sizes) > 1:
            spare.append(pace.listener.ahead_s() - decoding)
        clock.now += decoding
        pace.listener.produced((end - start) * FRAME_S)
    return sizes, spare


def test_a_paced_schedule_is_decided_window_by_window() -> None:
    """Each core is decided when asked for, the audio of the ones before having played meanwhile;
    each later window is decoded before the listener's audio runs out."""
    sizes, spare = paced_run(margin=0.8)  # the sizes below are 0.8's
    scheduled = [end - start for start, end in plan_cores(400, PLAN)]
    assert sizes[0] == scheduled[0] == PLAN.first
    assert sizes[1] == PLAN.first < scheduled[1]  # 300 ms ahead: 26 frames decodable, 16 of them context
    assert len(sizes) > len(scheduled) and sum(sizes) == 400
    assert min(spare) >= 0.0


@pytest.mark.parametrize("margin", [MARGIN, 1.0])
def test_at_any_margin_each_window_is_decoded_before_the_audio_runs_out(margin: float) -> None:
    sizes, spare = paced_run(margin)
    assert sum(sizes) == 400 and min(spare) >= 0.0


def test_the_margin_is_the_share_of_the_audio_ahead_a_window_may_take() -> None:
    # 1.2 s ahead at 9 ms per span frame, 16 of them context: 64 core frames at 0.6, 117 at 1.0.
    assert paced_core(144, 1.2, 0.009, PLAN, FRAME_S, margin=1.0) == int(1.2 / 0.009) - 16 == 117
    assert paced_core(144, 1.2, 0.009, PLAN, FRAME_S, margin=0.6) == int(0.6 * 1.2 / 0.009) - 16 == 64
    speed = DecodeSpeed(0.009)
    cuts = {}
    for margin in (0.6, 1.0):
        pace = paced(speed, ManualClock(), ahead_s=1.2, margin=margin)
        cuts[margin] = pace.limit(PLAN)(144)
    assert cuts == {0.6: 64, 1.0: 117}
    # 0.3 s ahead as a clock measures it (100.3 - 100) decodes 30 frames at 0.9, not 29.99...
    assert paced_core(24, 100.3 - 100.0, 0.009, PLAN, FRAME_S, margin=0.9) == 30 - 16
    for impossible in (0.0, 1.5):
        with pytest.raises(ValueError, match="margin"):
            paced(speed, ManualClock(), margin=impossible)
        with pytest.raises(ValueError, match="margin"):
            OnnxEngine(
                strategy=OnnxStrategy(pacing_margin=impossible)
            )  # when the engine is made, not at its first synthesis


def test_after_a_cut_windows_grow_again_by_at_most_the_plans_growth() -> None:
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.009), clock, margin=0.8)
    pace.listener.produced(0.3)
    limit = pace.limit(PLAN)
    assert limit(24) == PLAN.first  # 300 ms ahead: cut (0.8 * 0.3 / 0.009 - 16 context = 10)
    pace.listener.produced(300 * FRAME_S)  # then plenty of audio: the pace alone would allow the schedule's 48, 96
    assert [limit(48), limit(96), limit(144), limit(144)] == [24, 48, 96, 144]


def test_the_schedule_alone_would_leave_that_listener_waiting() -> None:
    """The same slow engine on the plan's schedule: the pacing above is what keeps the audio going."""
    t, playing_until = 100.0, None
    waited = 0.0
    for start, end in plan_cores(400, PLAN):
        t += (end - start + 16) * 0.009
        if playing_until is not None and t > playing_until:
            waited += t - playing_until
        playing_until = max(t, playing_until or t) + (end - start) * FRAME_S
    assert waited > 0.05


@settings(max_examples=200, deadline=None)
@given(
    total=st.integers(1, 800),
    first=st.integers(1, 40),
    limits=st.lists(st.integers(-5, 300), min_size=1, max_size=50),
)
def test_limited_cores_still_tile_the_sentence_exactly_once(total: int, first: int, limits: list[int]) -> None:
    plan = WindowPlan(first=first, largest=max(first, 144))
    asked = itertools.cycle(limits)
    allowed: list[int] = []

    def limit(scheduled: int) -> int:
        allowed.append(next(asked))
        return allowed[-1]

    covered = np.zeros(total, dtype=int)
    limited = list(cores(total, plan, limit=limit))
    for start, end in limited:
        covered[start:end] += 1
    assert covered.tolist() == [1] * total
    # never below the first window, but for a last sliver after a cut
    assert all(end - start >= min(first, total) for start, end in limited[:-1])
    # never above what the limit allows (the first window's size it may not cut)
    assert all(end - start <= max(first, most) for (start, end), most in zip(limited, allowed, strict=False))
    scheduled = core_sizes(plan)
    # never above the schedule (the last core also takes a sliver smaller than the first window)
    assert all(end - start <= next(scheduled) + first - 1 for start, end in limited)


ONNX_PLAN = WindowPlan(first=16, carried_context=8, first_right_context=8)


def test_the_first_window_is_the_plans_on_a_host_fast_enough_for_it() -> None:
    for seconds_per_frame in (0.005, 0.009):  # the fast class, the Intel class
        assert planned_first(400, seconds_per_frame, ONNX_PLAN, FRAME_S) == ONNX_PLAN.first


def test_on_a_slow_host_the_first_window_grows_to_what_keeps_the_listener_in_audio() -> None:
    """14.75 ms per frame (RTF 0.59): after a 16-frame first window the next windows can only
    shrink the audio ahead (a gap), so the first grows, to the smallest size that keeps playing."""
    s = 0.01475
    assert not keeps_playing(ONNX_PLAN.first, 400, s, ONNX_PLAN, FRAME_S)
    first = planned_first(400, s, ONNX_PLAN, FRAME_S)
    assert first is not None and first > ONNX_PLAN.first
    assert keeps_playing(first, 400, s, ONNX_PLAN, FRAME_S)
    assert not keeps_playing(first - 1, 400, s, ONNX_PLAN, FRAME_S)
    # A whole-piece encoding still to come (a lookahead's) needs more audio buffered before it.
    with_encoding = planned_first(400, s, ONNX_PLAN, FRAME_S, encode_s=0.5, encode_by=90)
    assert with_encoding is not None and with_encoding > first
    # ...and a head too short to buffer it: no first window does (the piece is encoded whole first).
    assert planned_first(400, s, ONNX_PLAN, FRAME_S, encode_s=3.0, encode_by=40) is None
    # Slower than real time: nothing helps, the plan's first window.
    assert planned_first(400, 0.026, ONNX_PLAN, FRAME_S) == ONNX_PLAN.first


def test_a_piece_is_decoded_whole_when_that_delays_no_audio() -> None:
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.01), clock)
    assert pace.decodes_whole(40, 40)  # nothing plays: no more frames than the first window computes
    assert not pace.decodes_whole(80, 40)  # nothing ahead: the first window is first audio
    ahead = paced(DecodeSpeed(0.01), clock, ahead_s=1.0)
    assert ahead.decodes_whole(50, 40)  # 0.5 s of decoding: half of the 1 s ahead (WHOLE_RUN_SHARE)
    assert not ahead.decodes_whole(51, 40)  # a window may take 0.9 of it; one whole run may not
    assert not paced(DecodeSpeed(), clock, ahead_s=5.0).decodes_whole(40, 40)  # unmeasured: the plan


def test_the_whole_piece_is_encoded_once_the_audio_ahead_covers_it() -> None:
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.01), clock, ahead_s=1.0, margin=0.9)
    assert not pace.affords_encode(100, ONNX_PLAN)  # the encoder's speed is not measured yet
    pace.encoded(50, 0.25)  # 5 ms per token
    # 0.9 s of the 1 s ahead: 100 tokens (0.5 s) and a first-size window (32 frames, 0.32 s) fit...
    assert pace.affords_encode(100, ONNX_PLAN)
    assert not pace.affords_encode(120, ONNX_PLAN)  # ...120 tokens (0.6 s) do not


def test_a_gap_the_engines_own_window_caused_keeps_the_pace() -> None:
    """A window that outlasted the audio ahead (a load spike the speed did not foresee) leaves the
    listener dry while this engine computes: the pace, not the schedule's larger windows, is the
    remedy. A gap while the text waited between windows (a worker busy elsewhere) is the server's."""
    clock = ManualClock()
    pace = paced(DecodeSpeed(0.009), clock)
    listener, limit = pace.listener, pace.limit(PLAN)
    listener.produced(0.3)
    clock.now += 0.5  # the next window took 0.5 s: 0.2 s of silence during it
    pace.decoded(40, 0.5)
    listener.produced(0.3)
    assert listener.behind() and not pace.behind()
    cut = limit(96)
    assert cut < 96  # still paced
    clock.now += 0.5  # then nothing computed while the listener ran dry: the server is behind
    listener.produced(0.3)
    assert pace.behind() and limit(96) == 2 * cut  # the schedule, regrowing from the cut


def test_a_window_is_never_cut_below_what_regains_audio() -> None:
    """15 ms per frame with 0.1 s ahead (after a load spike): a 12-frame window would take 420 ms
    for 300 ms of audio, and the next one would find even less ahead. The cut stops at the
    smallest core that adds more audio than it takes (16 x 15 / (25 - 15) = 24, so 25)."""
    assert gaining_core(0.015, PLAN, FRAME_S) == 25
    assert paced_core(96, 0.1, 0.015, PLAN, FRAME_S) == 25
    assert paced_core(20, 0.1, 0.015, PLAN, FRAME_S) == 20  # never more than the schedule's
    assert gaining_core(0.005, PLAN, FRAME_S) == PLAN.first  # a fast host: the plan's


def test_with_audio_playing_only_the_audio_ahead_decides_whole_decoding() -> None:
    """A later piece no longer than its grown first window is not decoded whole unless the audio
    ahead covers decoding it: the pace would have cut that first window."""
    ahead = paced(DecodeSpeed(0.02), ManualClock(), ahead_s=1.0)
    assert not ahead.decodes_whole(60, 100)  # 1.2 s of decoding, 0.5 s of budget
    assert ahead.decodes_whole(25, 100)


def test_the_first_windows_room_for_slow_runs_shrinks_near_real_time() -> None:
    """A fast or a slow host gets the full room; near real time only half the headroom there is,
    so the plan is still for a host faster than real time; none on a host slower than that."""
    for seconds_per_frame in (0.004, 0.009, 0.015):  # RTF ~0.2, ~0.37, ~0.6
        assert room_for_variation(seconds_per_frame, PLAN, FRAME_S) == RUN_VARIATION
    near = 0.021  # a 144-frame core and its 16 context frames take 3.36 s for 3.6 s of audio
    room = room_for_variation(near, PLAN, FRAME_S)
    assert 1.0 < room < RUN_VARIATION and real_time(near * room, PLAN, FRAME_S)
    assert not real_time(near * RUN_VARIATION, PLAN, FRAME_S)
    assert room_for_variation(0.03, PLAN, FRAME_S) == 1.0  # slower than real time
