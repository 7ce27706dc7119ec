"""`SpeechSession`: what every caller of a speech session uses, whichever model answers.

`run_bidi`/`run_batch`, the speak function, the deploy-validate and benchmark tasks, the `say`
command and the Gradio client talk to a session only through this interface, so the same code
drives Kokoro (`BidiSession`, docs/protocol.md) and Qwen3-TTS on vLLM-Omni (`VllmOmniSession`,
docs/vllm-omni.md). Both yield the same typed events (`events.Event`) and record the same
per-request timings.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from types import TracebackType
from typing import Literal, Protocol, Self, get_args

from voicestream.wire.bidi import AudioFormat

from .events import Event, RequestTimings

SpeechModel = Literal["kokoro", "qwen3-tts"]
"""The speech models voicestream deploys: Kokoro-82M on our server, Qwen3-TTS on vLLM-Omni."""
SPEECH_MODELS: tuple[SpeechModel, ...] = get_args(SpeechModel)

Upstream = Literal["kokoro", "vllm-omni"]
"""The server protocol a client speaks: our Kokoro bidi route, or vLLM-Omni's speech stream."""
UPSTREAMS: tuple[Upstream, ...] = get_args(Upstream)

UPSTREAM_OF: dict[SpeechModel, Upstream] = {"kokoro": "kokoro", "qwen3-tts": "vllm-omni"}


class SpeechSession(Protocol):
    """One persistent, pipelined speech session (see `BidiSession` for the reference semantics).

    `send` returns a request id at once; `events()` yields `SynthesisStart`, `Audio`,
    `RequestCompleted`, `ErrorMessage`, `Cancelled`, `Pong` and `SessionClosed` in server order;
    `cancel` stops all unfinished requests, or the one named (answered by `Cancelled`, which
    lists what was dropped); `close` ends the session.
    """

    timings: dict[str, RequestTimings]
    """Every request sent on this session, in send order, with its client-side timings."""
    connect_s: float | None
    """Seconds `connect()` took."""

    @property
    def description(self) -> str:
        """Where the session goes, for logs and error messages."""
        ...

    @property
    def is_open(self) -> bool:
        """Connected, and neither closed nor failed nor ended: `send` would work."""
        ...

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def send(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: AudioFormat | None = None,
        request_id: str | None = None,
        words: bool | None = None,
        sample_rate: int | None = None,
        lexicon: Mapping[str, str] | None = None,
        phonemes: bool = False,
    ) -> str: ...

    async def cancel(self, request_id: str | None = None) -> None: ...

    async def ping(self) -> None: ...

    def events(self) -> AsyncGenerator[Event]: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
