"""One synthesis pipeline over any split runtime: the per-piece loop every engine runs.

Per phoneme piece (engine/text/frontend.py makes them): the vocabulary ids and word spans
(word_timings.py), the voice's style row, the listener as the piece starts (listener.py), the
encoder once (a long piece's head first, when the runtime can join two encodings: lookahead.py),
then the decoder over windows of frames (windows.py), each sized when it is asked for
(pacing.py), stitched, the leading silence cut to `lead_in_frames`, and yielded as an
`AudioChunk` with the words that start in it. One window per `next()`: a consumer that stops
iterating (a cancelled request) stops the work between windows.

What differs between engines is only the runtime that runs the model's two halves
(`SplitRuntime`): the int8 ONNX graphs on CPU (onnx/runtime.py), kokoro's KModel in PyTorch
(torch/split.py). docs/engine.md has the design.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from voicestream.engine.base import AudioChunk, FloatAudio
from voicestream.engine.streaming.listener import Listener
from voicestream.engine.streaming.lookahead import LookaheadPlan, frames_before, head_split
from voicestream.engine.streaming.pacing import MARGIN, DecodeSpeed, EncodeSpeed, WindowPacer, checked_margin
from voicestream.engine.streaming.windows import (
    SAMPLES_PER_FRAME,
    Stitcher,
    Window,
    WindowPlan,
    ahead_frames,
    core_sizes,
    cores,
    window_around,
)
from voicestream.engine.streaming.word_timings import FRAME_S, tokenize, words_starting_in
from voicestream.engine.text.g2p import Phonemes

# Frames (25 ms) of the leading pad's silence kept before a piece's first phoneme: speech starts
# that much after the first sample (Kokoro's ~0.3-0.45 s lead-in is otherwise heard as latency).
LEAD_IN_FRAMES: Final = 4


class Features(Protocol):
    """A piece's encoding, in the runtime's own types: the decoder's inputs over its frames."""

    @property
    def frames(self) -> int: ...


F = TypeVar("F", bound=Features)
S = TypeVar("S")  # a voice's style row, in the runtime's own type
S_in = TypeVar("S_in", contravariant=True)


class SplitRuntime(Protocol[F, S_in]):
    """A model cut in two: encode a piece once, decode it window by window."""

    def encode(self, ids: list[int], style: S_in, speed: float) -> F:
        """The encoder over the vocabulary ids `ids` (pads not included)."""
        ...

    def durations(self, features: F) -> npt.NDArray[np.int64]:
        """Frames per token [1, tokens + 2], the pads included."""
        ...

    def window_decoder(self) -> Callable[[F, Window], FloatAudio]:
        """A decoder for one piece's windows, asked for in order: each call gives the audio of
        the window's generator span (600 samples a frame). It may carry state from window to
        window (the ONNX generator's norm statistics)."""
        ...


Join = Callable[[F, F, int], F]
"""(head, whole, token) -> the head's features before `token`, the whole piece's from it."""


@dataclass(frozen=True, slots=True)
class Streaming:
    """How the pipeline streams a piece. `windows=None`: one decoder run over the whole piece.
    `lookahead`: how a long piece's head is encoded first (None: never). `lead_in_frames`: frames
    of the leading silence kept before a piece's first phoneme (None: all of it). `pacing`: cut
    later windows to what the engine decodes while the listener's audio plays, `pacing_margin`
    the share of that audio a window may take."""

    windows: WindowPlan | None
    lookahead: LookaheadPlan | None = None
    lead_in_frames: int | None = None
    pacing: bool = True
    pacing_margin: float = MARGIN

    def __post_init__(self) -> None:
        checked_margin(self.pacing_margin)
        if self.lead_in_frames is not None and self.lead_in_frames < 0:
            raise ValueError(f"lead_in_frames must be >= 0, got {self.lead_in_frames}")


@dataclass(frozen=True, slots=True)
class DecodedWindow(Generic[F]):
    """A decoded window: the samples to emit now, and the features it was decoded from (their
    durations place its words)."""

    window: Window
    samples: FloatAudio
    features: F


class _WindowDecoder(Generic[F, S]):
    """One piece's windows in order: the runtime's decoder (and whatever it carries from window
    to window), the audio stitched, and with a pace each run timed."""

    def __init__(
        self, runtime: SplitRuntime[F, S], crossfade: int, start: int, pace: WindowPacer | None, plan: WindowPlan
    ) -> None:
        self._decode = runtime.window_decoder()
        self._pace = pace
        self._stitcher = Stitcher(SAMPLES_PER_FRAME, crossfade, start)
        self.limit = pace.limit(plan) if pace is not None else None

    def decode(self, features: F, window: Window) -> DecodedWindow[F]:
        pace = self._pace
        started = pace.now() if pace is not None else 0.0
        audio = self._decode(features, window)
        if pace is not None:
            pace.decoded(window.frames, pace.now() - started)
        return DecodedWindow(window, self._stitcher.push(window, audio), features)


