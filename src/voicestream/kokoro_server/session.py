"""One bidirectional session (docs/protocol.md): receive loop, request queue, synthesis pipeline.

Three tasks per session:
- the receive loop (the caller's task) parses every frame, text or binary, answers control
  messages and queues `synthesize` requests; it also enforces the idle and session limits;
- the synthesis task takes queued requests in order and streams each one's frames into a
  bounded buffer; it moves on to request N+1 as soon as N is synthesized, while N's audio is
  still being sent (pipelining). The outbox holds one request ahead, so at most two requests'
  audio is buffered and memory stays bounded however slow the client is;
- the send task sends one request at a time: synthesis_start, its audio frames, then
  synthesis_complete (or error), so audio of different requests never interleaves. While it
  waits for audio that is not there yet (the request waits for a synthesis worker, or its
  synthesis runs long) it sends `queued` every `keepalive_s`, so the client's silence timeout
  does not mistake a busy server for a dead one.

`cancel` tears the synthesis and send tasks down and starts fresh ones; a disconnect or the
end of the session cancels them, which abandons the engine step in flight (at most one chunk).

A client that reads its audio more than `max_consumer_lag_s` slower than real time (asgi.py's
`ConsumerLag`) ends the session with `slow_consumer`: with unfinished requests a session counts
as active, so otherwise a client reading a trickle would hold a session slot for its hour.

`cancel` with a `request_id` drops that request alone (see `_cancel`): the others go on.

Streamed input (`append`, `flush`) feeds a `SentenceChunker` per session: each piece it cuts is
queued as an ordinary request, so everything above holds for it unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Coroutine, MutableMapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol, TypeVar

from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from voicestream.asgi import ConsumerLag, SlowConsumerError
from voicestream.chunker import SentenceChunker
from voicestream.engine.base import InvalidRequestError
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server.logs import RepeatLimiter, log_event, request_id_var, session_id_var
from voicestream.kokoro_server.playback import PlaybackClock
from voicestream.kokoro_server.runtime import ServerBusyError, ServerRuntime
from voicestream.kokoro_server.speech import AudioItem, AudioStream, SpeechRequest, check_pronunciation
from voicestream.wire.bidi import (
    DEFAULT_VOICE,
    Append,
    AudioFormat,
    Cancel,
    Cancelled,
    Close,
    Config,
    Flush,
    Flushed,
    Ping,
    Pong,
    Queued,
    ServerMessage,
    SessionClosed,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    Words,
    audio_unit_bytes,
    default_sample_rate,
    encode_server_message,
    parse_client_message,
)
from voicestream.wire.errors import ErrorCode, ErrorMessage, ProtocolError, public_error
from voicestream.wire.framing import make_audio_frames_safe
from voicestream.wire.pronunciation import Lexicon, merge_lexicons

Message = MutableMapping[str, Any]
Item = TypeVar("Item")
# What sending to or receiving from a peer that has gone raises (uvicorn's is an OSError).
DISCONNECT_ERRORS: Final = (WebSocketDisconnect, WebSocketDisconnected, OSError)

# WebSocket close codes (RFC 6455): normal end, a limit was hit, server busy, server fault.
CLOSE_NORMAL: Final = 1000
CLOSE_POLICY: Final = 1008
# Seconds the closing frames (error, session_closed, close) may take to go out.
CLOSE_GRACE_S: Final = 5.0
CLOSE_TRY_AGAIN_LATER: Final = 1013
CLOSE_INTERNAL_ERROR: Final = 1011


class Channel(Protocol):
    """The WebSocket as a session sees it (Starlette's WebSocket fits)."""

    async def receive(self) -> Message: ...

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


@dataclass(slots=True)
class SessionDefaults:
    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    format: AudioFormat = "pcm"
    words: bool = False
    sample_rate: int | None = None  # None: each request's format's default (8 kHz G.711, else 24 kHz)
    lexicon: Lexicon = ()  # the session's; a request's own entries win over it
    normalize: bool = True


class EndReason(StrEnum):
    """Why a session ended: sent as `session_closed.reason` and logged."""

    CLOSE = "close"  # the client asked (close code 1000)
    DISCONNECT = "disconnect"  # the client went away: nothing can be sent
    IDLE_TIMEOUT = ErrorCode.IDLE_TIMEOUT.value  # a limit (close code 1008)
    SESSION_TIMEOUT = ErrorCode.SESSION_TIMEOUT.value
    SLOW_CONSUMER = ErrorCode.SLOW_CONSUMER.value  # the client reads slower than real time (1008)
    INTERNAL_ERROR = ErrorCode.INTERNAL_ERROR.value  # a bug (close code 1011)


class RequestAudio:
    """One request's frames on their way from the synthesis task to the send task."""

    def __init__(self, stream: AudioStream, max_frames: int) -> None:
        self.stream = stream
        self.request = stream.request
        # Audio frames and word timings (sent before the frames they cover); None: the end.
        self.frames: asyncio.Queue[AudioItem | None] = asyncio.Queue(maxsize=max_frames)
        self.error: ErrorMessage | None = None


class ServerSession:
    """The server side of one bidi session; `run()` serves it until it ends."""

    def __init__(self, runtime: ServerRuntime, channel: Channel, session_id: str | None = None) -> None:
        self.runtime = runtime
        self.limits = runtime.limits
        self.channel = channel
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self._bad_input_logs = RepeatLimiter()  # a flooding client must not flood the log
        self.defaults = SessionDefaults()
        self._pending: dict[str, SpeechRequest] = {}  # accepted and not finished, in order
        self._sequence = 0
        self._utterance_of: dict[str, str] = {}  # pending piece of streamed input -> its utterance
        # The open streamed utterance: its id, the chunker holding its partial sentence, its pieces.
        self._utterance: str | None = None
        self._chunker = SentenceChunker()
        self._pieces: list[str] = []
        self._synthesizing: str | None = None  # the request the synthesis task is on
        self._send_lock = asyncio.Lock()
        self._lag = ConsumerLag(self.limits.max_consumer_lag_s)
        self._wake = asyncio.Event()  # pipeline drained (while closing) or failed
        self._failure: BaseException | None = None
        self._closing = False
        self._opened_at = time.perf_counter()
        self._last_input_at = self._opened_at
        self._last_sent_at = self._opened_at
        self._tasks: list[asyncio.Task[None]] = []
        self._requests: asyncio.Queue[SpeechRequest] = asyncio.Queue()
        self._outbox: asyncio.Queue[RequestAudio] = asyncio.Queue(maxsize=1)
        # The session's requests play one after another to one listener: a sentence that starts
        # while earlier audio still plays may be synthesized in fewer, larger windows.
        self._playback = PlaybackClock()
        frames_per_request = int(self.limits.max_buffered_audio_s * 1000 / self.limits.frame_ms)
        self._max_frames = max(1, frames_per_request)

    # --- lifecycle -------------------------------------------------------------------------

    async def run(self) -> EndReason:
        """Serve the session until close, disconnect or a limit; returns why it ended."""
        session_id_var.set(self.session_id)
        log_event("session_open")
        self._start_pipeline()
        reason = EndReason.INTERNAL_ERROR
        try:
            reason = await self._receive_loop()
        except DISCONNECT_ERRORS:
            reason = EndReason.DISCONNECT
        except Exception as error:  # a bug: end this session cleanly, keep the server serving
            log_event("session_failed", logging.ERROR, exc_info=True, error=repr(error))
            reason = EndReason.INTERNAL_ERROR
        finally:
            await self._stop_pipeline()
            log_event(
                "session_end",
                reason=reason,
                duration_ms=_ms(time.perf_counter() - self._opened_at),
                unfinished=len(self._pending),
            )
        if reason is not EndReason.DISCONNECT:
            # A client that stopped reading may never take the closing frames: bounded.
            with contextlib.suppress(TimeoutError, *DISCONNECT_ERRORS):
                async with asyncio.timeout(CLOSE_GRACE_S):
                    await self._finish(reason)
        return reason

    async def _finish(self, reason: EndReason) -> None:
        if reason is EndReason.CLOSE:
            code = CLOSE_NORMAL
        elif reason is EndReason.SLOW_CONSUMER:
            message = "the client reads audio slower than real time: the session is closed"
            await self._send_control(ErrorMessage(ErrorCode.SLOW_CONSUMER, message))
            code = CLOSE_POLICY
        elif reason is EndReason.INTERNAL_ERROR:
            await self._send_control(ErrorMessage(ErrorCode.INTERNAL_ERROR, "the session failed; see logs"))
            code = CLOSE_INTERNAL_ERROR
        else:
            code = CLOSE_POLICY
        await self._send_control(SessionClosed(reason=reason))
        await self.channel.close(code, reason)

    def _start_pipeline(self) -> None:
        self._synthesizing = None
        self._requests = asyncio.Queue()
        self._outbox = asyncio.Queue(maxsize=1)
        self._tasks = [
            self._spawn(self._synthesis_loop(), "synthesis"),
            self._spawn(self._send_loop(), "send"),
        ]

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=f"voicestream-{name}-{self.session_id}")
        task.add_done_callback(self._on_task_done)
        return task

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is not None and self._failure is None:
            self._failure = error
            self._wake.set()

    async def _stop_pipeline(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- receiving -------------------------------------------------------------------------

    async def _receive_loop(self) -> EndReason:
        while True:
            message = await self._next_message()
            if self._failure is not None:
                if _is_disconnect_error(self._failure):
                    return EndReason.DISCONNECT
                if isinstance(self._failure, SlowConsumerError):
                    log_event("session_slow_consumer", logging.WARNING, lag_s=round(self._lag.lag_s, 1))
                    return EndReason.SLOW_CONSUMER
                log_event("session_failed", logging.ERROR, error=repr(self._failure))
                return EndReason.INTERNAL_ERROR
            if message is None:
                expired = self._expired_limit()
                if expired is not None:
                    await self._send_control(ErrorMessage(expired, _LIMIT_MESSAGES[expired]))
                    return EndReason(expired)
                if self._closing and not self._pending:
                    return EndReason.CLOSE
                continue
            if message["type"] == "websocket.disconnect":
                return EndReason.DISCONNECT
            if message["type"] != "websocket.receive":
                continue
            self._last_input_at = time.perf_counter()
            payload = message.get("bytes")
            if payload is None:
                payload = message.get("text", "")
            await self._handle(payload)
            if self._closing and not self._pending:
                return EndReason.CLOSE

    async def _next_message(self) -> Message | None:
        """The next ASGI message, or None when a deadline passed or the pipeline woke us."""
        self._wake.clear()
        if self._failure is not None or (self._closing and not self._pending):
            return None
        timeout = max(0.0, self._next_deadline() - time.perf_counter())
        receive = asyncio.ensure_future(self.channel.receive())
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            done, _ = await asyncio.wait({receive, woken}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (receive, woken):
                waiter.cancel()
            await asyncio.gather(receive, woken, return_exceptions=True)
        if receive in done and not receive.cancelled():
            return receive.result()
        return None

    def _next_deadline(self) -> float:
        session_end = self._opened_at + self.limits.max_session_s
        if self._pending:  # work in progress is not idleness
            return min(session_end, time.perf_counter() + self.limits.idle_timeout_s)
        return min(session_end, self._last_input_at + self.limits.idle_timeout_s)

    def _expired_limit(self) -> ErrorCode | None:
        now = time.perf_counter()
        if now >= self._opened_at + self.limits.max_session_s:
            return ErrorCode.SESSION_TIMEOUT
        if self._pending:
            self._last_input_at = max(self._last_input_at, now)  # idle time restarts after the work
            return None
        if now >= self._last_input_at + self.limits.idle_timeout_s:
            return ErrorCode.IDLE_TIMEOUT
        return None

    async def _handle(self, payload: bytes | str) -> None:
        try:
            message = parse_client_message(payload, self.limits, voices=self.runtime.engine.voices())
            if self._closing and not isinstance(message, Cancel):
                raise ProtocolError(ErrorCode.INVALID_REQUEST, "the session is closing: only cancel is accepted")
            if isinstance(message, Synthesize):
                self._accept(message)
            elif isinstance(message, Append):
                await self._append(message)
            elif isinstance(message, Flush):
                await self._flush()
            elif isinstance(message, Config):
                self._configure(message)
            elif isinstance(message, Cancel):
                await self._cancel(message.request_id)
            elif isinstance(message, Ping):
                await self._send_control(Pong(**self.runtime.identity()))
            elif isinstance(message, Close):
                if self._utterance is not None:  # "no more input" ends the streamed text too
                    await self._flush()
                self._closing = True
                log_event("close_requested", unfinished=len(self._pending))
        except ProtocolError as error:
            suppressed = self._bad_input_logs.next()
            if suppressed is not None:
                extra: dict[str, Any] = {"code": error.code, **({"suppressed": suppressed} if suppressed else {})}
                log_event("bad_input", logging.WARNING, request_id=error.request_id, **extra)
            await self._send_control(error.to_message())

    def _accept(self, message: Synthesize) -> None:
        request_id = message.request_id or self._next_request_id()
        if request_id in self._pending:
            # No request_id on this error: it would read as the end of the request in progress.
            raise ProtocolError(ErrorCode.DUPLICATE_REQUEST_ID, f"request {request_id!r} is still in progress")
        if len(self._pending) >= self.limits.max_queued:
            raise ProtocolError(
                ErrorCode.QUEUE_FULL,
                f"{len(self._pending)} requests are unfinished; the limit is {self.limits.max_queued}",
                request_id,
            )
        voice = message.voice or self.defaults.voice
        self._check_voice(voice, request_id)
        audio_format = message.format or self.defaults.format
        text_options = TextOptions(
            normalize=self.defaults.normalize if message.normalize is None else message.normalize,
            lexicon=merge_lexicons(self.defaults.lexicon, message.lexicon),
            phonemes=bool(message.phonemes),
        )
        check_pronunciation(self.runtime.engine, message.text, text_options, request_id)
        request = SpeechRequest(
            request_id=request_id,
            text=message.text,
            voice=voice,
            speed=message.speed if message.speed is not None else self.defaults.speed,
            format=audio_format,
            received_at=time.perf_counter(),
            words=message.words if message.words is not None else self.defaults.words,
            sample_rate=message.sample_rate or self.defaults.sample_rate or default_sample_rate(audio_format),
            text_options=text_options,
        )
        self._pending[request_id] = request
        self._requests.put_nowait(request)
        log_event(
            "request_queued",
            request_id=request_id,
            chars=len(request.text),
            voice=request.voice,
            format=request.format,
            sample_rate=request.sample_rate,
            queued=len(self._pending),
        )

    def _configure(self, message: Config) -> None:
        if message.voice is not None:
            self._check_voice(message.voice, None)
            self.defaults.voice = message.voice
        if message.speed is not None:
            self.defaults.speed = message.speed
        if message.format is not None:
            self.defaults.format = message.format
        if message.words is not None:
            self.defaults.words = message.words
        if message.sample_rate is not None:
            self.defaults.sample_rate = message.sample_rate
        if message.lexicon is not None:
            self._check_lexicon(message.lexicon)
            self.defaults.lexicon = message.lexicon
        if message.normalize is not None:
            self.defaults.normalize = message.normalize
        log_event(
            "config",
            voice=self.defaults.voice,
            speed=self.defaults.speed,
            format=self.defaults.format,
            sample_rate=self.defaults.sample_rate,
        )

    def _check_lexicon(self, lexicon: Lexicon) -> None:
        """A session's lexicon is checked when it is set, not at each request that uses it."""
        check_pronunciation(self.runtime.engine, "", TextOptions(lexicon=lexicon), None)

    def _check_voice(self, voice: str, request_id: str | None) -> None:
        try:
            self.runtime.engine.validate_voice(voice)
        except InvalidRequestError as error:
            raise ProtocolError(error.code, str(error), request_id) from None

    def _next_request_id(self) -> str:
        self._sequence += 1
        return f"{self.session_id}-{self._sequence}"

    # --- streamed input --------------------------------------------------------------------

    async def _append(self, message: Append) -> None:
        # No request_id on these errors: it could read as the end of a request of that id.
        if self._utterance is None:
            utterance = message.request_id or self._next_request_id()
            if utterance in self._pending or utterance in self._utterance_of.values():
                raise ProtocolError(ErrorCode.DUPLICATE_REQUEST_ID, f"{utterance!r} was already used in this session")
            self._utterance, self._pieces = utterance, []
            self._chunker = SentenceChunker()
        elif message.request_id not in (None, self._utterance):
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST,
                f"utterance {self._utterance!r} is still open: flush it before appending to another",
            )
        for piece in self._chunker.feed(message.text):
            await self._queue_piece(piece)

    async def _flush(self) -> None:
        utterance = self._utterance
        if utterance is not None:
            rest = self._chunker.flush()
            if rest is not None:
                await self._queue_piece(rest)
        pieces, self._utterance, self._pieces = tuple(self._pieces), None, []
        log_event("flushed", request_id=utterance, request_ids=list(pieces))
        await self._send_control(Flushed(request_ids=pieces, request_id=utterance))

    async def _queue_piece(self, text: str) -> None:
        """Queue one piece of the open utterance as request `<utterance>.<n>` (session config)."""
        assert self._utterance is not None
        request_id = f"{self._utterance}.{len(self._pieces) + 1}"
        try:
            self._accept(Synthesize(text=text, request_id=request_id))
        except ProtocolError as error:  # e.g. queue_full: this piece is lost, the session goes on
            await self._send_control(error.to_message())
            return
        self._pieces.append(request_id)
        self._utterance_of[request_id] = self._utterance

    # --- cancel ----------------------------------------------------------------------------

    async def _cancel(self, request_id: str | None) -> None:
        """Drop all unfinished requests, or only the one named: a request, or a streamed
        utterance (its unfinished pieces and, while it is open, its partial text). The others
        go on in order. An id with nothing unfinished (never sent, or already ended) drops
        nothing: the answer lists what was dropped, possibly nothing."""
        if request_id is None or request_id == self._utterance:
            self._utterance, self._pieces = None, []
            self._chunker = SentenceChunker()
        dropped = tuple(
            rid for rid in self._pending if request_id is None or request_id in (rid, self._utterance_of.get(rid))
        )
        sending = next(iter(self._pending), None)  # the request the send task is on (or next)
        for rid in dropped:
            del self._pending[rid]
            self._utterance_of.pop(rid, None)
        if request_id is None or (sending is not None and sending in dropped):
            # The audio being sent stops at once. What was synthesized ahead is made again: none
            # of the requests left had a frame sent yet.
            await self._stop_pipeline()
            self._playback.stop()
            self._start_pipeline()
            for request in self._pending.values():
                self._requests.put_nowait(request)
        elif self._synthesizing in dropped:
            # The send task skips the dropped requests when it reaches them.
            await self._restart_synthesis()
        log_event("cancelled", request_ids=list(dropped), named=request_id)
        await self._send_control(Cancelled(request_ids=dropped, request_id=request_id))

    async def _restart_synthesis(self) -> None:
        task, rest = self._tasks[0], self._tasks[1:]
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._synthesizing = None
        self._tasks = [self._spawn(self._synthesis_loop(), "synthesis"), *rest]

    # --- synthesizing and sending ----------------------------------------------------------

    async def _synthesis_loop(self) -> None:
        while True:
            request = await self._requests.get()
            if self._pending.get(request.request_id) is not request:
                continue  # cancelled while it waited (its id may be in use again since)
            self._synthesizing = request.request_id
            request_id_var.set(request.request_id)
            audio = RequestAudio(AudioStream(self.runtime, request, self._playback), self._max_frames)
            await self._outbox.put(audio)
            try:
                async for item in audio.stream.items():
                    if isinstance(item, bytes) or request.words:
                        await audio.frames.put(item)
            except (InvalidRequestError, ServerBusyError) as error:
                audio.error = ErrorMessage(error.code, str(error), request.request_id)
            except Exception as error:
                log_event("synthesis_failed", logging.ERROR, exc_info=True, error=repr(error))
                audio.error = public_error(error, request_id=request.request_id).to_message()
            await audio.frames.put(None)
            self._synthesizing = None

    async def _send_loop(self) -> None:
        while True:
            audio = await self._next_or_keepalive(self._outbox, None)
            request = audio.request
            if self._pending.get(request.request_id) is not request:
                continue  # cancelled after it was synthesized ahead (its id may be in use again)
            request_id_var.set(request.request_id)
            start = SynthesisStart(request.request_id, request.format, request.sample_rate, request.voice)
            await self._send_control(start)
            sample_width = audio_unit_bytes(request.format)
            seconds_per_byte = 0.0
            first_audio_ms: float | None = None
            while (frame := await self._next_or_keepalive(audio.frames, request.request_id)) is not None:
                if not isinstance(frame, bytes):
                    await self._send_control(Words(request.request_id, frame))
                    continue
                seconds_per_byte = seconds_per_byte or 1.0 / audio.stream.bytes_per_second
                for part in make_audio_frames_safe(frame, sample_width=sample_width):
                    await self._send_audio(part, len(part) * seconds_per_byte)
                if first_audio_ms is None:
                    first_audio_ms = _ms(time.perf_counter() - request.received_at)
            stats = audio.stream.stats
            total_ms = _ms(time.perf_counter() - request.received_at)
            if audio.error is not None:
                await self._send_control(audio.error)
            else:
                await self._send_control(
                    SynthesisComplete(
                        request_id=request.request_id,
                        audio_bytes=stats.audio_bytes,
                        audio_ms=stats.audio_ms,
                        first_audio_ms=first_audio_ms,
                        synth_ms=_ms(stats.synth_s),
                    )
                )
            # Only now: had the final frame not gone out, `cancel` must still list this request.
            self._pending.pop(request.request_id, None)
            self._utterance_of.pop(request.request_id, None)
            log_event(
                "request_done" if audio.error is None else "request_failed",
                code=audio.error.code if audio.error else None,
                audio_bytes=stats.audio_bytes,
                audio_ms=stats.audio_ms,
                first_audio_ms=first_audio_ms,
                synth_ms=_ms(stats.synth_s),
                total_ms=total_ms,
                sentences=stats.sentences,
                phonemes=stats.phonemes,
            )
            if not self._pending:
                self._wake.set()

    async def _next_or_keepalive(self, queue: asyncio.Queue[Item], request_id: str | None) -> Item:
        """The queue's next item; meanwhile, while requests are unfinished, a `queued` keepalive
        each time nothing was sent for `keepalive_s`."""
        while True:
            timeout = None
            if self._pending:
                timeout = max(0.0, self._last_sent_at + self.limits.keepalive_s - time.perf_counter())
            try:
                async with asyncio.timeout(timeout):
                    return await queue.get()
            except TimeoutError:
                waiting_for = request_id or next(iter(self._pending), None)
                if waiting_for is not None:
                    waited = _ms(time.perf_counter() - self._last_sent_at)
                    await self._send_control(Queued(request_id=waiting_for, waited_ms=waited))

    async def _send_control(self, message: ServerMessage) -> None:
        async with self._send_lock:
            await self.channel.send_text(encode_server_message(message))
            self._last_sent_at = time.perf_counter()

    async def _send_audio(self, frame: bytes, audio_s: float) -> None:
        async with self._send_lock:
            # SlowConsumerError when the client has fallen too far behind real time.
            await self._lag.send(self.channel.send_bytes(frame), audio_s)
            self._last_sent_at = time.perf_counter()
        # A send into a writable socket never suspends: yield, so that a burst of frames lets
        # other sessions run and a disconnect is noticed before the next frame.
        await asyncio.sleep(0)


_LIMIT_MESSAGES: Final = {
    ErrorCode.IDLE_TIMEOUT: "no message for too long: the session is closed",
    ErrorCode.SESSION_TIMEOUT: "the session reached its maximum duration and is closed",
}


def _is_disconnect_error(error: BaseException) -> bool:
    return isinstance(error, DISCONNECT_ERRORS)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)
