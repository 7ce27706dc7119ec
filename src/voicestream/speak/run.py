"""run_bidi / run_batch: a reply's text in, a stream of typed events (text, sentences, audio) out.

Both modes run the same machinery and differ only in how the text is cut:

- `run_bidi`: the incremental `SentenceChunker` cuts a piece the moment it is certain and it
  goes into the open bidi session at once, so sentence 1 is being spoken while the model
  still writes sentence 3.
- `run_batch`: the fair baseline. The same session, opened at the same moment, but the whole
  reply is sent as one synthesis request once the text has ended.

Three tasks run per reply: the text reader (source → chunker → pieces), the sender (opens the
session while the model thinks, then sends each piece) and the audio reader (session events
→ audio). All of them put their events on ONE queue, so the events leave in the order things
really happened. The stream always ends with `done`; every failure upstream (the model, the
speech endpoint, a silent server, the overall deadline) becomes one `error` event first.
Closing the stream early (the caller went away) cancels the text source and the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from voicestream.chunker import FIRST_CLAUSE_MIN_WORDS, SentenceChunker
from voicestream.speech import (
    Audio,
    Cancelled,
    RequestCompleted,
    SessionClosed,
    SessionConnectError,
    SessionError,
    SpeechSession,
    Words,
)
from voicestream.wire.bidi import AudioFormat, default_sample_rate
from voicestream.wire.errors import CodedError, ErrorCode, ErrorMessage, public_error
from voicestream.wire.speak import (
    AgentStart,
    Done,
    Mode,
    ReplyError,
    ReplyTimings,
    Sentence,
    SentenceAudio,
    SentenceSpoken,
    SentenceWords,
    SpeakEvent,
    Status,
    TextDelta,
)

from .sources import TextSource, TextSourceError

logger = logging.getLogger(__name__)

SessionFactory = Callable[[], SpeechSession]
"""Builds an unopened session to the speech server: Kokoro (`BidiSession`) or vLLM-Omni
(`VllmOmniSession`), over a WebSocket locally or SageMaker deployed."""


# The codes of the `error` event (docs/speak.md):
# - model_error (the text source's own code): the model failed
# - tts_unavailable: the speech session could not be opened (SessionConnectError's code)
# - tts_error: the session broke, went silent or closed mid-reply (every other SessionError)
# - synthesis_failed: the server rejected or failed one sentence
# - timeout: the whole reply took longer than max_duration_s
# - internal_error: a bug in one of the reply's tasks


@dataclass(frozen=True, slots=True)
class SpeakOptions:
    voice: str | None = None
    speed: float | None = None
    format: AudioFormat = "pcm"
    # The whole reply, start to done: nothing upstream can make a stream hang longer.
    max_duration_s: float = 300.0
    first_clause_min_words: int | None = FIRST_CLAUSE_MIN_WORDS  # benchmarks/first_clause.py chose it
    max_chars: int = 300
    words: bool = True  # ask the server for word timings (`words` events)
    sample_rate: int | None = None  # Hz of the audio (None: the format's default, wire/bidi.py)
    # Sentences sent and not yet spoken: the next waits until one completes. The server refuses
    # more than its VOICESTREAM_MAX_QUEUED (16) unfinished requests with queue_full, which would
    # end a long reply; 8 keeps two sentences synthesized ahead many times over.
    max_in_flight: int = 8

    @property
    def delivered_rate(self) -> int:
        return self.sample_rate or default_sample_rate(self.format)


class Chunking(Protocol):
    def feed(self, fragment: str) -> list[str]: ...

    def flush(self) -> str | None: ...


class WholeReply:
    """Batch mode's "chunker": nothing until the text ends, then the whole reply as one piece."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def feed(self, fragment: str) -> list[str]:
        self._parts.append(fragment)
        return []

    def flush(self) -> str | None:
        text, self._parts = "".join(self._parts).strip(), []
        return text if any(ch.isalnum() for ch in text) else None


def run_bidi(
    source: TextSource, open_session: SessionFactory, options: SpeakOptions | None = None
) -> AsyncGenerator[SpeakEvent]:
    """Speak each sentence as soon as the chunker cuts it, over one pipelined session."""
    options = options or SpeakOptions()
    chunker = SentenceChunker(first_clause_min_words=options.first_clause_min_words, max_chars=options.max_chars)
    return _SpeakRun("bidi", source, chunker, open_session, options).events()


def run_batch(
    source: TextSource, open_session: SessionFactory, options: SpeakOptions | None = None
) -> AsyncGenerator[SpeakEvent]:
    """Wait for the whole reply, then speak it as one request (the baseline)."""
    return _SpeakRun("batch", source, WholeReply(), open_session, options or SpeakOptions()).events()


def run_speak(
    mode: Mode, source: TextSource, open_session: SessionFactory, options: SpeakOptions | None = None
) -> AsyncGenerator[SpeakEvent]:
    return (run_bidi if mode == "bidi" else run_batch)(source, open_session, options)


