"""The synthesis pipeline every engine runs (engine/streaming/pipeline.py), over a small fake
runtime: each decoded frame's samples hold the frame's index, so what was emitted, in which
window, is read straight off the audio. The clock is the test's: no verdict depends on speed."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pytest

from tests.support.clocks import ManualClock
from tests.support.listeners import listener_ahead, listener_behind
from voicestream.engine.base import FloatAudio
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.lookahead import SPACE_ID, LookaheadPlan
from voicestream.engine.streaming.pipeline import Pipeline, Streaming
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME, Window, WindowPlan, plan_windows
from voicestream.engine.streaming.word_timings import FRAME_S
from voicestream.engine.text.g2p import Phonemes, SpokenWord

LEADING_PAD = 14  # frames of silence the fake encoder puts before the first phoneme
TOKEN_FRAMES = 3
VOCAB = {"a": 1, "b": 2, " ": SPACE_ID}
PLAN = WindowPlan(first=12, growth=2.0, largest=48, context=6, frontend_context=0)


@dataclass(frozen=True)
class FakeFeatures:
    durations: npt.NDArray[np.int64]  # [1, tokens + 2]
    made_by: str  # "encode" or "join"
    tokens: int

    @property
    def frames(self) -> int:
        return int(self.durations.sum())


@dataclass
class FakeRuntime:
    """Encodes `TOKEN_FRAMES` per id after a `LEADING_PAD`-frame pad; decodes each frame as its
    index. With a clock, each window's decoding takes `seconds_per_frame` of its span."""

    clock: ManualClock | None = None
    seconds_per_frame: float = 0.0
    encoded: list[tuple[int, str]] = field(default_factory=list)  # (ids, style) per encoder run
    decoded: list[tuple[Window, str]] = field(default_factory=list)

    def encode(self, ids: list[int], style: str, speed: float) -> FakeFeatures:
        self.encoded.append((len(ids), style))
        durations = np.array([[LEADING_PAD, *[TOKEN_FRAMES] * len(ids), 2]], dtype=np.int64)
        return FakeFeatures(durations, "encode", len(ids))

    def durations(self, features: FakeFeatures) -> npt.NDArray[np.int64]:
        return features.durations

    def window_decoder(self) -> Callable[[FakeFeatures, Window], FloatAudio]:
        def decode(features: FakeFeatures, window: Window) -> FloatAudio:
            self.decoded.append((window, features.made_by))
            if self.clock is not None:
                self.clock.now += self.seconds_per_frame * window.frames
            frames = np.arange(window.span_start, window.span_end, dtype=np.float32)
            return np.repeat(frames, SAMPLES_PER_FRAME)

        return decode


def join(head: FakeFeatures, whole: FakeFeatures, token: int) -> FakeFeatures:
    durations = np.concatenate([head.durations[:, : token + 1], whole.durations[:, token + 1 :]], axis=1)
    return FakeFeatures(durations, "join", whole.tokens)


def piece(*words: str) -> Phonemes:
    """Words of `a`/`b` phonemes, one space apart."""
    text, spans, cursor = "", [], 0
    for word in words:
        if text:
            text += " "
            cursor += 1
        spans.append(SpokenWord(word, cursor, cursor + len(word)))
        text += word
        cursor += len(word)
    return Phonemes(text, tuple(spans))


def frames_of(samples: FloatAudio) -> list[int]:
    return [int(frame) for frame in samples[::SAMPLES_PER_FRAME]]


def run(
    pipeline: Pipeline[FakeFeatures, str], pieces: list[Phonemes], listener: Listener | None = None
) -> list[tuple[list[int], list[tuple[str, float]]]]:
    """Each chunk's frames and words (text, start second)."""
    chunks = pipeline.run(pieces, lambda p, ids: f"row {len(ids) - 1}", 1.0, listener or Listener(now=ManualClock()))
    return [(frames_of(c.samples), [(w.word, w.start_s) for w in c.words]) for c in chunks]


def unpaced(plan: WindowPlan | None, lead_in: int | None = None, **options: object) -> Streaming:
    return Streaming(windows=plan, lead_in_frames=lead_in, pacing=False, **options)  # type: ignore[arg-type]


def test_a_whole_piece_is_one_window_with_every_frame_and_every_word() -> None:
    runtime = FakeRuntime()
    text = piece("ab", "ba", "a")
    ((frames, words),) = run(Pipeline(runtime, VOCAB, unpaced(None)), [text])
    total = LEADING_PAD + TOKEN_FRAMES * 7 + 2
    assert frames == list(range(total))
    # Word starts: after the pad, 3 frames per id, the spaces' ids included.
    assert [w for w, _ in words] == ["ab", "ba", "a"]
    assert [s for _, s in words] == pytest.approx(
        [f * FRAME_S for f in (LEADING_PAD, LEADING_PAD + 9, LEADING_PAD + 18)]
    )
    assert runtime.encoded == [(7, "row 6")]  # the style row the engine chose for the piece


def test_windows_follow_the_plan_after_the_lead_in_and_each_word_goes_with_its_first_frame() -> None:
    runtime = FakeRuntime()
    text = piece(*["ab"] * 12)
    chunks = run(Pipeline(runtime, VOCAB, unpaced(PLAN, lead_in=4)), [text])
    total = LEADING_PAD + TOKEN_FRAMES * 35 + 2
    first = LEADING_PAD - 4  # the leading silence beyond 4 frames is not emitted
    expected = plan_windows(total, PLAN, first)
    assert [len(frames) for frames, _ in chunks] == [w.end - w.start for w in expected]
    assert list(itertools.chain.from_iterable(frames for frames, _ in chunks)) == list(range(first, total))
    words = [word for _, chunk_words in chunks for word in chunk_words]
    assert [w for w, _ in words] == ["ab"] * 12
    assert words[0][1] == pytest.approx(4 * FRAME_S)  # speech starts 4 frames into the audio
    for frames, chunk_words in chunks:
        for _, start_s in chunk_words:
            assert frames[0] <= first + round(start_s / FRAME_S) <= frames[-1]


