"""One text streamed from any speech upstream, chunk by chunk, with its metrics: the Gradio
client's core, free of Gradio so it is tested on its own.

The session is opened here, in the server process: a SageMaker endpoint is signed with this
process's AWS credentials (the standard chain), never the browser's. Closing the generator early
(the listener pressed Stop) cancels the upstream work: `cancel()` (Kokoro: its cancel message;
vLLM-Omni: the connection is closed, which aborts the request) then `close()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from voicestream.speech import (
    Audio,
    Cancelled,
    ErrorMessage,
    RequestCompleted,
    SessionError,
    SpeechSession,
    Upstream,
)
from voicestream.speech.upstream import UpstreamSettings, open_session
from voicestream.wire.bidi import PCM_SAMPLE_WIDTH, SAMPLE_RATE
from voicestream.wire.errors import CodedError
from voicestream.wire.vllm_omni import DEFAULT_VOICE as VLLM_OMNI_VOICE
from voicestream.wire.vllm_omni import SessionConfig

from .stream_metrics import StreamClock, StreamMetrics

Item = TypeVar("Item")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpstreamChoice:
    """A speech server the client offers: by URL, or a SageMaker endpoint (model + region)."""

    label: str
    upstream: Upstream
    url: str | None = None
    endpoint: str | None = None
    region: str | None = None

    def session(self, voice: str | None, language: str | None) -> SpeechSession:
        vllm_omni = None
        if self.upstream == "vllm-omni":
            vllm_omni = SessionConfig(voice=voice or VLLM_OMNI_VOICE, language=language or "Auto")
        where = UpstreamSettings(
            self.upstream,
            url=self.url,
            endpoint=self.endpoint,
            region=self.region,
            vllm_omni=vllm_omni,
            silence_timeout=60.0,
        )
        return open_session(where)


def upstream_choices(
    kokoro_url: str | None = None,
    vllm_omni_url: str | None = None,
    endpoint: str | None = None,
    endpoint_upstream: Upstream = "vllm-omni",
    region: str | None = None,
) -> list[UpstreamChoice]:
    """The choices for what is configured, in this order; at least one is needed."""
    choices: list[UpstreamChoice] = []
    if kokoro_url:
        choices.append(UpstreamChoice(f"Kokoro server ({kokoro_url})", "kokoro", url=kokoro_url))
    if vllm_omni_url:
        choices.append(UpstreamChoice(f"vLLM-Omni server ({vllm_omni_url})", "vllm-omni", url=vllm_omni_url))
    if endpoint:
        if not region:
            raise CodedError(f"the SageMaker endpoint {endpoint!r} needs a region", code="invalid_arguments")
        model = "Qwen3-TTS on vLLM-Omni" if endpoint_upstream == "vllm-omni" else "Kokoro"
        choices.append(
            UpstreamChoice(
                f"SageMaker {endpoint} in {region} ({model})", endpoint_upstream, endpoint=endpoint, region=region
            )
        )
    if not choices:
        raise CodedError(
            "configure at least one upstream: a Kokoro URL, a vLLM-Omni URL or an endpoint", code="invalid_arguments"
        )
    return choices


Chunk = tuple[bytes, StreamMetrics]
"""PCM to play now (possibly empty: a metrics-only update), and the run's metrics so far."""


