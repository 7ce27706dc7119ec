"""What a listener of one streamed utterance experiences, as numbers (the Gradio client's panel).

`StreamClock` is fed the moments of one run (the click, the session open, each audio chunk's
arrival, the end) and `metrics()` turns them into:

- connect_ms: opening the session (TCP/TLS, WebSocket or SageMaker stream, vLLM-Omni's config);
- first_audio_ms: from the click to the first audio chunk (what the listener waits);
- real_time_factor: the run's duration over the audio's (below 1: faster than it plays);
- jitter_p50_ms / jitter_p95_ms: the gaps between chunk arrivals, median and 95th percentile
  (what a player's buffer has to absorb);
- end_to_end_ms: from the click to the last byte.

Standard library only: the numbers are small, and tests compute them by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from voicestream.stats import percentile


@dataclass(frozen=True)
class StreamMetrics:
    upstream: str
    connect_ms: float | None
    first_audio_ms: float | None
    audio_ms: float
    real_time_factor: float | None
    jitter_p50_ms: float | None
    jitter_p95_ms: float | None
    end_to_end_ms: float | None
    chunks: int
    status: str

    def as_dict(self) -> dict[str, Any]:
        return {key: round(value, 1) if isinstance(value, float) else value for key, value in asdict(self).items()}


@dataclass
class StreamClock:
    """The moments of one run, in seconds of `clock` (`time.perf_counter` by default)."""

    upstream: str
    bytes_per_second: int
    clock: Callable[[], float] = time.perf_counter
    started_at: float = 0.0
    connect_s: float | None = None
    arrivals: list[float] = field(default_factory=list)
    audio_bytes: int = 0
    ended_at: float | None = None
    status: str = "running"

    def __post_init__(self) -> None:
        self.started_at = self.clock()

    def connected(self, seconds: float | None) -> None:
        self.connect_s = seconds

    def chunk(self, size: int) -> None:
        self.arrivals.append(self.clock())
        self.audio_bytes += size

    def end(self, status: str) -> None:
        if self.ended_at is None:
            self.ended_at = self.clock()
            self.status = status

    def metrics(self) -> StreamMetrics:
        now = self.ended_at if self.ended_at is not None else self.clock()
        audio_ms = self.audio_bytes / self.bytes_per_second * 1000
        elapsed_ms = (now - self.started_at) * 1000
        gaps = [(later - earlier) * 1000 for earlier, later in zip(self.arrivals, self.arrivals[1:], strict=False)]
        return StreamMetrics(
            upstream=self.upstream,
            connect_ms=None if self.connect_s is None else self.connect_s * 1000,
            first_audio_ms=(self.arrivals[0] - self.started_at) * 1000 if self.arrivals else None,
            audio_ms=audio_ms,
            real_time_factor=elapsed_ms / audio_ms if audio_ms > 0 else None,
            jitter_p50_ms=percentile(gaps, 50) if gaps else None,
            jitter_p95_ms=percentile(gaps, 95) if gaps else None,
            end_to_end_ms=elapsed_ms if self.ended_at is not None else None,
            chunks=len(self.arrivals),
            status=self.status,
        )