def test_the_listener_as_the_piece_starts_sizes_its_first_window() -> None:
    text = piece(*["ab"] * 12)
    total = LEADING_PAD + TOKEN_FRAMES * 35 + 2
    ahead = run(Pipeline(FakeRuntime(), VOCAB, unpaced(PLAN)), [text], listener_ahead(0.5))
    assert [len(f) for f, _ in ahead] == [w.end - w.start for w in plan_windows(total, PLAN, ahead=20)]
    assert len(ahead[0][0]) == PLAN.first + 20
    behind = run(Pipeline(FakeRuntime(), VOCAB, unpaced(PLAN)), [text], listener_behind())
    assert len(behind[0][0]) == PLAN.largest // 2


def test_later_pieces_follow_on_in_time_and_a_piece_with_nothing_to_speak_is_skipped() -> None:
    runtime = FakeRuntime()
    pipeline = Pipeline(runtime, VOCAB, unpaced(None))
    chunks = run(pipeline, [piece("ab"), Phonemes("?!"), piece("ba")])
    assert len(chunks) == 2 and len(runtime.encoded) == 2
    first_piece_s = len(chunks[0][0]) * FRAME_S
    ((word, start_s),) = chunks[1][1]
    assert word == "ba" and start_s == pytest.approx(first_piece_s + LEADING_PAD * FRAME_S)


def test_a_long_piece_speaks_its_head_first_and_the_rest_from_the_joined_encoding() -> None:
    runtime = FakeRuntime()
    lookahead = LookaheadPlan(spoken_tokens=12, lookahead_tokens=12, min_rest_tokens=6)
    pipeline = Pipeline(runtime, VOCAB, unpaced(PLAN, lead_in=4, lookahead=lookahead), join=join)
    text = piece(*["ab"] * 20)  # 59 ids
    chunks = pipeline.run([text], lambda p, ids: "row", 1.0, Listener(now=ManualClock()))
    first = next(chunks)
    assert runtime.encoded == [(23, "row")]  # the head alone before the first audio
    rest = list(chunks)
    assert runtime.encoded == [(23, "row"), (59, "row")]  # the whole piece once a later window was asked for
    makers = [made_by for _, made_by in runtime.decoded]
    assert makers[0] == "encode" and makers[-1] == "join" and makers == sorted(makers)  # head windows, then joined
    frames = list(itertools.chain.from_iterable(frames_of(c.samples) for c in [first, *rest]))
    total = LEADING_PAD + TOKEN_FRAMES * 59 + 2
    assert frames == list(range(LEADING_PAD - 4, total))
    assert [w.word for c in [first, *rest] for w in c.words] == ["ab"] * 20
    # Without a join the runtime cannot, and the piece is encoded whole.
    whole_only = FakeRuntime()
    run(Pipeline(whole_only, VOCAB, unpaced(PLAN, lead_in=4, lookahead=lookahead)), [text])
    assert whole_only.encoded == [(59, "row 58")]


def test_a_consumer_that_stops_stops_the_work_between_windows() -> None:
    runtime = FakeRuntime()
    chunks = Pipeline(runtime, VOCAB, unpaced(PLAN)).run([piece(*["ab"] * 12)], lambda p, i: "", 1.0, Listener())
    assert runtime.decoded == []  # nothing before the consumer asks
    next(chunks)
    chunks.close()
    assert len(runtime.decoded) == 1


def test_windows_are_paced_to_the_listeners_audio_on_the_runtimes_measured_speed() -> None:
    """A runtime at 9 ms per span frame, on the test's clock: after the first window's 300 ms,
    the second is cut to what decodes within the margin of what the listener has left; on the
    plan's schedule alone it would have been larger. The listener hears each chunk as the
    consumer (here: the test, as the server would) takes it."""
    clock = ManualClock()
    runtime = FakeRuntime(clock=clock, seconds_per_frame=0.009)
    pipeline = Pipeline(runtime, VOCAB, Streaming(windows=PLAN, lead_in_frames=4, pacing=True, pacing_margin=0.9))
    listener = Listener(now=clock)
    text = piece(*["ab"] * 30)
    sizes = []
    for chunk in pipeline.run([text], lambda p, i: "", 1.0, listener):
        listener.push(chunk)
        sizes.append(len(chunk.samples) // SAMPLES_PER_FRAME)
    total = LEADING_PAD + TOKEN_FRAMES * 89 + 2
    scheduled = [w.end - w.start for w in plan_windows(total, PLAN, LEADING_PAD - 4)]
    assert sizes[0] == scheduled[0] == PLAN.first
    assert sizes[1] == int(0.9 * 0.3 / 0.009) - 12 < scheduled[1]  # 30 span frames, 12 of them context
    assert sum(sizes) == sum(scheduled) and pipeline.decode_speed.seconds_per_frame == pytest.approx(0.009)


def test_a_negative_lead_in_is_refused() -> None:
    with pytest.raises(ValueError, match="lead_in_frames"):
        Streaming(windows=PLAN, lead_in_frames=-1)