def decode_windows(
    runtime: SplitRuntime[F, S],
    features: F,
    plan: WindowPlan | None,
    start: int = 0,
    pace: WindowPacer | None = None,
    *,
    ahead: int = 0,
    behind: bool = False,
) -> Iterator[DecodedWindow[F]]:
    """Each window as soon as it is decoded (one window when `plan` is None), the audio of frames
    [start, frames): frames before `start` (leading silence) are not emitted, and with a plan not
    decoded either, except as the first window's left context. With `pace`, each window's size is
    decided when it is asked for, cut to the listener's audio, the first one planned on the
    measured speeds, and the piece is one run when that delays no audio (pacing.py). `ahead`,
    `behind`: the listener as the piece starts (windows.core_sizes)."""
    if plan is None:
        window = Window(start, features.frames, 0, features.frames)
        audio = runtime.window_decoder()(features, window)
        yield DecodedWindow(window, Stitcher(SAMPLES_PER_FRAME, 0, start).push(window, audio), features)
        return
    decoder = _WindowDecoder(runtime, plan.crossfade, start, pace, plan)
    total = features.frames
    if pace is not None and start < total:
        # Nothing playing yet: the first window is as large as the measured speed needs for the
        # windows after it to keep the listener in audio (pacing.planned_first); when no size
        # does (a host about as slow as real time), the largest.
        grow = pace.first_growth(plan, total - start, len(runtime.durations(features)[0]) - 2)
        ahead = max(ahead, plan.largest - plan.first if grow is None else grow)
        # Asked once the piece is encoded: the audio ahead is what is left after the encoder.
        whole = window_around((start, total), total, plan, first=True)
        first_window = window_around((start, min(total, start + plan.first + ahead)), total, plan, first=True)
        if pace.decodes_whole(whole.frames, first_window.frames):
            yield decoder.decode(features, whole)
            return
    planned = cores(total, plan, start=start, limit=decoder.limit, ahead=ahead, behind=behind)
    for index, core in enumerate(planned):
        yield decoder.decode(features, window_around(core, features.frames, plan, first=index == 0))


def decode_windows_after_head(
    runtime: SplitRuntime[F, S],
    head: F,
    join_frame: int,
    rest: Callable[[], F],
    plan: WindowPlan,
    start: int = 0,
    pace: WindowPacer | None = None,
    *,
    ahead: int = 0,
    rest_tokens: int = 0,
    head_tokens: int = 0,
) -> Iterator[DecodedWindow[F]]:
    """Windows decoded from `head` (a shorter encoding, exact up to `join_frame`) as long as
    everything they compute lies before the join, then from `rest()`'s features, one window
    schedule across both (lookahead.py). `rest()` (an encoder run over `rest_tokens`) is called
    once: with `pace`, as soon as the listener's audio ahead covers it and a first-size window
    after it (so it never outlasts what the head's windows buffered), else when the first window
    past the join is asked for; the window after it is sized knowing what the encoding took. No
    window sees the head's frames past the join, so the switch is an ordinary seam and the join
    itself lies inside a window decoded from the joined features. `ahead`: frames the first
    window grows by (core_sizes)."""
    decoder = _WindowDecoder(runtime, plan.crossfade, start, pace, plan)
    head_end = max(start, join_frame - plan.context - plan.frontend_context)
    if pace is not None:
        # The piece's frames, the head's rate of frames per token carried on to the whole piece.
        frames = round((join_frame - start) * rest_tokens / max(1, head_tokens))
        grow = pace.first_growth(plan, frames, rest_tokens, rest_tokens=rest_tokens, encode_by=head_end - start)
        if grow is None:
            # The head's audio cannot cover the whole piece's encoding on this host: encode it
            # now, before the first window, rather than stall the listener after it.
            yield from decode_windows(runtime, rest(), plan, start, pace)
            return
        ahead = max(ahead, grow)
    sizes = core_sizes(plan, ahead=ahead)
    first = True
    for core in cores(head_end, plan, start=start, sizes=sizes, limit=decoder.limit, open_end=True):
        yield decoder.decode(head, window_around(core, join_frame, plan, first=first))
        first = False
        start = core[1]
        if pace is not None and pace.affords_encode(rest_tokens, plan):
            break  # asked for the next window: the audio ahead now covers the encoding
    joined = rest()
    for core in cores(joined.frames, plan, start=start, sizes=sizes, limit=decoder.limit):
        yield decoder.decode(joined, window_around(core, joined.frames, plan, first=first))
        first = False


