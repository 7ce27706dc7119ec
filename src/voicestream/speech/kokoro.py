"""BidiSession: one persistent, pipelined speech session over any `Transport`.

`send()` returns as soon as the message is on the wire, so a voice agent sends each sentence
the moment the chunker cuts it while earlier sentences are still being spoken; `events()`
yields everything the server says, in order, as typed events. One reader task owns
`transport.receive()` (a pending SageMaker receive must never be cancelled), and the consumer
waits on what it reads; that is where the silence timeout lives, so a server that stops
answering produces `SessionTimeoutError`, never a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any

from voicestream.wire.bidi import (
    Append,
    AudioFormat,
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    Config,
    Flush,
    Flushed,
    Ping,
    Pong,
    Queued,
    SessionClosed,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    Words,
    encode_client_message,
    parse_server_message,
)
from voicestream.wire.errors import CodedError, ErrorCode, ErrorMessage, ProtocolError
from voicestream.wire.framing import parse_control_frame
from voicestream.wire.pronunciation import parse_lexicon
from voicestream.wire.words import HeardWord, WordTiming, words_heard

from .errors import (
    ConnectionLostError,
    ProtocolViolationError,
    SessionClosedError,
    SessionConnectError,
    SessionError,
    SessionTimeoutError,
)
from .events import Audio, Event, Outcome, RequestCompleted, RequestTimings
from .lifecycle import SessionLifecycle, SessionState
from .transport import FrameMode, Payload, Transport

logger = logging.getLogger(__name__)

# The codes a server refuses a whole session with, right after the handshake (then it closes
# with 1013): the session was never open, so the caller may try again later.
REFUSAL_CODES = frozenset({ErrorCode.SERVER_BUSY, ErrorCode.NOT_READY})

_Item = tuple[float, Payload | SessionError | None]
"""What the reader hands the consumer: when it arrived, and a message, a failure or the end (None)."""


class RequestFailedError(CodedError):
    """One request failed (the server answered `error` or cancelled it); the session lives on."""

    def __init__(self, request_id: str, code: str, message: str) -> None:
        super().__init__(f"request {request_id} failed [{code}]: {message}", code=code, request_id=request_id)
        self.detail = message


@dataclass
class SynthesisResult:
    """One request's audio, collected by `BidiSession.synthesize`."""

    request_id: str
    audio: bytes = field(repr=False)
    format: str
    sample_rate: int
    timings: RequestTimings


