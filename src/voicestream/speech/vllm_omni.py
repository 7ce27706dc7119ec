"""VllmOmniSession: a `SpeechSession` on vLLM-Omni's `/v1/audio/speech/stream` (Qwen3-TTS).

The wire is not Kokoro's (docs/vllm-omni.md): text frames only, `session.config` first, no
request ids, no cancel, no ping. This class maps it onto the events and semantics of
`BidiSession`, so `run_bidi`/`run_batch`, the speak function, the tasks and the clients work
unchanged with either model:

- one `send` = one utterance: `input.text` pieces (each under upstream's 128 KiB message limit)
  then `input.done`; the server answers in order, so requests map to utterances by order. Every
  `audio.start`/`audio.done` pair before an utterance's `session.done` belongs to it
  (`split_granularity="sentence"` works too); pairing is checked, a violation fails the session.
- `session.config` is sent first on every connection, from the session-level `SessionConfig`
  (voice, language, instructions, reference audio: whatever the model takes); a request with
  another voice resends it between utterances (upstream keeps it sticky).
- cancel = close this connection (upstream aborts the request in progress) and open a new one
  for the next `send`; `Cancelled` is answered locally. A connection the server ends while
  nothing is outstanding (its idle timeout; servers before the flush change close after every
  `session.done`) is reopened the same way; requests it never started are sent again once.
- an empty `input.text` every `keepalive_s` while idle keeps the server's 30 s idle timeout away.
- `ping` is answered (`Pong`) once every request sent before it is answered: upstream has no
  ping message, and the connection's own liveness is the transport's (WebSocket pings).

Audio is upstream's streamed s16le PCM; `format="wav"` gets a streaming WAV header added here.
`speed` other than 1 and `mp3` are refused with a clear error (`ProtocolError`): upstream does
not change speed while streaming, and MP3 encoding would need lameenc, which this Lambda-side
package does not carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from voicestream.wire.bidi import AudioFormat, Cancelled, Pong, SessionClosed, SynthesisStart, wav_header
from voicestream.wire.errors import ErrorCode, ErrorMessage, ProtocolError
from voicestream.wire.vllm_omni import (
    DEFAULT_SAMPLE_RATE,
    SAGEMAKER_INVOCATION_PATH,
    SPEECH_STREAM_PATH,
    AudioChunk,
    AudioDone,
    AudioStart,
    ClientMessage,
    InputDone,
    InputText,
    ServerError,
    SessionClose,
    SessionConfig,
    SessionDone,
    VllmOmniError,
    VllmOmniErrorCode,
    encode_client_message,
    input_text_messages,
    parse_server_message,
    pcm_duration_ms,
)

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
from .transport import Payload, Transport

logger = logging.getLogger(__name__)

TransportFactory = Callable[[], Transport]
"""Makes a new, unopened transport to the speech stream route (one per connection)."""

_Item = Event | SessionError | None
"""What the readers hand the consumer: an event, the failure that ends the session, or its end."""

_IDLE_TIMEOUT = VllmOmniErrorCode.IDLE_TIMEOUT

# Errors that concern the utterance being spoken (or about to be); the others (malformed input
# the client sent on purpose, unknown types) concern no request.
_REQUEST_ERRORS = frozenset(
    {
        VllmOmniErrorCode.GENERATION_FAILED,
        VllmOmniErrorCode.WORD_TIMESTAMPS_UNAVAILABLE,
        VllmOmniErrorCode.INVALID_CONFIG,
        VllmOmniErrorCode.UNKNOWN_MODEL,
        VllmOmniErrorCode.MESSAGE_TOO_LARGE,
        VllmOmniErrorCode.INVALID_TEXT,
        VllmOmniErrorCode.CONFIG_WHILE_BUFFERED,
    }
)


def refused_options(speed: float | None, format: AudioFormat, sample_rate: int | None = None) -> ProtocolError | None:
    """What a vLLM-Omni upstream cannot do (a 400 for the caller), or None."""
    if speed is not None and speed != 1.0:
        return ProtocolError(
            ErrorCode.INVALID_SPEED,
            f"speed {speed}: vLLM-Omni streams audio only at speed 1.0 (it refuses a speed change "
            "with stream_audio); use the Kokoro upstream for other speeds",
        )
    if format not in ("pcm", "wav"):
        return ProtocolError(
            ErrorCode.INVALID_FORMAT,
            f"format {format}: the vLLM-Omni upstream streams PCM (or WAV, with the header added here); "
            f"use the Kokoro upstream for {format}",
        )
    if sample_rate is not None and sample_rate != DEFAULT_SAMPLE_RATE:
        return ProtocolError(
            ErrorCode.INVALID_SAMPLE_RATE,
            f"sample_rate {sample_rate}: the vLLM-Omni upstream streams at {DEFAULT_SAMPLE_RATE} Hz only; "
            "use the Kokoro upstream for other rates",
        )
    return None


@dataclass(eq=False)
class _Request:
    """One utterance: what was asked, and what came back for it so far."""

    timing: RequestTimings
    voice: str | None
    format: AudioFormat
    sample_rate: int = DEFAULT_SAMPLE_RATE
    pairs: int = 0  # audio.start/audio.done pairs received
    pcm_bytes: int = 0
    header_sent: bool = False
    replayed: bool = False

    @property
    def rid(self) -> str:
        return self.timing.request_id

    @property
    def started(self) -> bool:
        return self.pairs > 0 or self.timing.audio_bytes > 0

    @property
    def finished(self) -> bool:
        return self.timing.outcome != "pending"


@dataclass(eq=False)
class _Connection:
    """One WebSocket (or SageMaker stream) of the session: its transport and its utterances."""

    number: int
    transport: Transport
    voice: str | None  # the voice its server-side config speaks with
    queue: deque[_Request] = field(default_factory=deque)  # sent, no session.done yet
    reader: asyncio.Task[None] | None = None
    keepalive: asyncio.Task[None] | None = None
    retired: bool = False  # we closed it (cancel, close): what it still delivers is dropped
    open_pair: bool = False
    utterances_done: int = 0
    last_message: str | None = None
    last_sent_at: float = 0.0
    fatal_error: ServerError | None = None


class VllmOmniSession(SessionLifecycle[_Item]):
    """A `SpeechSession` to a vLLM-Omni server; see the module docstring."""

    def __init__(
        self,
        open_transport: TransportFactory,
        config: SessionConfig | None = None,
        *,
        description: str = "vLLM-Omni speech stream",
        connect_timeout: float = 15.0,
        silence_timeout: float = 60.0,
        close_timeout: float = 10.0,
        keepalive_s: float | None = 10.0,
    ) -> None:
        """`config`: the session-level `session.config` (voice, language, instructions,
        ref_audio/ref_text, task_type, split_granularity...); it must stream PCM, which is the
        default. `silence_timeout`: seconds without a server message while answers are due
        (the first request on a fresh server may take long: torch.compile warms up)."""
        config = config or SessionConfig()
        if not config.stream_audio or config.response_format != "pcm":
            raise ValueError("VllmOmniSession streams PCM: config needs stream_audio=True, response_format='pcm'")
        if keepalive_s is not None and not keepalive_s > 0:
            raise ValueError(f"keepalive_s must be a positive number of seconds, got {keepalive_s!r}")
        super().__init__(connect_timeout=connect_timeout, silence_timeout=silence_timeout, close_timeout=close_timeout)
        self.open_transport = open_transport
        self.config = config
        self._description = description
        self.keepalive_s = keepalive_s
        self.connections = 0
        """Connections opened so far (more than one after a cancel, a replay or an idle close)."""
        self.pairs: dict[str, int] = {}
        """audio.start/audio.done pairs per request (one per sentence the server spoke for it)."""
        self._conn: _Connection | None = None
        self._pending: dict[str, _Request] = {}
        self._pings: list[set[str]] = []  # per ping: the requests it waits for
        self._end_pushed = False
        self._background: set[asyncio.Task[None]] = set()

    # --- construction helpers ---------------------------------------------------------------

    @classmethod
    def websocket(cls, url: str, config: SessionConfig | None = None, **options: Any) -> VllmOmniSession:
        """A session straight to a server: `ws://host:port` or the full route URL."""
        from .websocket import WebSocketTransport

        def open_transport() -> Transport:
            # A cancel closes the connection: wait at most 2 s for the server's closing handshake
            # (a server busy generating may answer it only then), then drop the TCP connection.
            return WebSocketTransport(url, frames="text", path=SPEECH_STREAM_PATH, close_timeout=2.0)

        description = f"vLLM-Omni {open_transport().description}"
        return cls(open_transport, config, description=description, **options)

    @classmethod
    def sagemaker(
        cls,
        endpoint_name: str,
        region: str,
        config: SessionConfig | None = None,
        *,
        http_client_factory: Callable[[], Any] | None = None,
        endpoint_uri: str | None = None,
        **options: Any,
    ) -> VllmOmniSession:
        """A session through a SageMaker endpoint running vLLM-Omni (the DLC): every payload
        part UTF8, the route as `model_invocation_path`. `http_client_factory` makes each
        connection's HTTP client (default: awscrt; tests pass a fake SageMaker's)."""
        from .sagemaker import SageMakerTransport  # the AWS SDK is an optional extra

        def open_transport() -> Transport:
            return SageMakerTransport(
                endpoint_name,
                region,
                frames="text",
                model_invocation_path=SAGEMAKER_INVOCATION_PATH,
                endpoint_uri=endpoint_uri,
                http_client=http_client_factory() if http_client_factory else None,
            )

        description = f"vLLM-Omni on SageMaker endpoint {endpoint_name!r} in {region}"
        return cls(open_transport, config, description=description, **options)

    @property
    def description(self) -> str:
        return self._description

    # --- lifecycle (the state machine is `SessionLifecycle`'s) ------------------------------------

    async def _open(self) -> None:
        """Open the first connection and send `session.config`."""
        async with self._send_lock:
            await self._open_connection()

    async def _release(self) -> None:
        self._state = SessionState.CLOSED

    async def _shut(self) -> None:
        """`session.close`, wait (at most `close_timeout`) for the server to close, release all."""
        conn = self._conn
        try:
            if conn is not None and not conn.retired and self._failure is None:
                with contextlib.suppress(SessionError, VllmOmniError):
                    async with self._send_lock:
                        await self._send(conn, SessionClose())
                    reader = conn.reader
                    if reader is not None:
                        # The server closes the WebSocket; the reader sees the end.
                        await asyncio.wait({reader}, timeout=self.close_timeout)
        finally:
            self._conn = None
            if conn is not None:
                await self._retire(conn)
            self._state = SessionState.CLOSED
            self._push_end(SessionClosed(reason="close"))
            if self._background:  # connections still closing after a cancel
                await asyncio.wait(set(self._background), timeout=self.close_timeout)
            for task in list(self._background):
                task.cancel()

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
    ) -> str:
        """Queue `text` as one utterance and return its request id at once (pipelined).

        `words` is accepted for the SpeechSession interface; vLLM-Omni times words only with a
        forced aligner its DLC does not start, so a reply through it has no `words` events
        (docs/vllm-omni.md)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"text is not valid Unicode: {exc.reason}") from exc
        audio_format: AudioFormat = format or "pcm"
        refused = refused_options(speed, audio_format, sample_rate)
        if refused is not None:
            raise refused
        if lexicon or phonemes:
            raise ProtocolError(
                ErrorCode.INVALID_REQUEST, "vLLM-Omni takes no lexicon or phoneme input: use the Kokoro upstream"
            )
        pieces = input_text_messages(text)
        self._ensure_open()
        if request_id is not None and request_id in self.timings:
            raise ValueError(f"request_id {request_id!r} was already used in this session")
        async with self._send_lock:
            self._ensure_open()
            rid = request_id if request_id is not None else self._new_request_id()
            if rid in self.timings:
                raise ValueError(f"request_id {rid!r} was already used in this session")
            request = _Request(
                timing=RequestTimings(request_id=rid, text=text, sent_at=time.perf_counter()),
                voice=voice or self.config.voice,
                format=audio_format,
            )
            self._expect()
            self.timings[rid] = request.timing
            self._pending[rid] = request
            try:
                conn = await self._connection()
                await self._send_utterance(conn, request, pieces)
            except SessionError:
                self._pending.pop(rid, None)
                request.timing.outcome = "error"
                request.timing.completed_at = time.perf_counter()
                raise
        return rid

    async def cancel(self, request_id: str | None = None) -> None:
        """Stop every unfinished request: close this connection (the server aborts what it is
        generating), answer `Cancelled` here; the next `send` opens a new connection.

        With `request_id`, that request alone: vLLM-Omni cannot abort one utterance of a
        connection, so it is answered cancelled at once and whatever the server still makes of
        it is dropped here; the others go on, on the same connection."""
        self._ensure_open()
        if request_id is not None:
            request = self._pending.get(request_id)
            alone = [request] if request is not None and not request.finished else []
            for each in alone:
                self._finish(each, time.perf_counter(), "cancelled")
            self._push(Cancelled(request_ids=tuple(each.rid for each in alone), request_id=request_id))
            self._answer_pings()
            return
        async with self._send_lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.retired = True  # from now on its audio is dropped; closing it may take a moment
                self._spawn(self._retire(conn))
            cancelled = [request for request in self._pending.values() if not request.finished]
            now = time.perf_counter()
            for request in cancelled:
                self._finish(request, now, "cancelled")
            self._push(Cancelled(request_ids=tuple(request.rid for request in cancelled)))
            self._answer_pings()

    async def ping(self) -> None:
        """Answered by a `Pong` once every request sent before it is answered (see module doc)."""
        self._ensure_open()
        self._expect()
        self._pings.append({rid for rid, request in self._pending.items() if not request.finished})
        self._answer_pings()

    def _expecting(self) -> bool:
        return bool(self._pending) or bool(self._pings) or self._state is SessionState.CLOSING

    def _outstanding(self) -> int:
        return len(self._pending)

    # --- connections (call with the send lock held) -------------------------------------------

    async def _connection(self) -> _Connection:
        """The open connection, or a new one (after a cancel, or the server closed an idle one)."""
        if self._conn is not None and not self._conn.retired:
            return self._conn
        return await self._open_connection()

    async def _open_connection(self) -> _Connection:
        transport = self.open_transport()
        try:
            async with asyncio.timeout(self.connect_timeout):
                await transport.connect()
        except TimeoutError as exc:
            with contextlib.suppress(SessionError, OSError):
                await transport.close()
            limit = self.connect_timeout
            raise SessionConnectError(f"could not open {transport.description} within {limit} s") from exc
        except BaseException:
            with contextlib.suppress(SessionError, OSError):
                await transport.close()
            raise
        self.connections += 1
        conn = _Connection(number=self.connections, transport=transport, voice=self.config.voice)
        conn.reader = asyncio.create_task(self._read(conn), name=f"vllm-omni-reader-{conn.number}")
        try:
            # First on every connection: upstream ends a session whose first message is anything else.
            await self._send(conn, self.config)
        except (SessionError, VllmOmniError) as exc:
            await self._retire(conn)
            if isinstance(exc, VllmOmniError):
                raise
            raise SessionConnectError(f"{transport.description}: session.config not sent: {exc}") from exc
        self._conn = conn
        if self.keepalive_s is not None:
            conn.keepalive = asyncio.create_task(self._keep_alive(conn), name=f"vllm-omni-keepalive-{conn.number}")
        return conn

    async def _send_utterance(self, conn: _Connection, request: _Request, pieces: list[InputText]) -> None:
        try:
            if request.voice != conn.voice:
                await self._send(conn, replace(self.config, voice=request.voice))
                conn.voice = request.voice
            # Queued before the text goes: its audio.start may arrive before send() returns.
            conn.queue.append(request)
            for piece in pieces:
                await self._send(conn, piece)
            await self._send(conn, InputDone())
        except SessionError as exc:
            self._fail(exc)
            raise

    async def _send(self, conn: _Connection, message: ClientMessage) -> None:
        # Always a str: every transport carries it as a text frame / UTF8 part (frames="text").
        await conn.transport.send(encode_client_message(message))
        conn.last_sent_at = time.perf_counter()

    async def _keep_alive(self, conn: _Connection) -> None:
        """While idle, an empty `input.text` (upstream: accepted, does nothing) every
        `keepalive_s`: the server's idle clock starts when it has finished our last utterance."""
        interval = self.keepalive_s
        assert interval is not None
        while True:
            wait = conn.last_sent_at + interval - time.perf_counter()
            if conn.queue:
                wait = interval  # busy: its idle clock does not run
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with self._send_lock:
                if conn.retired or self._state is not SessionState.OPEN:
                    return
                if conn.queue:
                    continue
                try:
                    await self._send(conn, InputText(""))
                except SessionError:
                    return  # the reader reports how the connection ended

    async def _retire(self, conn: _Connection) -> None:
        """Close a connection from our side; whatever it still delivers is dropped."""
        conn.retired = True
        if conn.keepalive is not None and conn.keepalive is not asyncio.current_task():
            conn.keepalive.cancel()
        with contextlib.suppress(SessionError, OSError, TimeoutError):
            await asyncio.wait_for(conn.transport.close(), self.close_timeout)
        reader = conn.reader
        if reader is not None and reader is not asyncio.current_task() and not reader.done():
            await asyncio.wait({reader}, timeout=self.close_timeout)
            if not reader.done():
                reader.cancel()  # the transport is gone: a stuck receive can corrupt nothing now
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

    # --- receiving: one reader per connection --------------------------------------------------

    async def _read(self, conn: _Connection) -> None:
        error: SessionError | None = None
        try:
            while True:
                payload = await conn.transport.receive()
                if conn.retired:
                    return
                if payload is None:
                    break
                received_at = time.perf_counter()
                self._inbox.progress(received_at)
                self._on_message(conn, payload, received_at)
        except ProtocolViolationError as exc:
            if not conn.retired:
                self._fail(exc)
                self._spawn(self._retire(conn))
            return
        except SessionError as exc:
            error = exc
        except Exception as exc:  # a transport bug must reach the consumer, not hang it
            logger.exception("vLLM-Omni transport failed")
            error = ConnectionLostError(f"{conn.transport.description}: {exc!r}")
        if not conn.retired:
            await self._connection_ended(conn, error)

    async def _connection_ended(self, conn: _Connection, error: SessionError | None) -> None:
        conn.retired = True
        if conn.keepalive is not None:
            conn.keepalive.cancel()
        with contextlib.suppress(SessionError, OSError, TimeoutError):
            await asyncio.wait_for(conn.transport.close(), self.close_timeout)
        if self._conn is conn:
            self._conn = None
        if self._state is not SessionState.OPEN:
            return  # closing: close() ends the stream of events
        outstanding = [request for request in conn.queue if not request.finished]
        fatal = conn.fatal_error
        # Ends the server may choose while all is well: its idle timeout, or (servers before the
        # flush change) the end right after a session.done, with or without a close frame (that
        # depends on its WebSocket implementation). Anything else is a failure.
        if fatal is not None:
            benign = fatal.code is _IDLE_TIMEOUT
        else:
            benign = error is None or conn.last_message == SessionDone.__name__
        if benign and not outstanding:
            why = fatal.message if fatal is not None else "closed by the server"
            logger.info("vLLM-Omni connection %d ended while idle (%s); the next send reopens", conn.number, why)
            return
        # Requests it never started are sent again on a new connection: always after a
        # connection that spoke something (old servers close after each utterance), otherwise
        # once (a server that drops every connection must not be retried forever).
        unstarted = not any(request.started for request in outstanding)
        if benign and unstarted and (conn.utterances_done > 0 or not any(r.replayed for r in outstanding)):
            self._spawn(self._replay(outstanding))
            return
        why = f"the server said: {fatal.message}" if fatal else (str(error) if error else "the stream ended")
        self._fail(
            ConnectionLostError(
                f"{self.description} ended the connection with {len(outstanding)} request(s) outstanding ({why})"
            )
        )

    async def _replay(self, requests: list[_Request]) -> None:
        """Send requests the server never started again, on a new connection (`_connection_ended`
        decides when)."""
        try:
            async with self._send_lock:
                if self._state is not SessionState.OPEN or self._failure is not None:
                    return
                conn = await self._connection()
                for request in requests:
                    if request.finished:
                        continue
                    request.replayed = True
                    logger.info("resending request %s on connection %d", request.rid, conn.number)
                    await self._send_utterance(conn, request, input_text_messages(request.timing.text))
        except SessionError as exc:
            self._fail(exc)
        except VllmOmniError as exc:  # cannot happen with a config that was sent once already
            self._fail(ConnectionLostError(f"{self.description}: requests not sent again: {exc}"))

    def _on_message(self, conn: _Connection, payload: Payload, at: float) -> None:
        if isinstance(payload, bytes):
            self._on_audio(conn, payload, at)
            return
        try:
            message = parse_server_message(payload)
        except VllmOmniError as exc:
            if exc.code == VllmOmniErrorCode.UNKNOWN_MESSAGE:
                logger.warning("ignoring vLLM-Omni message of unknown type: %.200s", payload)
                return
            raise ProtocolViolationError(f"malformed message from {self.description}: {exc.message}") from exc
        conn.last_message = type(message).__name__
        if isinstance(message, AudioStart):
            self._on_audio_start(conn, message, at)
        elif isinstance(message, AudioChunk):
            self._on_audio(conn, message.audio, at)
        elif isinstance(message, AudioDone):
            self._on_audio_done(conn, message, at)
        elif isinstance(message, SessionDone):
            self._on_session_done(conn, message, at)
        else:
            self._on_error(conn, message, at)

    def _current(self, conn: _Connection, what: str) -> _Request:
        if not conn.queue:
            raise ProtocolViolationError(f"{what} from {self.description} with no utterance outstanding")
        return conn.queue[0]

    def _on_audio_start(self, conn: _Connection, message: AudioStart, at: float) -> None:
        request = self._current(conn, "audio.start")
        if conn.open_pair:
            raise ProtocolViolationError(f"audio.start for request {request.rid} before the previous audio.done")
        if message.utterance_index is not None and message.utterance_index != conn.utterances_done:
            raise ProtocolViolationError(
                f"audio.start of utterance {message.utterance_index}, expected {conn.utterances_done}"
            )
        conn.open_pair = True
        request.pairs += 1
        if request.pairs > 1:
            return  # a later sentence of the same utterance (split_granularity sentence/clause)
        request.sample_rate = message.sample_rate or DEFAULT_SAMPLE_RATE
        request.timing.started_at = at
        if not request.finished:
            self._push(
                SynthesisStart(
                    request_id=request.rid,
                    format=request.format,
                    sample_rate=request.sample_rate,
                    voice=request.voice or "default",
                )
            )

    def _on_audio(self, conn: _Connection, data: bytes, at: float) -> None:
        request = self._current(conn, f"audio ({len(data)} bytes)")
        if not conn.open_pair:
            raise ProtocolViolationError(
                f"audio ({len(data)} bytes) for request {request.rid} outside audio.start/audio.done"
            )
        if request.finished or not data:
            return  # the request failed (its audio is to be discarded) or was cancelled
        request.pcm_bytes += len(data)
        self._deliver(request, data, at)

    def _deliver(self, request: _Request, data: bytes, at: float) -> None:
        if request.format == "wav" and not request.header_sent:
            data = wav_header(request.sample_rate) + data
            request.header_sent = True
        timing = request.timing
        if timing.first_audio_at is None and request.pcm_bytes:
            timing.first_audio_at = at
        timing.audio_bytes += len(data)
        timing.audio_frames += 1
        self._push(Audio(request_id=request.rid, data=data))

    def _on_audio_done(self, conn: _Connection, message: AudioDone, at: float) -> None:
        request = self._current(conn, "audio.done")
        if not conn.open_pair:
            raise ProtocolViolationError(f"audio.done for request {request.rid} without its audio.start")
        conn.open_pair = False
        self.pairs[request.rid] = self.pairs.get(request.rid, 0) + 1
        if message.error and not request.finished:
            self._fail_request(request, at, VllmOmniErrorCode.GENERATION_FAILED, "the server marked the audio failed")

    def _on_session_done(self, conn: _Connection, message: SessionDone, at: float) -> None:
        request = self._current(conn, "session.done")
        if conn.open_pair:
            raise ProtocolViolationError(f"session.done for request {request.rid} inside an open audio.start")
        conn.queue.popleft()
        conn.utterances_done += 1
        if request.finished:
            return
        if request.format == "wav" and not request.header_sent:
            self._deliver(request, b"", at)  # a WAV stream starts with its header, even a silent one
        timing = request.timing
        self._finish(request, at, "complete")
        audio_ms = pcm_duration_ms(request.pcm_bytes, request.sample_rate)
        timing.server_audio_ms = audio_ms
        self._push(
            RequestCompleted(
                request_id=request.rid,
                audio_bytes=timing.audio_bytes,
                audio_ms=audio_ms,
                # Upstream reports no timings: these are the client's, from send.
                first_audio_ms=None if timing.first_audio_s is None else timing.first_audio_s * 1000,
                synth_ms=(at - timing.sent_at) * 1000,
                timings=timing,
            )
        )
        self._answer_pings()

    def _on_error(self, conn: _Connection, message: ServerError, at: float) -> None:
        code = message.code
        if message.ends_session(configured=True):
            conn.fatal_error = message  # the connection ends next; _connection_ended decides
            logger.info("vLLM-Omni connection %d: %s", conn.number, message.message)
            return
        target = next((request for request in conn.queue if not request.finished), None)
        if code in _REQUEST_ERRORS and target is not None:
            self._fail_request(target, at, code, message.message)
            return
        self._push(ErrorMessage(code=str(code), message=message.message))

    # --- bookkeeping --------------------------------------------------------------------------

    def _fail_request(self, request: _Request, at: float, code: VllmOmniErrorCode, text: str) -> None:
        self._finish(request, at, "error")
        self._push(ErrorMessage(code=str(code), message=text, request_id=request.rid))
        self._answer_pings()

    def _finish(self, request: _Request, at: float, outcome: Outcome) -> None:
        self._pending.pop(request.rid, None)
        timing = request.timing
        if timing.completed_at is None:
            timing.completed_at = at
            timing.outcome = outcome

    def _answer_pings(self) -> None:
        while self._pings and not (self._pings[0] & set(self._pending)):
            self._pings.pop(0)
            self._push(Pong())

    def _push(self, item: Event) -> None:
        if not self._end_pushed:
            self._inbox.put(item)

    def _push_end(self, last: Event | None) -> None:
        if self._end_pushed:
            return
        if last is not None:
            self._inbox.put(last)
        self._inbox.put(None)
        self._end_pushed = True

    def _fail(self, error: SessionError) -> None:
        if self._failure is not None or self._end_pushed:
            return
        self._failure = error
        self._inbox.put(error)
        self._end_pushed = True

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- the consumer -------------------------------------------------------------------------

    async def _next_item(self) -> _Item:
        while not self._inbox:
            if self._ended:
                return None
            if self._state is SessionState.NEW:
                raise SessionClosedError("the session is not connected")
            await self._wait_for_item()
        return self._inbox.pop()

    async def events(self) -> AsyncGenerator[Event]:
        """Everything the session has to say, in order, until it ends (after `close()`).
        Raises a `SessionError` when it fails or goes silent while answers are due."""
        while True:
            if self._failure is not None and not self._inbox:
                raise self._failure
            try:
                item = await self._next_item()
            except SessionTimeoutError as exc:
                if self._failure is None:
                    self._failure = exc
                    self._end_pushed = True
                raise
            if isinstance(item, SessionError):
                raise item
            if item is None:
                self._ended = True
                return
            yield item
