"""Speech session clients: `BidiSession` (Kokoro) and `VllmOmniSession` (Qwen3-TTS on vLLM-Omni),
both `SpeechSession`s, over `WebSocketTransport` or `SageMakerTransport`.

    async with BidiSession.websocket("ws://127.0.0.1:8080") as session:
        for sentence in sentences:
            await session.send(sentence)          # returns at once: pipelined
        async for event in session.events():      # typed events, in server order
            ...

`SageMakerTransport` needs the `aws` extra; it is imported only when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from voicestream.wire.bidi import encode_client_message

from .base import SPEECH_MODELS, UPSTREAM_OF, UPSTREAMS, SpeechModel, SpeechSession, Upstream
from .errors import (
    ConnectionLostError,
    ProtocolViolationError,
    SessionClosedError,
    SessionConnectError,
    SessionError,
    SessionTimeoutError,
    StreamFailedError,
)
from .events import (
    Audio,
    Cancelled,
    ErrorMessage,
    Event,
    Flushed,
    Outcome,
    Pong,
    Queued,
    RequestCompleted,
    RequestTimings,
    SessionClosed,
    SynthesisStart,
    Words,
)
from .kokoro import BidiSession, RequestFailedError, SynthesisResult
from .lifecycle import SessionLifecycle, SessionState
from .transport import FrameMode, Payload, Transport
from .upstream import UpstreamSettings, open_session
from .vllm_omni import VllmOmniSession
from .websocket import WebSocketTransport, bidi_url, route_url

if TYPE_CHECKING:
    from .sagemaker import SageMakerTransport


def __getattr__(name: str) -> Any:
    if name == "SageMakerTransport":
        from .sagemaker import SageMakerTransport

        return SageMakerTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SPEECH_MODELS",
    "UPSTREAMS",
    "UPSTREAM_OF",
    "Audio",
    "BidiSession",
    "Cancelled",
    "ConnectionLostError",
    "ErrorMessage",
    "Event",
    "Flushed",
    "FrameMode",
    "Outcome",
    "Payload",
    "Pong",
    "ProtocolViolationError",
    "Queued",
    "RequestCompleted",
    "RequestFailedError",
    "RequestTimings",
    "SageMakerTransport",
    "SessionClosed",
    "SessionClosedError",
    "SessionConnectError",
    "SessionError",
    "SessionLifecycle",
    "SessionState",
    "SessionTimeoutError",
    "SpeechModel",
    "SpeechSession",
    "StreamFailedError",
    "SynthesisResult",
    "SynthesisStart",
    "Transport",
    "Upstream",
    "UpstreamSettings",
    "VllmOmniSession",
    "WebSocketTransport",
    "Words",
    "bidi_url",
    "encode_client_message",
    "open_session",
    "route_url",
]