class _SpeakRun:
    def __init__(
        self,
        mode: Mode,
        source: TextSource,
        chunker: Chunking,
        open_session: SessionFactory,
        options: SpeakOptions,
    ) -> None:
        self.mode = mode
        self.source = source
        self.chunker = chunker
        self.open_session = open_session
        self.options = options
        self._out: asyncio.Queue[SpeakEvent] = asyncio.Queue()
        self._pieces: asyncio.Queue[str | None] = asyncio.Queue()  # None: the text has ended
        self._tasks: list[asyncio.Task[None]] = []
        self._session: SpeechSession | None = None
        self._start = 0.0
        self._status: Status | None = None
        self._text: list[str] = []
        self._first_text: float | None = None
        self._first_sentence: float | None = None
        self._first_audio: float | None = None
        self._sentences = 0  # pieces cut
        self._sent = 0  # pieces sent to the session
        self._completed = 0
        self._text_done = False
        self._audio_bytes = 0
        self._audio_ms = 0.0
        self._index_of: dict[str, int] = {}
        self._progress = asyncio.Event()  # a sentence completed: room for the next

    # --- the event stream --------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[SpeakEvent]:
        self._start = time.perf_counter()
        deadline = self._start + self.options.max_duration_s
        yield AgentStart(
            mode=self.mode,
            source=self.source.name,
            format=self.options.format,
            sample_rate=self.options.delivered_rate,
            voice=self.options.voice,
        )
        self._tasks = [
            self._spawn("speak-text", self._read_text),
            self._spawn("speak-send", self._send_pieces),
        ]
        try:
            while True:
                # A timeout per wait, not around the yields: the consumer's own time between
                # events must never be interrupted by our deadline. Once finished, the error
                # and done events are already queued: no timeout then.
                remaining = None if self._status is not None else deadline - time.perf_counter()
                try:
                    event = await asyncio.wait_for(self._out.get(), remaining)
                except TimeoutError:
                    limit = self.options.max_duration_s
                    self._finish("error", ErrorCode.TIMEOUT, f"the reply took longer than {limit} s")
                    continue
                yield event
                if isinstance(event, Done):
                    return
        finally:
            if self._status is None:
                self._status = "cancelled"  # the consumer stopped reading before done
                logger.info("speak cancelled by the caller", extra={"mode": self.mode, "t_ms": self._t()})
            await self._teardown()

    def _t(self) -> float:
        return round((time.perf_counter() - self._start) * 1000, 1)

    def _emit(self, event: SpeakEvent) -> None:
        if self._status is None:
            self._out.put_nowait(event)

    def _finish(
        self,
        status: Status,
        code: str | None = None,
        message: str = "",
        index: int | None = None,
        detail: str | None = None,
    ) -> None:
        """End the reply (once): an error event if it failed (`detail`, if given, is logged in
        its place), then done."""
        if self._status is not None:
            return
        t_ms = self._t()
        if code is not None:
            logged = message if detail is None else detail
            logger.warning("speak failed: %s: %s", code, logged, extra={"mode": self.mode, "code": code})
            self._emit(ReplyError(code=code, message=message, t_ms=t_ms, index=index))
        timings = ReplyTimings(
            first_text_ms=self._first_text,
            first_sentence_ms=self._first_sentence,
            first_audio_ms=self._first_audio,
            total_ms=t_ms,
        )
        self._emit(
            Done(
                status=status,
                timings=timings,
                sentences=self._sentences,
                audio_bytes=self._audio_bytes,
                audio_ms=round(self._audio_ms, 1),
                text="".join(self._text),
                t_ms=t_ms,
            )
        )
        self._status = status

    def _fail(self, error: Exception, code: str = ErrorCode.INTERNAL_ERROR) -> None:
        """End the reply with `error`: the client gets `public_error`'s message (an exception's
        text can name endpoints, ARNs, paths), the log gets the detail."""
        public = public_error(error, code=code)
        message = public.message
        if isinstance(error, SessionConnectError) and error.server_code:
            message += f" [{error.server_code}]"  # the server's own reason (server_busy, not_ready): a code
        self._finish("error", public.code, message, detail=f"{type(error).__name__}: {error}")

    def _spawn(self, name: str, work: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """One of the reply's tasks. The coroutine is made inside the task, so a task cancelled
        before it ever ran leaves no never-awaited coroutine behind."""
        return asyncio.create_task(self._guard(work), name=name)

    async def _guard(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run one of the reply's tasks; a bug in it ends the reply with an error, not a hang."""
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("speak task failed")
            self._fail(exc, ErrorCode.INTERNAL_ERROR)

    async def _teardown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        session = self._session
        if session is None:
            return
        with contextlib.suppress(SessionError, OSError):
            if self._status != "complete":
                # Barge-in semantics: drop queued sentences and stop the one being spoken,
                # so the server stops working for a caller who is gone.
                with contextlib.suppress(SessionError):
                    await session.cancel()
            await session.close()

    # --- text: source → chunker → pieces -----------------------------------------------------

    async def _read_text(self) -> None:
        stream = self.source.stream()
        try:
            async for delta in stream:
                if not isinstance(delta, str):
                    raise TypeError(f"text source yielded {type(delta).__name__}, not str")
                if not delta:
                    continue
                t_ms = self._t()
                if self._first_text is None:
                    self._first_text = t_ms
                self._text.append(delta)
                self._emit(TextDelta(text=delta, t_ms=t_ms))
                for piece in self.chunker.feed(delta):
                    self._cut(piece)
        except TextSourceError as exc:
            self._fail(exc)
            return
        finally:
            # Close the source here, in this task, also when cancelled: a model stream must
            # stop now, not whenever the garbage collector finalizes it.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        rest = self.chunker.flush()
        if rest is not None:
            self._cut(rest)
        self._pieces.put_nowait(None)

    def _cut(self, piece: str) -> None:
        index = self._sentences
        self._sentences += 1
        t_ms = self._t()
        if self._first_sentence is None:
            self._first_sentence = t_ms
        self._emit(Sentence(index=index, text=piece, t_ms=t_ms))
        self._pieces.put_nowait(piece)

    # --- speech: pieces → session → audio ----------------------------------------------------

    async def _send_pieces(self) -> None:
        # Opened as soon as the reply starts: the connection is made while the model thinks.
        session = self._session = self.open_session()
        try:
            await session.connect()
        except SessionError as exc:
            self._fail(exc)
            return
        self._tasks.append(self._spawn("speak-audio", lambda: self._read_audio(session)))
        try:
            while (piece := await self._pieces.get()) is not None:
                while self._sent - self._completed >= self.options.max_in_flight:  # flow control
                    self._progress.clear()
                    await self._progress.wait()
                index = self._sent
                request_id = f"s{index}"
                # Recorded before sending: the first audio may arrive before send() returns.
                self._index_of[request_id] = index
                self._sent += 1
                await session.send(
                    piece,
                    request_id=request_id,
                    voice=self.options.voice,
                    speed=self.options.speed,
                    format=self._wire_format(index),
                    words=self.options.words,
                    sample_rate=self.options.sample_rate,
                )
        except CodedError as exc:  # the session broke, or refused what it was asked (a SessionError or a 4xx)
            self._fail(exc)
            return
        self._text_done = True
        self._maybe_complete()

    def _wire_format(self, index: int) -> AudioFormat:
        """WAV: the first request carries the (streaming) header, the rest is raw PCM, so the
        concatenated audio is one WAV stream. PCM, MP3 and G.711 concatenate as they are."""
        if self.options.format == "wav":
            return "wav" if index == 0 else "pcm"
        return self.options.format

    async def _read_audio(self, session: SpeechSession) -> None:
        try:
            async for event in session.events():
                if isinstance(event, Audio):
                    self._on_audio(event)
                elif isinstance(event, Words):
                    self._on_words(event)
                elif isinstance(event, RequestCompleted):
                    self._on_complete(event)
                elif isinstance(event, ErrorMessage):
                    index = self._index_of.get(event.request_id or "")
                    self._finish("error", ErrorCode.SYNTHESIS_FAILED, f"[{event.code}] {event.message}", index)
                    return
                elif isinstance(event, Cancelled | SessionClosed):
                    break
        except SessionError as exc:
            self._fail(exc)
            return
        self._finish("error", ErrorCode.TTS_ERROR, "the speech server ended the session mid-reply")

    def _on_audio(self, event: Audio) -> None:
        index = self._index_of[event.request_id]
        t_ms = self._t()
        if self._first_audio is None:
            self._first_audio = t_ms
        self._audio_bytes += len(event.data)
        self._emit(SentenceAudio(index=index, data=event.data, t_ms=t_ms))

    def _on_words(self, event: Words) -> None:
        # Sentences are spoken in order and never interleave: every earlier one is complete.
        offset_s = round(self._audio_ms / 1000, 4)
        index = self._index_of[event.request_id]
        self._emit(SentenceWords(index=index, words=event.words, offset_s=offset_s, t_ms=self._t()))

    def _on_complete(self, event: RequestCompleted) -> None:
        self._completed += 1
        self._progress.set()
        self._audio_ms += event.audio_ms
        self._emit(
            SentenceSpoken(
                index=self._index_of[event.request_id],
                audio_bytes=event.audio_bytes,
                audio_ms=event.audio_ms,
                server_first_audio_ms=event.first_audio_ms,
                server_synth_ms=event.synth_ms,
                t_ms=self._t(),
            )
        )
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self._text_done and self._completed == self._sent:
            self._finish("complete")
