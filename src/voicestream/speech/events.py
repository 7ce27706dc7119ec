"""What `BidiSession.events()` yields, in server order, and the per-request timings it records.

Control messages the client sees unchanged are the wire contract's own types (`wire.bidi`);
`Audio` and `RequestCompleted` are client-side views: audio attributed to a request, and the
server's completion figures joined with the client's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from voicestream.wire.bidi import Cancelled, Flushed, Pong, Queued, SessionClosed, SynthesisStart, Words
from voicestream.wire.errors import ErrorMessage
from voicestream.wire.words import WordTiming

Outcome = Literal["pending", "complete", "error", "cancelled"]


@dataclass
class RequestTimings:
    """One request as the client saw it. Times are `time.perf_counter()` seconds.

    Filled in as frames arrive: `sent_at` when `send` wrote the message, `started_at` at its
    `synthesis_start`, `first_audio_at` at its first audio frame, `completed_at` at its
    `synthesis_complete` (or at the error/cancellation that ended it, see `outcome`).
    """

    request_id: str
    text: str
    sent_at: float
    started_at: float | None = None
    first_audio_at: float | None = None
    completed_at: float | None = None
    audio_bytes: int = 0
    audio_frames: int = 0
    outcome: Outcome = "pending"
    server_audio_ms: float | None = None
    server_first_audio_ms: float | None = None
    server_synth_ms: float | None = None
    format: str | None = None  # from synthesis_start
    sample_rate: int | None = None
    words: list[WordTiming] = field(default_factory=list)
    """Word timings received for this request (seconds of its audio), in order."""

    @property
    def audio_s(self) -> float | None:
        """Seconds of audio received for this request: exact for pcm, wav and G.711 (counted from
        the bytes, so also for a cancelled request); for mp3 the server's figure once complete."""
        if self.format in ("pcm", "wav") and self.sample_rate:
            header = 44 if self.format == "wav" and self.audio_bytes >= 44 else 0
            return (self.audio_bytes - header) / 2 / self.sample_rate
        if self.format in ("mulaw", "alaw") and self.sample_rate:
            return self.audio_bytes / self.sample_rate  # one byte per sample
        return None if self.server_audio_ms is None else self.server_audio_ms / 1000

    @property
    def first_audio_s(self) -> float | None:
        """Seconds from send to the first audio byte (the latency a listener hears)."""
        return None if self.first_audio_at is None else self.first_audio_at - self.sent_at

    @property
    def total_s(self) -> float | None:
        """Seconds from send to the end of the request."""
        return None if self.completed_at is None else self.completed_at - self.sent_at


@dataclass(frozen=True, slots=True)
class Audio:
    """One audio frame, attributed to the request whose synthesis_start came last."""

    request_id: str
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class RequestCompleted:
    """The server's `synthesis_complete` plus this request's client-side timings."""

    request_id: str
    audio_bytes: int
    audio_ms: float
    first_audio_ms: float | None
    synth_ms: float
    timings: RequestTimings


Event = (
    SynthesisStart
    | Words
    | Audio
    | RequestCompleted
    | ErrorMessage
    | Cancelled
    | Flushed
    | Pong
    | SessionClosed
    | Queued
)

__all__ = [
    "Audio",
    "Cancelled",
    "ErrorMessage",
    "Event",
    "Flushed",
    "Outcome",
    "Pong",
    "Queued",
    "RequestCompleted",
    "RequestTimings",
    "SessionClosed",
    "SynthesisStart",
    "Words",
]