async def stream_speech(
    choice: UpstreamChoice,
    text: str,
    *,
    voice: str | None = None,
    language: str | None = None,
    min_chunk_s: float = 0.25,
    open_session: Callable[[UpstreamChoice, str | None, str | None], SpeechSession] | None = None,
) -> AsyncGenerator[Chunk]:
    """Speak `text` on a new session: the first audio at once, then pieces of at least
    `min_chunk_s` (a browser player wants fewer, larger pieces than the wire's 40 ms frames).
    The last item has the final metrics (`status` complete, or error with the reason raised
    after it as a `CodedError`)."""
    clock = StreamClock(choice.label, SAMPLE_RATE * PCM_SAMPLE_WIDTH)
    session = (open_session or UpstreamChoice.session)(choice, voice, language)
    pending = bytearray()
    batch = int(min_chunk_s * SAMPLE_RATE) * PCM_SAMPLE_WIDTH
    finished = False
    try:
        await session.connect()
        clock.connected(session.connect_s)
        yield b"", clock.metrics()
        rid = await session.send(text, voice=voice if choice.upstream == "kokoro" else None, format="pcm")
        async with contextlib.aclosing(session.events()) as events:
            async for event in events:
                if isinstance(event, Audio) and event.request_id == rid:
                    clock.chunk(len(event.data))
                    pending += event.data
                    if len(clock.arrivals) == 1 or len(pending) >= batch:
                        yield bytes(pending), clock.metrics()
                        pending.clear()
                elif isinstance(event, RequestCompleted) and event.request_id == rid:
                    break
                elif isinstance(event, ErrorMessage) and event.request_id in (rid, None):
                    raise CodedError(
                        f"the speech server refused the text: [{event.code}] {event.message}", code=event.code
                    )
                elif isinstance(event, Cancelled):
                    raise CodedError("the speech server cancelled the request", code="cancelled")
        finished = True
        clock.end("complete")
        yield bytes(pending), clock.metrics()
    except CodedError as error:
        clock.end(f"error: {error}")
        yield bytes(pending), clock.metrics()
        raise
    finally:
        if not finished:
            # Stopped by the listener (the generator is closed) or failed: stop the server's work.
            with contextlib.suppress(SessionError, OSError):
                await session.cancel()
        with contextlib.suppress(SessionError, OSError):
            await session.close()


async def with_idle_ticks(
    items: AsyncIterator[Item],
    has_audio: Callable[[Item], bool],
    *,
    every_s: float,
    per_audio: int,
) -> AsyncGenerator[Item | None]:
    """`items`, and None every `every_s` that `items` is quiet after an item `has_audio`, at most
    `per_audio` times after each. Closing this closes `items` (its upstream session)."""
    pending: asyncio.Task[Item] | None = None
    ticks_left = 0
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait({pending}, timeout=every_s if ticks_left else None)
            if not done:
                ticks_left -= 1
                yield None
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            ticks_left = per_audio if has_audio(item) else ticks_left
            yield item
    finally:
        await _close(pending, items)


async def until_stopped(items: AsyncIterator[Item], stop: asyncio.Event) -> AsyncGenerator[Item]:
    """`items` until they end or `stop` is set, waiting on both: a stop lands while the upstream
    is quiet too. Closing this (or the stop) closes `items` (its upstream session)."""
    stopping = asyncio.ensure_future(stop.wait())
    pending: asyncio.Task[Item] | None = None
    try:
        while not stop.is_set():
            pending = pending or asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait({pending, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if pending not in done:
                return
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        stopping.cancel()
        await _close(pending, items)


async def _close(pending: asyncio.Task[Item] | None, items: AsyncIterator[Item]) -> None:
    """Cancels the item still awaited, if any, then closes `items` (its upstream session)."""
    if pending is not None:
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await pending
    aclose = getattr(items, "aclose", None)
    if aclose is not None:
        await aclose()


class StopButtons:
    """The way from a page session's Stop button to that session's run.

    The run itself ends the stream and writes its last status: Gradio's `cancels=` sends the
    cancel and the Stop button's own output concurrently, and a run's update already on its way
    wrote "running" over "stopped" (seen in CI, on a loaded host), for a run that had ended.
    Both sides run in the server's event loop."""

    def __init__(self) -> None:
        self._runs: dict[str, asyncio.Event] = {}

    @contextlib.contextmanager
    def run(self, session: str) -> Iterator[asyncio.Event]:
        """The stop request of `session`'s run, from entry until exit (however it exits)."""
        stop = self._runs[session] = asyncio.Event()
        try:
            yield stop
        finally:
            if self._runs.get(session) is stop:
                del self._runs[session]

    def press(self, session: str) -> bool:
        """Asks `session`'s run to stop; False when it has none going."""
        stop = self._runs.get(session)
        if stop is None:
            return False
        stop.set()
        return True