class Pipeline(Generic[F, S]):
    """The loop of one engine over its runtime; safe to run from several threads at once (the
    decode speed it measures is shared by its syntheses)."""

    def __init__(
        self,
        runtime: SplitRuntime[F, S],
        vocab: Mapping[str, int],
        streaming: Streaming,
        *,
        join: Join[F] | None = None,
    ) -> None:
        """`join`: how the runtime joins a head's encoding to the whole piece's (lookahead.py);
        None: the runtime cannot, and every piece is encoded whole."""
        self.runtime = runtime
        self.vocab = vocab
        self.streaming = streaming
        self._join = join
        self.decode_speed = DecodeSpeed()
        self.encode_speed = EncodeSpeed()

    def run(
        self, pieces: Sequence[Phonemes], style_of: Callable[[Phonemes, list[int]], S], speed: float, listener: Listener
    ) -> Generator[AudioChunk, None, None]:
        """The audio of `pieces` in order, window by window. `style_of(piece, ids)`: the voice's
        style row for a piece (the runtimes index the voice table alike, by length, but not by
        the same length: each keeps its reference's rule)."""
        offset_s = 0.0  # audio of the pieces before: word times count from the call's first sample
        streaming = self.streaming
        pace = (
            WindowPacer(
                self.decode_speed, listener, FRAME_S, margin=streaming.pacing_margin, encode_speed=self.encode_speed
            )
            if streaming.pacing
            else None
        )
        for piece in pieces:
            ids, words = tokenize(piece, self.vocab)
            if not ids:  # nothing the model's vocabulary speaks
                continue
            style = style_of(piece, ids)
            emitted = 0
            for decoded in self.piece_windows(ids, style, speed, listener, pace):
                window = decoded.window
                # Seconds of the piece's frame 0 (window.start - emitted: the lead-in frames not emitted).
                start_s = offset_s - (window.start - emitted) * FRAME_S
                durations = self.runtime.durations(decoded.features)
                timed = words_starting_in(words, durations, window.start, window.end, start_s)
                emitted += window.end - window.start
                yield AudioChunk(samples=decoded.samples, words=timed)
            offset_s += emitted * FRAME_S

    def piece_windows(
        self, ids: list[int], style: S, speed: float, listener: Listener, pace: WindowPacer | None
    ) -> Iterator[DecodedWindow[F]]:
        """The piece's decoded windows: after a head encoding when the piece is long (lookahead.py),
        without the leading silence beyond `lead_in_frames`."""
        runtime, plan = self.runtime, self.streaming.windows
        # The listener as the piece starts: the audio still playing (the sentences and pieces
        # before it) and whether the server is behind it.
        ahead = ahead_frames(listener.ahead_s(), FRAME_S)
        behind = listener.behind() if pace is None else pace.behind()
        # The head is encoded first for the first audio's sake. When the audio still playing covers
        # the whole piece's encoding and a first window after it (measured speeds: pacing.py;
        # unpaced, a first window's worth of audio, 300 ms, which the encoding of even 50 words fits
        # in: docs/engine-evidence.md, "Lookahead"), the head's would be spent for nothing;
        # likewise when the server is behind (a first window of 72+ frames, which waits for a
        # worker anyway).
        join = self._join
        if pace is None:
            covered = ahead >= plan.first if plan is not None else True
        else:
            covered = plan is None or pace.affords_encode(len(ids), plan)
        wants_head = plan is not None and join is not None and not covered and not behind
        head = head_split(ids, self.streaming.lookahead) if wants_head else None

        def encode(part: list[int]) -> F:
            started = pace.now() if pace is not None else 0.0
            features = runtime.encode(part, style, speed)
            if pace is not None:
                pace.encoded(len(part), pace.now() - started)
            return features

        if plan is None or head is None or join is None:
            features = encode(ids)
            first_frame = self._first_frame(features)
            return decode_windows(runtime, features, plan, first_frame, pace, ahead=ahead, behind=behind)
        head_features = encode(ids[: head.end])

        def whole_piece() -> F:
            return join(head_features, encode(ids), head.join)

        join_frame = frames_before(runtime.durations(head_features), head.join)
        first_frame = self._first_frame(head_features)
        return decode_windows_after_head(
            runtime,
            head_features,
            join_frame,
            whole_piece,
            plan,
            first_frame,
            pace,
            rest_tokens=len(ids),
            head_tokens=head.join,
        )

    def _first_frame(self, features: F) -> int:
        """The first frame to emit: the leading pad's frames are silence (Kokoro predicts ~0.3-0.45 s
        of it before every sentence), of which only the last `lead_in_frames` are kept."""
        lead_in_frames = self.streaming.lead_in_frames
        if lead_in_frames is None:
            return 0
        return max(0, int(self.runtime.durations(features)[0, 0]) - lead_in_frames)
