"""A simulated host: the streaming pipeline over a fake split runtime whose runs cost time on an
injected clock, so a test can play a host of any speed deterministically (pipeline.py's
`SplitRuntime` is our own Protocol: this is a small fake of it, not a patch).

Each encoder run advances the clock by a fixed cost plus a cost per token, each decoder run by a
fixed cost plus a cost per frame of its generator span: a host at whole-sentence RTF `rtf`
decodes a whole sentence in `rtf` times its audio's duration, and encodes in proportion (the
costs are this repository's fast host's, docs/engine-evidence.md, scaled by `rtf / 0.2`). The
listener (listener.py) reads the same clock and plays each chunk as soon as it is yielded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tests.support.clocks import ManualClock
from voicestream.engine.base import FloatAudio
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.pipeline import Pipeline, Streaming
from voicestream.engine.streaming.windows import SAMPLES_PER_FRAME, Window
from voicestream.engine.streaming.word_timings import FRAME_S
from voicestream.engine.text.g2p import Phonemes

FAST_RTF = 0.2  # this repository's fast host: the costs below are its own (docs/engine-evidence.md)
SPACE = " "
VOCAB = {SPACE: 16, **{letter: 20 + index for index, letter in enumerate("abcdefghij")}}
LEAD_FRAMES = 14  # the leading pad's silence (Kokoro predicts ~0.3-0.45 s)
TAIL_FRAMES = 6


@dataclass(frozen=True, slots=True)
class FakeFeatures:
    durations: npt.NDArray[np.int64]  # [1, tokens + 2], pads included

    @property
    def frames(self) -> int:
        return int(self.durations.sum())


def token_frames(token: int) -> int:
    """Frames a token lasts: 2 or 3 (Kokoro's average is ~2.5), the same wherever it is encoded."""
    return 2 + token % 2


@dataclass(slots=True)
class HostCosts:
    """Seconds each run takes on a host at whole-sentence RTF `rtf`."""

    rtf: float

    @property
    def scale(self) -> float:
        return self.rtf / FAST_RTF

    @property
    def decode_per_run_s(self) -> float:
        return 0.004 * self.scale

    @property
    def decode_per_frame_s(self) -> float:
        return self.rtf * FRAME_S - 0.0001 * self.scale  # a whole 40-frame decode costs rtf x its audio

    @property
    def encode_per_run_s(self) -> float:
        return 0.010 * self.scale

    @property
    def encode_per_token_s(self) -> float:
        return 0.0005 * self.scale


class TorchCpuCosts(HostCosts):
    """The torch engine on this repository's fast host's 2 CPU cores, fused generator
    (docs/engine-evidence.md, "Fused generator blocks and an 80-token head"): a decoder run costs
    ~64 ms plus ~7 ms a span frame, an encoder run ~60 ms plus ~2.4 ms a token."""

    def __init__(self) -> None:
        super().__init__(rtf=0.3)

    @property
    def decode_per_run_s(self) -> float:
        return 0.064

    @property
    def decode_per_frame_s(self) -> float:
        return 0.007

    @property
    def encode_per_run_s(self) -> float:
        return 0.060

    @property
    def encode_per_token_s(self) -> float:
        return 0.0024


@dataclass
class SimulatedRuntime:
    """A SplitRuntime[FakeFeatures, int] whose runs advance `clock` by `costs`; it counts what
    it computed."""

    clock: ManualClock
    costs: HostCosts
    # Each run's cost times the next of these, in turn: a load that comes and goes. Encoder runs
    # too: on a real host they varied as much as the decoder's (docs/engine-evidence.md, "The
    # floor under first audio").
    jitter: Sequence[float] = (1.0,)
    jitter_from: int = 0  # the run `jitter`'s first factor applies to (later ones cycle from there)
    decoded_frames: int = 0
    compute_s: float = 0.0
    runs: list[tuple[str, int]] = field(default_factory=list)

    def _factor(self) -> float:
        return self.jitter[(len(self.runs) - self.jitter_from) % len(self.jitter)]

    def _spend(self, seconds: float) -> None:
        self.clock.now += seconds
        self.compute_s += seconds

    def encode(self, ids: list[int], style: int, speed: float) -> FakeFeatures:
        del style, speed
        self._spend(self._factor() * (self.costs.encode_per_run_s + self.costs.encode_per_token_s * len(ids)))
        self.runs.append(("encode", len(ids)))
        frames = [LEAD_FRAMES, *(token_frames(token) for token in ids), TAIL_FRAMES]
        return FakeFeatures(np.array([frames], dtype=np.int64))

    def durations(self, features: FakeFeatures) -> npt.NDArray[np.int64]:
        return features.durations

    def window_decoder(self) -> Callable[[FakeFeatures, Window], FloatAudio]:
        def decode(features: FakeFeatures, window: Window) -> FloatAudio:
            self._spend(self._factor() * (self.costs.decode_per_run_s + self.costs.decode_per_frame_s * window.frames))
            self.decoded_frames += window.frames
            self.runs.append(("decode", window.frames))
            return np.zeros(window.frames * SAMPLES_PER_FRAME, dtype=np.float32)

        return decode


def join(head: FakeFeatures, whole: FakeFeatures, token: int) -> FakeFeatures:
    """The head's durations before `token` (pads included: index token + 1), the whole's from it."""
    cut = token + 1
    return FakeFeatures(np.concatenate([head.durations[:, :cut], whole.durations[:, cut:]], axis=1))


def sentence(words: int, letters: int = 5) -> Phonemes:
    """A phoneme piece of `words` words of `letters` phonemes each (a 5-word sentence: ~29 tokens,
    ~1.7 s of speech, as Kokoro's)."""
    alphabet = "abcdefghij"
    text = SPACE.join(
        "".join(alphabet[(word * 3 + index) % len(alphabet)] for index in range(letters)) for word in range(words)
    )
    return Phonemes(text)


@dataclass(frozen=True, slots=True)
class Stream:
    """What a listener heard: when audio started, its gaps, and what producing it cost."""

    first_audio_s: float
    worst_gap_s: float
    audio_s: float
    decoded_frames: int
    whole_frames: int  # frames a whole-piece decode of every piece computes
    compute_s: float
    whole_compute_s: float  # one encoder run and one whole decode per piece, on the same host

    @property
    def frame_ratio(self) -> float:
        return self.decoded_frames / self.whole_frames

    @property
    def compute_ratio(self) -> float:
        return self.compute_s / self.whole_compute_s


def whole_cost(costs: HostCosts, ids: int, frames: int) -> float:
    return (
        costs.encode_per_run_s
        + costs.encode_per_token_s * ids
        + costs.decode_per_run_s
        + costs.decode_per_frame_s * frames
    )


def play(pipeline: Pipeline[FakeFeatures, int], clock: ManualClock, pieces: Sequence[Phonemes]) -> Stream:
    """Run `pieces` as one synthesis call for a fresh listener on `clock`, who plays each chunk
    as soon as it is yielded."""
    runtime = pipeline.runtime
    assert isinstance(runtime, SimulatedRuntime)
    listener = Listener(now=clock)
    started, frames_before, compute_before = clock.now, runtime.decoded_frames, runtime.compute_s
    first_audio: float | None = None
    playing_until = clock.now
    worst_gap = 0.0
    audio_s = 0.0
    for chunk in listener.hearing(pipeline.run(pieces, lambda _piece, _ids: 0, 1.0, listener)):
        now = clock.now
        if first_audio is None:
            first_audio = now - started
        else:
            worst_gap = max(worst_gap, now - playing_until)
        playing_until = max(now, playing_until) + chunk.duration_s
        audio_s += chunk.duration_s
    whole_frames = 0
    whole_compute = 0.0
    for piece in pieces:
        ids = [VOCAB[char] for char in piece.text]
        frames = LEAD_FRAMES + sum(token_frames(token) for token in ids) + TAIL_FRAMES
        whole_frames += frames
        whole_compute += whole_cost(runtime.costs, len(ids), frames)
    assert first_audio is not None
    return Stream(
        first_audio_s=first_audio,
        worst_gap_s=worst_gap,
        audio_s=audio_s,
        decoded_frames=runtime.decoded_frames - frames_before,
        whole_frames=whole_frames,
        compute_s=runtime.compute_s - compute_before,
        whole_compute_s=whole_compute,
    )


def simulated_pipeline(
    rtf: float | HostCosts,
    streaming: Streaming,
    jitter: Sequence[float] = (1.0,),
    *,
    after_warm_up: Sequence[float] | None = None,
) -> tuple[Pipeline[FakeFeatures, int], ManualClock]:
    """A pipeline on a host at whole-sentence RTF `rtf` (or of the costs given), warmed up like a
    server's engine (one short synthesis measured its speed); `jitter`: SimulatedRuntime's;
    `after_warm_up`: the jitter from then on, its first factor on the first run after the warm-up
    (runs slower or faster than the speed the warm-up measured)."""
    clock = ManualClock()
    runtime = SimulatedRuntime(clock, rtf if isinstance(rtf, HostCosts) else HostCosts(rtf), jitter)
    pipeline: Pipeline[FakeFeatures, int] = Pipeline(runtime, VOCAB, streaming, join=join)
    play(pipeline, clock, [sentence(5)])
    if after_warm_up is not None:
        runtime.jitter, runtime.jitter_from = after_warm_up, len(runtime.runs)
    clock.now += 10.0
    return pipeline, clock