class BidiSession(SessionLifecycle[_Item]):
    """An async context manager around one bidi session; see the module docstring."""

    def __init__(
        self,
        transport: Transport,
        *,
        connect_timeout: float = 15.0,
        silence_timeout: float = 30.0,
        close_timeout: float = 10.0,
        words: bool = False,
    ) -> None:
        """`silence_timeout`: seconds without any frame, while a request, ping, cancel or close
        is unanswered, before `events()` raises `SessionTimeoutError`. `close_timeout` bounds
        how long `close()` waits for the server to acknowledge. `words`: ask for word timings
        (`Words` events) on every request unless `send` says otherwise."""
        super().__init__(connect_timeout=connect_timeout, silence_timeout=silence_timeout, close_timeout=close_timeout)
        self.transport = transport
        self.words = words
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, RequestTimings] = {}
        self._pings = 0
        self._cancels: deque[set[str]] = deque()
        self._close_sent = False
        self._server_closed = False
        self._current: RequestTimings | None = None
        self._flushes = 0
        self._utterance: str | None = None  # the streamed utterance `append` is filling
        self._utterance_of: dict[str, str] = {}  # a piece the server cut -> its utterance
        self._utterances: dict[str, float] = {}  # every utterance appended to -> its first append

    # --- construction helpers ---------------------------------------------------------------

    @classmethod
    def websocket(
        cls,
        url: str,
        *,
        frames: FrameMode = "binary",
        connect_timeout: float = 15.0,
        silence_timeout: float = 30.0,
        close_timeout: float = 10.0,
        words: bool = False,
    ) -> BidiSession:
        """A session straight to a server (`ws://host:port` or the full route URL)."""
        from .websocket import WebSocketTransport

        return cls(
            WebSocketTransport(url, frames=frames),
            connect_timeout=connect_timeout,
            silence_timeout=silence_timeout,
            close_timeout=close_timeout,
            words=words,
        )

    @classmethod
    def sagemaker(
        cls,
        endpoint_name: str,
        region: str,
        *,
        frames: FrameMode = "binary",
        connect_timeout: float = 15.0,
        silence_timeout: float = 30.0,
        close_timeout: float = 10.0,
        words: bool = False,
        **transport_options: Any,
    ) -> BidiSession:
        """A session through a SageMaker endpoint; options go to `SageMakerTransport`."""
        from .sagemaker import SageMakerTransport  # the AWS SDK is an optional extra

        return cls(
            SageMakerTransport(endpoint_name, region, frames=frames, **transport_options),
            connect_timeout=connect_timeout,
            silence_timeout=silence_timeout,
            close_timeout=close_timeout,
            words=words,
        )

    @property
    def description(self) -> str:
        return self.transport.description

    # --- lifecycle (the state machine is `SessionLifecycle`'s) ------------------------------------

    @property
    def is_open(self) -> bool:
        """Connected, and neither closed nor failed nor ended by the server: `send` would work."""
        # The reader stops at the end of the stream even when nobody is consuming events.
        reading = self._reader is not None and not self._reader.done()
        return super().is_open and reading and not self._server_closed

    async def _open(self) -> None:
        """Open the transport within `connect_timeout`, then start the one reader."""
        try:
            async with asyncio.timeout(self.connect_timeout):
                await self.transport.connect()
        except TimeoutError as exc:
            raise SessionConnectError(
                f"could not open {self.transport.description} within {self.connect_timeout} s"
            ) from exc
        self._reader = asyncio.create_task(self._read_loop(), name="bidi-session-reader")

    async def _release(self) -> None:
        await self._abort()

    async def _shut(self) -> None:
        """Finish politely (close → session_closed → end of stream), then release everything."""
        reader = self._reader
        if self._failure is None and not self._ended and reader is not None and not reader.done():
            with contextlib.suppress(SessionError):
                self._close_sent = True
                await self._send_message(Close())
                # The server answers session_closed and ends the stream; the reader sees it.
                await asyncio.wait({reader}, timeout=self.close_timeout)
        await self._abort()

    async def _abort(self) -> None:
        """Close the transport and stop the reader, waiting for it at most `close_timeout`."""
        self._state = SessionState.CLOSED
        with contextlib.suppress(SessionError, OSError):
            await asyncio.wait_for(self.transport.close(), self.close_timeout)
        reader = self._reader
        if reader is not None and not reader.done():
            await asyncio.wait({reader}, timeout=self.close_timeout)
            if not reader.done():
                # The transport is gone; a stuck receive can no longer corrupt anything.
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
        self._inbox.wake()

    # --- sending ----------------------------------------------------------------------------

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
        normalize: bool | None = None,
    ) -> str:
        """Queue `text` for synthesis and return its request id at once (pipelined).
        `words` asks for its word timings (default: the session's `words`); `sample_rate` the
        delivered audio's rate (default: the session's config, else the format's); `normalize`
        False speaks the text as written (default: the session's config, else on); `lexicon` how
        words are said, `phonemes` that `text` is Kokoro phonemes (docs/protocol.md, "Pronunciation")."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"text is not valid Unicode: {exc.reason}") from exc
        self._ensure_open()
        rid = request_id if request_id is not None else self._new_request_id()
        if rid in self.timings:
            raise ValueError(f"request_id {rid!r} was already used in this session")
        timing = RequestTimings(request_id=rid, text=text, sent_at=time.perf_counter())
        self._expect()
        self.timings[rid] = timing
        self._pending[rid] = timing
        want_words = self.words if words is None else words
        message = Synthesize(
            text=text,
            request_id=rid,
            voice=voice,
            speed=speed,
            format=format,
            words=True if want_words else None,
            sample_rate=sample_rate,
            lexicon=parse_lexicon(None if lexicon is None else dict(lexicon)),
            phonemes=phonemes or None,
            normalize=normalize,
        )
        await self._send_message(message)
        return rid

    async def configure(
        self,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: AudioFormat | None = None,
        sample_rate: int | None = None,
        lexicon: Mapping[str, str] | None = None,
        normalize: bool | None = None,
    ) -> None:
        """Set defaults for the rest of the session (unset fields keep their value; a lexicon
        replaces the session's)."""
        self._ensure_open()
        words = parse_lexicon(None if lexicon is None else dict(lexicon))
        await self._send_message(
            Config(voice=voice, speed=speed, format=format, sample_rate=sample_rate, lexicon=words, normalize=normalize)
        )

    async def append(self, text: str, *, request_id: str | None = None) -> str:
        """Stream `text` (an LLM token, say) into the open utterance and return its id; the
        server cuts sentences out of it and speaks each one as a request `<id>.<n>` with the
        session's config. The first append after a flush opens a new utterance (`request_id`
        names it, else one is made up); `flush()` ends it."""
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        self._ensure_open()
        if self._utterance is None:
            utterance = request_id if request_id is not None else self._new_request_id()
            if utterance in self.timings or utterance in self._utterances:
                raise ValueError(f"request_id {utterance!r} was already used in this session")
            self._utterance = utterance
            self._utterances[utterance] = time.perf_counter()
        elif request_id not in (None, self._utterance):
            raise ValueError(f"utterance {self._utterance!r} is open: flush() it before starting another")
        await self._send_message(Append(text=text, request_id=self._utterance))
        return self._utterance

    async def flush(self) -> None:
        """End the streamed utterance: its partial sentence is spoken too. Answered by a
        `Flushed` event listing every request the utterance became."""
        self._ensure_open()
        self._expect()
        self._flushes += 1
        self._utterance = None
        await self._send_message(Flush())

    async def cancel(self, request_id: str | None = None) -> None:
        """Barge-in: drop queued requests and stop the one in progress (answered `Cancelled`).
        With `request_id`: drop that request, or that streamed utterance, alone."""
        self._ensure_open()
        self._expect()
        if request_id is None:
            self._utterance = None
            self._cancels.append(set(self._pending))
        else:
            if request_id == self._utterance:
                self._utterance = None
            self._cancels.append({rid for rid in self._pending if request_id in (rid, self._utterance_of.get(rid))})
        await self._send_message(Cancel(request_id=request_id))

    async def ping(self) -> None:
        """Application-level keepalive; answered by a `Pong` event."""
        self._ensure_open()
        self._expect()
        self._pings += 1
        await self._send_message(Ping())

    def _expecting(self) -> bool:
        return bool(self._pending) or self._pings > 0 or self._flushes > 0 or bool(self._cancels) or self._close_sent

    def _outstanding(self) -> int:
        return len(self._pending)

    async def _send_message(self, message: ClientMessage) -> None:
        # One sender at a time: SageMaker's event signatures form a chain that must reach the
        # wire in the order it was computed.
        async with self._send_lock:
            try:
                await self.transport.send(encode_client_message(message))
            except SessionError as exc:
                self._failure = self._failure or exc
                raise

    # --- receiving --------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                payload = await self.transport.receive()
                self._inbox.put((time.perf_counter(), payload))
                if payload is None:
                    return
        except SessionError as exc:
            self._inbox.put((time.perf_counter(), exc))
        except Exception as exc:  # a transport bug must reach the consumer, not hang it
            logger.exception("bidi transport failed")
            self._inbox.put((time.perf_counter(), ConnectionLostError(f"{self.transport.description}: {exc!r}")))

    async def _next_item(self) -> _Item:
        while not self._inbox:
            if self._reader is None or (self._state is SessionState.CLOSED and self._reader.done()):
                raise SessionClosedError("the session is closed")
            await self._wait_for_item()
        return self._inbox.pop()

    async def events(self) -> AsyncGenerator[Event]:
        """Everything the server says, in order, until the session ends.

        Ends after the server closed the session on request (`close()` or a `SessionClosed`).
        Raises a `SessionError` when the stream fails, the server goes silent while answers are
        due, or it breaks the wire contract. Use one consumer at a time.
        """
        if self._failure is not None:
            raise self._failure
        while True:
            try:
                received_at, payload = await self._next_item()
            except SessionTimeoutError as exc:
                self._failure = exc
                raise
            if isinstance(payload, SessionError):
                self._failure = payload
                raise payload
            if payload is None:
                self._ended = True
                if self._close_sent or self._server_closed or self._state is not SessionState.OPEN:
                    return
                self._failure = ConnectionLostError(
                    f"{self.transport.description} ended the stream with {len(self._pending)} request(s) outstanding"
                )
                raise self._failure
            self._inbox.progress(received_at)  # any frame is progress (`queued` too)
            try:
                event = self._interpret(payload, received_at)
            except SessionError as exc:  # a contract violation, or the server refused the session
                self._failure = exc
                raise
            if event is not None:
                yield event

    def _interpret(self, payload: Payload, at: float) -> Event | None:
        body = parse_control_frame(payload)
        if body is None:
            if isinstance(payload, str):
                raise ProtocolViolationError(f"text frame is not a JSON object: {payload[:120]!r}")
            return self._on_audio(payload, at)
        try:
            message = parse_server_message(payload)
        except ProtocolError as exc:
            if exc.code == ErrorCode.UNKNOWN_TYPE:
                logger.warning("ignoring server message of unknown type: %.200s", payload)
                return None
            raise ProtocolViolationError(f"malformed control frame: {exc.message}") from exc
        if isinstance(message, SynthesisStart):
            timing = self._known(message.request_id, "synthesis_start")
            timing.started_at = at
            timing.format, timing.sample_rate = message.format, message.sample_rate
            self._current = timing
            return message
        if isinstance(message, Words):
            timing = self._known(message.request_id, "words")
            timing.words.extend(message.words)
            return message
        if isinstance(message, SynthesisComplete):
            timing = self._known(message.request_id, "synthesis_complete")
            self._finish(timing, at, "complete")
            timing.server_audio_ms = message.audio_ms
            timing.server_first_audio_ms = message.first_audio_ms
            timing.server_synth_ms = message.synth_ms
            return RequestCompleted(
                request_id=message.request_id,
                audio_bytes=message.audio_bytes,
                audio_ms=message.audio_ms,
                first_audio_ms=message.first_audio_ms,
                synth_ms=message.synth_ms,
                timings=timing,
            )
        if isinstance(message, ErrorMessage):
            if message.request_id is None and message.code in REFUSAL_CODES:
                raise SessionConnectError(
                    f"{self.transport.description} refused the session [{message.code}]: {message.message}",
                    server_code=message.code,
                )
            if message.request_id is not None and message.request_id in self._pending:
                self._finish(self._pending[message.request_id], at, "error")
            return message
        if isinstance(message, Cancelled):
            dropped = set(message.request_ids) | (self._cancels.popleft() if self._cancels else set())
            for rid in dropped:
                if rid in self._pending:
                    self._finish(self._pending[rid], at, "cancelled")
            return message
        if isinstance(message, Flushed):
            self._flushes = max(0, self._flushes - 1)
            for rid in message.request_ids:
                self._piece(rid)
            return message
        if isinstance(message, Pong):
            self._pings = max(0, self._pings - 1)
            return message
        if isinstance(message, SessionClosed):
            self._server_closed = True
            return message
        if isinstance(message, Queued):  # keepalive: the silence clock was reset above
            return message
        raise AssertionError(f"unhandled server message {message!r}")  # pragma: no cover

    def _on_audio(self, payload: bytes, at: float) -> Audio:
        timing = self._current
        if timing is None:
            raise ProtocolViolationError(f"audio frame ({len(payload)} bytes) before any synthesis_start")
        if timing.first_audio_at is None:
            timing.first_audio_at = at
        timing.audio_bytes += len(payload)
        timing.audio_frames += 1
        return Audio(request_id=timing.request_id, data=payload)

    def _piece(self, request_id: str) -> RequestTimings | None:
        """The timings of `<utterance>.<n>`, a piece the server cut from text this session
        appended: made when the server first names it (`flushed` or its `synthesis_start`)."""
        timing = self.timings.get(request_id)
        utterance = request_id.rpartition(".")[0]
        if timing is None and utterance in self._utterances:
            timing = RequestTimings(request_id=request_id, text="", sent_at=self._utterances[utterance])
            self.timings[request_id] = timing
            self._pending[request_id] = timing
            self._utterance_of[request_id] = utterance
        return timing

    def _known(self, request_id: str, what: str) -> RequestTimings:
        timing = self.timings.get(request_id) or self._piece(request_id)
        if timing is None:
            raise ProtocolViolationError(f"{what} for request {request_id!r}, which this session never sent")
        return timing

    def _finish(self, timing: RequestTimings, at: float, outcome: Outcome) -> None:
        self._pending.pop(timing.request_id, None)
        self._utterance_of.pop(timing.request_id, None)
        if timing.completed_at is None:
            timing.completed_at = at
            timing.outcome = outcome

    # --- what was heard ----------------------------------------------------------------------

    def words_received(self) -> list[tuple[str, WordTiming]]:
        """Every word timing received so far, (request_id, word), in play order: after a
        cancel, what the server had timed up to the cut (words come before their audio)."""
        return [(rid, word) for rid, timing in self.timings.items() for word in timing.words]

    def words_heard(self, played_s: float) -> list[HeardWord]:
        """The words a listener heard after `played_s` seconds of this session's audio, played
        back to back in request order (what a barge-in interrupted: pass the player's position).

        Needs the requests' durations: exact for pcm and wav; for mp3 the server's figure of
        each completed request (a cancelled mp3 request ends the count)."""
        started = [t for t in self.timings.values() if t.started_at is not None]
        requests: list[tuple[str, float | None, list[WordTiming]]] = []
        for timing in started:
            duration = timing.audio_s
            requests.append((timing.request_id, duration, timing.words))
            if duration is None:
                break
        return words_heard(requests, played_s)

    # --- stop-and-wait convenience ----------------------------------------------------------

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: AudioFormat | None = None,
    ) -> SynthesisResult:
        """Send one text and collect its audio (stop-and-wait). Events of other requests are
        dropped, so do not mix this with another consumer of `events()`. Raises
        `RequestFailedError` when the server rejects or cancels the request."""
        rid = await self.send(text, voice=voice, speed=speed, format=format)
        chunks: list[bytes] = []
        start: SynthesisStart | None = None
        async with contextlib.aclosing(self.events()) as events:
            async for event in events:
                if isinstance(event, SynthesisStart) and event.request_id == rid:
                    start = event
                elif isinstance(event, Audio) and event.request_id == rid:
                    chunks.append(event.data)
                elif isinstance(event, RequestCompleted) and event.request_id == rid:
                    return SynthesisResult(
                        request_id=rid,
                        audio=b"".join(chunks),
                        format=start.format if start else (format or "pcm"),
                        sample_rate=start.sample_rate if start else 0,
                        timings=event.timings,
                    )
                elif isinstance(event, ErrorMessage) and event.request_id == rid:
                    raise RequestFailedError(rid, event.code, event.message)
                elif isinstance(event, Cancelled) and self.timings[rid].outcome == "cancelled":
                    raise RequestFailedError(rid, "cancelled", "the request was cancelled")
        raise ConnectionLostError(f"the session ended before request {rid} completed")
