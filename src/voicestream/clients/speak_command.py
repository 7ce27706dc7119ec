"""`voicestream speak`: text (an argument, or stdin as it arrives) through the chunker and ONE
bidi session, the audio played or written as it comes back.

Piped input is read as it is written (an LLM's tokens: `llm ... | voicestream speak --play`),
so the first clause is spoken while the rest is still being generated: this is `run_bidi`,
the speak function's own core, with stdin as its text source.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, TextIO

from voicestream.clients.audio_out import AudioSink
from voicestream.speak.run import SessionFactory, SpeakOptions, run_bidi
from voicestream.speak.sources import TextSource
from voicestream.speech import UpstreamSettings, open_session
from voicestream.wire.errors import CodedError
from voicestream.wire.speak import Done, ReplyError, SentenceAudio

READ_BYTES = 4096


class StdinSource:
    """Text deltas from a byte stream, each as soon as the writer flushed it.

    A daemon thread does the blocking reads, so an early end (the session failed) never waits
    for the writer to close the pipe."""

    name = "stdin"

    def __init__(self, stream: BinaryIO) -> None:
        self._fd = stream.fileno()

    async def stream(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[bytes] = asyncio.Queue()  # b"": end of input
        threading.Thread(target=self._read, args=(loop, pieces), name="speak-stdin", daemon=True).start()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while piece := await pieces.get():
            text = decoder.decode(piece)
            if text:
                yield text
        rest = decoder.decode(b"", final=True)
        if rest:
            yield rest

    def _read(self, loop: asyncio.AbstractEventLoop, pieces: asyncio.Queue[bytes]) -> None:
        try:
            with contextlib.suppress(OSError):
                while piece := os.read(self._fd, READ_BYTES):
                    loop.call_soon_threadsafe(pieces.put_nowait, piece)
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening any more
                loop.call_soon_threadsafe(pieces.put_nowait, b"")


@dataclass(frozen=True, slots=True)
class GivenText:
    """A text given whole (a command-line argument): the chunker still cuts it for pipelining."""

    text: str
    name: str = "argument"

    async def stream(self) -> AsyncIterator[str]:
        yield self.text


def session_factory(
    url: str | None,
    endpoint: str | None,
    region: str | None,
    *,
    silence_timeout_s: float = 30.0,
    http_client_factory: Callable[[], Any] | None = None,
) -> SessionFactory:
    """Sessions to a Kokoro server (`url`) or a SageMaker endpoint (`endpoint`, `region`; each
    session's HTTP/2 client from `http_client_factory` when given, else awscrt's)."""
    if bool(url) == bool(endpoint):
        raise CodedError("give exactly one of --url (a Kokoro server) or --endpoint (a SageMaker endpoint)", status=400)
    if endpoint and not region:
        raise CodedError("--endpoint needs a region: --region, AWS_REGION or AWS_DEFAULT_REGION", status=400)
    where = UpstreamSettings(
        url=url,
        endpoint=endpoint,
        region=region,
        words=True,
        silence_timeout=silence_timeout_s,
        http_client_factory=http_client_factory,
    )
    return lambda: open_session(where)


async def speak(
    source: TextSource, open_session: SessionFactory, options: SpeakOptions, sink: AudioSink, report: TextIO
) -> int:
    """Run one reply; 0 when it was spoken completely, 1 otherwise (the error on one line)."""
    status = 1
    first_audio_shown = False
    async for event in run_bidi(source, open_session, options):
        if isinstance(event, SentenceAudio):
            sink.write(event.data)
            if not first_audio_shown and event.t_ms is not None:
                first_audio_shown = True
                print(f"first audio at {event.t_ms:.0f} ms", file=report, flush=True)
        elif isinstance(event, ReplyError):
            print(f"voicestream speak: [{event.code}] {event.message}", file=report, flush=True)
        elif isinstance(event, Done):
            status = 0 if event.status == "complete" else 1
            print(summary(event), file=report, flush=True)
    return status


def summary(done: Done) -> str:
    timings = done.timings
    parts = [f"{done.status}: {done.sentences} sentence(s), {done.audio_ms / 1000:.1f} s of audio"]
    if timings.first_audio_ms is not None:
        since_text = ""
        if timings.first_text_ms is not None:
            since_text = f" ({timings.first_audio_ms - timings.first_text_ms:.0f} ms after the first text)"
        parts.append(f"first audio {timings.first_audio_ms:.0f} ms{since_text}")
    parts.append(f"total {timings.total_ms / 1000:.2f} s")
    return "; ".join(parts)
