"""A speech session to any upstream, by name, and one text spoken on it (the `say` command, the
Gradio client): what a caller needs when it only knows "kokoro or vllm-omni, this URL or that
SageMaker endpoint"."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from voicestream.wire.bidi import SAMPLE_RATE
from voicestream.wire.errors import ErrorCode, ProtocolError
from voicestream.wire.vllm_omni import SessionConfig

from .base import UPSTREAMS, SpeechSession, Upstream
from .errors import ConnectionLostError
from .events import Audio, Cancelled, ErrorMessage, RequestCompleted, RequestTimings, SynthesisStart
from .kokoro import BidiSession, RequestFailedError
from .vllm_omni import VllmOmniSession


def session_for(
    upstream: Upstream,
    *,
    url: str | None = None,
    endpoint: str | None = None,
    region: str | None = None,
    vllm_omni: SessionConfig | None = None,
    connect_timeout: float = 15.0,
    silence_timeout: float = 60.0,
    close_timeout: float = 10.0,
) -> SpeechSession:
    """An unopened session: to a server's `url` (WebSocket), or to a SageMaker `endpoint` in
    `region` (the AWS credentials of the standard chain sign it). `vllm_omni` is vLLM-Omni's
    session-level config (voice, language, instructions, reference audio)."""
    if upstream not in UPSTREAMS:
        choices = ", ".join(UPSTREAMS)
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"upstream must be one of {choices}, got {upstream!r}")
    if bool(url) == bool(endpoint):
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "give exactly one of a server URL or a SageMaker endpoint name")
    if endpoint and not region:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"the SageMaker endpoint {endpoint!r} needs its region")
    connect, silence, close = connect_timeout, silence_timeout, close_timeout
    if upstream == "vllm-omni":
        if url:
            return VllmOmniSession.websocket(
                url, vllm_omni, connect_timeout=connect, silence_timeout=silence, close_timeout=close
            )
        assert endpoint is not None and region is not None
        return VllmOmniSession.sagemaker(
            endpoint, region, vllm_omni, connect_timeout=connect, silence_timeout=silence, close_timeout=close
        )
    if url:
        return BidiSession.websocket(url, connect_timeout=connect, silence_timeout=silence, close_timeout=close)
    assert endpoint is not None and region is not None
    return BidiSession.sagemaker(
        endpoint, region, connect_timeout=connect, silence_timeout=silence, close_timeout=close
    )


@dataclass
class Speech:
    """One text spoken: its 16-bit mono PCM and how long each part took."""

    audio: bytes = field(repr=False)
    sample_rate: int
    timings: RequestTimings
    connect_s: float | None

    @property
    def audio_s(self) -> float:
        return len(self.audio) / (2 * self.sample_rate)


async def speak_text(
    session: SpeechSession, text: str, *, voice: str | None = None, speed: float | None = None
) -> Speech:
    """Open `session`, speak `text` as one request (PCM), close it. `RequestFailedError` when the
    server refuses or fails the text; a `SessionError` when the session breaks."""
    async with session:
        rid = await session.send(text, voice=voice, speed=speed, format="pcm")
        chunks: list[bytes] = []
        sample_rate = SAMPLE_RATE
        async with contextlib.aclosing(session.events()) as events:
            async for event in events:
                if isinstance(event, SynthesisStart) and event.request_id == rid:
                    sample_rate = event.sample_rate
                elif isinstance(event, Audio) and event.request_id == rid:
                    chunks.append(event.data)
                elif isinstance(event, RequestCompleted) and event.request_id == rid:
                    return Speech(b"".join(chunks), sample_rate, event.timings, session.connect_s)
                elif isinstance(event, ErrorMessage) and event.request_id in (rid, None):
                    raise RequestFailedError(rid, event.code, event.message)
                elif isinstance(event, Cancelled):
                    raise RequestFailedError(rid, "cancelled", "the request was cancelled")
    raise ConnectionLostError(f"{session.description} ended the session before the text was spoken")
