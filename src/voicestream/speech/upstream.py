"""A speech session to any upstream, by name, and one text spoken on it (the `say` command, the
Gradio client): what a caller needs when it only knows "kokoro or vllm-omni, this URL or that
SageMaker endpoint"."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from voicestream.wire.bidi import SAMPLE_RATE, AudioFormat, audio_unit_bytes
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.vllm_omni import SessionConfig

from .base import UPSTREAMS, SpeechSession, Upstream
from .errors import ConnectionLostError
from .events import Audio, Cancelled, ErrorMessage, RequestCompleted, RequestTimings, SynthesisStart
from .kokoro import BidiSession, RequestFailedError
from .vllm_omni import VllmOmniSession


@dataclass(frozen=True)
class UpstreamSettings:
    """Where a speech session goes and how it behaves: all `open_session` needs.

    Exactly one of `url` (a server, over WebSocket) or `endpoint` (a SageMaker endpoint in
    `region`, signed with the standard AWS credential chain). `vllm_omni` is vLLM-Omni's
    session-level config (voice, language, instructions, reference audio); `words` asks Kokoro
    for word timings (vLLM-Omni has none). `silence_timeout` None keeps the session's own default
    (vLLM-Omni's is longer: its first request may wait for torch.compile). `http_client_factory`
    makes each SageMaker connection's HTTP client (tests pass a fake SageMaker's).
    """

    upstream: Upstream = "kokoro"
    url: str | None = None
    endpoint: str | None = None
    region: str | None = None
    vllm_omni: SessionConfig | None = None
    words: bool = False
    connect_timeout: float = 15.0
    silence_timeout: float | None = None
    close_timeout: float = 10.0
    http_client_factory: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.upstream not in UPSTREAMS:
            choices = ", ".join(UPSTREAMS)
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"upstream must be one of {choices}, got {self.upstream!r}")
        if bool(self.url) == bool(self.endpoint):
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, "give exactly one of a server URL or a SageMaker endpoint name"
            )
        if self.endpoint and not self.region:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"the SageMaker endpoint {self.endpoint!r} needs its region")


def open_session(settings: UpstreamSettings) -> SpeechSession:
    """An unopened session to the upstream `settings` name: the one place that chooses between
    `BidiSession` and `VllmOmniSession`, WebSocket and SageMaker."""
    s = settings
    options: dict[str, Any] = {"connect_timeout": s.connect_timeout, "close_timeout": s.close_timeout}
    if s.silence_timeout is not None:
        options["silence_timeout"] = s.silence_timeout
    if s.upstream == "vllm-omni":
        if s.url:
            return VllmOmniSession.websocket(s.url, s.vllm_omni, **options)
        assert s.endpoint and s.region  # checked in __post_init__
        return VllmOmniSession.sagemaker(
            s.endpoint, s.region, s.vllm_omni, http_client_factory=s.http_client_factory, **options
        )
    if s.url:
        return BidiSession.websocket(s.url, words=s.words, **options)
    assert s.endpoint and s.region  # checked in __post_init__
    if s.http_client_factory is not None:
        options["http_client"] = s.http_client_factory()
    return BidiSession.sagemaker(s.endpoint, s.region, words=s.words, **options)


@dataclass
class Speech:
    """One text spoken: its mono audio (16-bit PCM, or G.711 codes) and how long each part took."""

    audio: bytes = field(repr=False)
    sample_rate: int
    timings: RequestTimings
    connect_s: float | None
    format: AudioFormat = "pcm"

    @property
    def audio_s(self) -> float:
        return len(self.audio) / (audio_unit_bytes(self.format) * self.sample_rate)


async def speak_text(
    session: SpeechSession,
    text: str,
    *,
    voice: str | None = None,
    speed: float | None = None,
    format: AudioFormat = "pcm",
    sample_rate: int | None = None,
    lexicon: Mapping[str, str] | None = None,
    phonemes: bool = False,
) -> Speech:
    """Open `session`, speak `text` as one request (PCM, or the raw G.711 `format`; at
    `sample_rate`, default the format's), close it. `RequestFailedError` when the server
    refuses or fails the text; a `SessionError` when the session breaks."""
    if format not in ("pcm", "mulaw", "alaw"):
        raise ValueError(f"speak_text collects raw audio: pcm, mulaw or alaw, not {format!r}")
    async with session:
        rid = await session.send(
            text, voice=voice, speed=speed, format=format, sample_rate=sample_rate, lexicon=lexicon, phonemes=phonemes
        )
        chunks: list[bytes] = []
        sample_rate = SAMPLE_RATE
        async with contextlib.aclosing(session.events()) as events:
            async for event in events:
                if isinstance(event, SynthesisStart) and event.request_id == rid:
                    sample_rate = event.sample_rate
                elif isinstance(event, Audio) and event.request_id == rid:
                    chunks.append(event.data)
                elif isinstance(event, RequestCompleted) and event.request_id == rid:
                    return Speech(b"".join(chunks), sample_rate, event.timings, session.connect_s, format)
                elif isinstance(event, ErrorMessage) and event.request_id in (rid, None):
                    raise RequestFailedError(rid, event.code, event.message)
                elif isinstance(event, Cancelled):
                    raise RequestFailedError(rid, "cancelled", "the request was cancelled")
    raise ConnectionLostError(f"{session.description} ended the session before the text was spoken")
