"""voicestream as a Pipecat TTS service: one persistent bidi session for the whole conversation.

    tts = VoicestreamTTSService(url="ws://127.0.0.1:8080")                  # a local server
    tts = VoicestreamTTSService(endpoint_name="kokoro", region="us-east-1")  # a SageMaker endpoint

How it maps onto Pipecat's TTS base (pipecat-ai 1.14, `TTSService`):

- Text aggregation is ours: the service asks Pipecat for TOKEN mode, so every LLM token reaches
  `run_tts`, and feeds voicestream's `SentenceChunker` (fast first clause, then sentences) per
  audio context. Each piece goes into the open session at once (`SpeechSession.send` is
  pipelined: sentence 2 is synthesized while sentence 1 plays); `flush_audio` (the end of the
  LLM's reply, or of a `TTSSpeakFrame`) sends what is left.
- Audio: one receive task reads the session's events and appends each request's audio to its
  audio context (`TTSAudioRawFrame` with the context id); a context ends (`TTSStoppedFrame`)
  once it was flushed and every request of it completed.
- Word timestamps: the server's `words` frames, shifted to the context's own timeline (the audio
  of its earlier sentences), go to `add_word_timestamps`: Pipecat then emits `TTSTextFrame`s in
  step with playback.
- Interruption: `on_audio_context_interrupted` drops the context and cancels its requests by
  id (`cancel` with `request_id`: the server stops the one in progress and drops the queued
  ones; other contexts' requests go on); the session stays open, so an interruption never
  reconnects. Audio of the dropped requests that was already on its way is discarded.
- Metrics: Pipecat's TTFB (context start → first audio) and TTS usage metrics.
- The session is opened at `start`, kept alive with pings, and reopened on the next sentence
  if the server closed it (idle limit, restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipecat.audio.utils import create_stream_resampler
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TextAggregationMode, TTSService

from voicestream.chunker import FIRST_CLAUSE_MIN_WORDS, SentenceChunker
from voicestream.integrations.text_options import text_options
from voicestream.speech import (
    Audio,
    Cancelled,
    ErrorMessage,
    RequestCompleted,
    SessionClosed,
    SessionError,
    SpeechSession,
    SynthesisStart,
    Upstream,
    UpstreamSettings,
    Words,
    open_session,
)
from voicestream.wire.bidi import DEFAULT_VOICE, SAMPLE_RATE, SAMPLE_RATES
from voicestream.wire.vllm_omni import SessionConfig

SessionFactory = Callable[[], SpeechSession]
logger = logging.getLogger(__name__)


@dataclass
class _Context:
    """One Pipecat audio context: its chunker, its requests, and its audio timeline."""

    chunker: SentenceChunker
    pending: set[str] = field(default_factory=set)
    flushed: bool = False
    audio_s: float = 0.0  # audio received for it so far: where its next request starts


class VoicestreamTTSService(TTSService):
    """A Pipecat TTS service on one persistent voicestream bidi session (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str | None = None,
        endpoint_name: str | None = None,
        region: str | None = None,
        session_factory: SessionFactory | None = None,
        upstream: Upstream = "kokoro",
        vllm_omni: SessionConfig | None = None,
        voice: str | None = None,
        speed: float | None = None,
        lexicon: Mapping[str, str] | None = None,
        normalize: bool | None = None,
        first_clause_min_words: int | None = FIRST_CLAUSE_MIN_WORDS,
        keepalive_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        """Exactly one of `url` (a speech server), `endpoint_name` (+ `region`: a SageMaker
        endpoint, needs voicestream's aws extra) or `session_factory` (tests, custom transports).
        `lexicon` (word -> "/phonemes/" or a respelling) and `normalize` (False: speak the text as
        written) go with every sentence, as in docs/protocol.md; Kokoro upstream only."""
        options = text_options(upstream, lexicon, normalize)
        if sum(bool(x) for x in (url, endpoint_name, session_factory)) != 1:
            raise ValueError("give exactly one of url, endpoint_name or session_factory")
        if endpoint_name and not region:
            raise ValueError("endpoint_name needs region")
        if session_factory is None:
            # `upstream` "vllm-omni" speaks to Qwen3-TTS (`vllm_omni`: its voice, language...).
            where = UpstreamSettings(
                upstream, url=url, endpoint=endpoint_name, region=region, vllm_omni=vllm_omni, words=True
            )
            session_factory = lambda: open_session(where)  # noqa: E731
        if voice is None:  # vLLM-Omni's voice is its session config's
            voice = DEFAULT_VOICE if upstream == "kokoro" else None
        # Pipecat ends an audio context that stays silent this long. Ours end on their own (the
        # last request's synthesis_complete), so this is only a safety net; Pipecat's default
        # of 3 s is shorter than a first sentence takes on a busy CPU.
        kwargs.setdefault("stop_frame_timeout_s", 20.0)
        super().__init__(
            text_aggregation_mode=TextAggregationMode.TOKEN,  # voicestream's chunker aggregates
            push_text_frames=False,  # words come timed from the server (TTSTextFrame in step with audio)
            push_start_frame=True,
            push_stop_frames=True,
            settings=TTSSettings(
                model="kokoro-82m" if upstream == "kokoro" else "qwen3-tts", voice=voice, language=None
            ),
            **kwargs,
        )
        self._open_session = session_factory
        self._speed = speed
        self._text_options = options
        self._first_clause_min_words = first_clause_min_words
        self._keepalive_s = keepalive_s
        self._session: SpeechSession | None = None
        self._receive_task: asyncio.Task[None] | None = None
        self._keepalive_task: asyncio.Task[None] | None = None
        self._connect_lock = asyncio.Lock()
        self._contexts: dict[str, _Context] = {}
        self._context_of: dict[str, str] = {}  # request id -> context id
        self._starts_at: dict[str, float] = {}  # request id -> its start on its context's timeline
        self._rate_of: dict[str, int] = {}  # request id -> the rate its audio comes at (synthesis_start)
        self._ids = itertools.count(1)
        self._out_resampler = create_stream_resampler()
        self.cancelled_at: list[float] = []
        """Monotonic times at which the server confirmed a cancel (`cancelled`): for tests and logs."""

    def can_generate_metrics(self) -> bool:
        return True

    @property
    def supports_processing_metrics(self) -> bool:
        return False  # run_tts hands text over; audio arrives on the receive task

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self._ensure_session()

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._close_session(cancel=False)

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._close_session(cancel=True)

    async def _ensure_session(self) -> SpeechSession | None:
        async with self._connect_lock:
            if self._session is not None:
                return self._session
            session = self._open_session()
            try:
                await session.connect()
            except SessionError as error:
                await self.push_error(error_msg=f"voicestream: cannot open the speech session: {error}")
                return None
            self._session = session
            self._receive_task = self.create_task(self._receive(session), name="voicestream-receive")
            if self._keepalive_s > 0:
                self._keepalive_task = self.create_task(self._keepalive(session), name="voicestream-keepalive")
            await self._call_event_handler("on_connected")
            return session

    async def _close_session(self, *, cancel: bool) -> None:
        session, self._session = self._session, None
        for task in (self._keepalive_task, self._receive_task):
            if task is not None:
                await self.cancel_task(task)
        self._keepalive_task = self._receive_task = None
        if session is not None:
            with contextlib.suppress(SessionError):
                if cancel and self._context_of:
                    await session.cancel()
            await session.close()
            await self._call_event_handler("on_disconnected")
        self._context_of.clear()
        self._contexts.clear()

    async def _keepalive(self, session: SpeechSession) -> None:
        # The server closes a session after VOICESTREAM_IDLE_TIMEOUT_S without a message.
        while True:
            await asyncio.sleep(self._keepalive_s)
            with contextlib.suppress(SessionError):
                await session.ping()

    # --- text in -------------------------------------------------------------------------------

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None]:
        """A token of the turn: cut pieces go out at once; audio arrives on the receive task."""
        context = self._context(context_id)
        for piece in context.chunker.feed(text):
            error = await self._send(piece, context_id)
            if error is not None:
                yield error
                return
        yield None

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn's text has ended: send what the chunker still holds, and let the context end."""
        context_id = context_id or self.get_active_audio_context_id()
        context = self._contexts.get(context_id or "")
        if context_id is None or context is None:
            return
        rest = context.chunker.flush()
        if rest is not None:
            error = await self._send(rest, context_id)
            if error is not None:
                await self.push_error_frame(error)
        context.flushed = True
        await self._end_if_done(context_id)

    def _context(self, context_id: str) -> _Context:
        context = self._contexts.get(context_id)
        if context is None:
            chunker = SentenceChunker(first_clause_min_words=self._first_clause_min_words)
            context = self._contexts[context_id] = _Context(chunker)
        return context

    async def _send(self, piece: str, context_id: str) -> ErrorFrame | None:
        session = await self._ensure_session()
        if session is None:
            return ErrorFrame(error="voicestream: the speech session is not open")
        request_id = f"{context_id}:{next(self._ids)}"
        self._context_of[request_id] = context_id
        self._contexts[context_id].pending.add(request_id)
        try:
            voice = self._settings.voice if isinstance(self._settings.voice, str) else None
            await session.send(
                piece,
                request_id=request_id,
                voice=voice,
                speed=self._speed,
                lexicon=self._text_options.lexicon,
                normalize=self._text_options.normalize,
                words=True,
                sample_rate=self.server_sample_rate,
            )
        except SessionError as error:
            self._forget(request_id)
            await self._drop_session(session)
            return ErrorFrame(error=f"voicestream: sending to the speech server failed: {error}")
        await self.start_tts_usage_metrics(piece)
        return None

    # --- audio out -----------------------------------------------------------------------------

    async def _receive(self, session: SpeechSession) -> None:
        try:
            async for event in session.events():
                if isinstance(event, Audio):
                    await self._on_audio(event)
                elif isinstance(event, SynthesisStart):
                    self._on_start(event)
                elif isinstance(event, Words):
                    await self._on_words(event)
                elif isinstance(event, RequestCompleted):
                    await self._on_done(event.request_id)
                elif isinstance(event, ErrorMessage):
                    await self.push_error(error_msg=f"voicestream: [{event.code}] {event.message}")
                    if event.request_id is not None:
                        await self._on_done(event.request_id)
                elif isinstance(event, Cancelled):
                    self.cancelled_at.append(asyncio.get_running_loop().time())
                    for request_id in event.request_ids:
                        self._forget(request_id)
                elif isinstance(event, SessionClosed):
                    break
        except SessionError as error:
            await self.push_error(error_msg=f"voicestream: the speech session failed: {error}")
        # The session is over: contexts waiting on it would never end.
        self._receive_task = None
        await self._drop_session(session)

    async def _drop_session(self, session: SpeechSession) -> None:
        if self._session is session:
            self._session = None
            if self._keepalive_task is not None:
                await self.cancel_task(self._keepalive_task)
                self._keepalive_task = None
            with contextlib.suppress(SessionError):
                await session.close()
        for request_id in list(self._context_of):
            context_id = self._context_of[request_id]
            await self._on_done(request_id)
            self._forget(request_id)
            if context_id in self._contexts and self.audio_context_available(context_id):
                await self.remove_audio_context(context_id)

    @property
    def server_sample_rate(self) -> int:
        """The rate asked of the server: the pipeline's own (Pipecat's telephony serializers run
        at 8 kHz), so the server resamples once, statefully; a rate the server does not offer
        comes at Kokoro's 24 kHz and is resampled here."""
        return self.sample_rate if self.sample_rate in SAMPLE_RATES else SAMPLE_RATE

    def _on_start(self, event: SynthesisStart) -> None:
        self._rate_of[event.request_id] = event.sample_rate
        context = self._contexts.get(self._context_of.get(event.request_id, ""))
        if context is not None:
            self._starts_at[event.request_id] = context.audio_s

    async def _on_audio(self, event: Audio) -> None:
        context_id = self._context_of.get(event.request_id)
        if context_id is None or not self.audio_context_available(context_id):
            return  # interrupted: its audio may still be on its way until the server's `cancelled`
        rate = self._rate_of.get(event.request_id, SAMPLE_RATE)
        self._contexts[context_id].audio_s += len(event.data) / 2 / rate
        audio = event.data
        if self.sample_rate != rate:
            audio = await self._out_resampler.resample(audio, rate, self.sample_rate)
        frame = TTSAudioRawFrame(audio=audio, sample_rate=self.sample_rate, num_channels=1, context_id=context_id)
        await self.append_to_audio_context(context_id, frame)

    async def _on_words(self, event: Words) -> None:
        context_id = self._context_of.get(event.request_id)
        if context_id is None:
            return
        offset = self._starts_at.get(event.request_id, 0.0)
        await self.add_word_timestamps([(word.word, offset + word.start_s) for word in event.words], context_id)

    async def _on_done(self, request_id: str) -> None:
        context_id = self._context_of.pop(request_id, None)
        self._starts_at.pop(request_id, None)
        self._rate_of.pop(request_id, None)
        if context_id is None or context_id not in self._contexts:
            return
        self._contexts[context_id].pending.discard(request_id)
        await self._end_if_done(context_id)

    async def _end_if_done(self, context_id: str) -> None:
        context = self._contexts.get(context_id)
        if context is None or not context.flushed or context.pending:
            return
        del self._contexts[context_id]
        if self.audio_context_available(context_id):
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)

    def _forget(self, request_id: str) -> None:
        context_id = self._context_of.pop(request_id, None)
        self._starts_at.pop(request_id, None)
        self._rate_of.pop(request_id, None)
        if context_id is not None and context_id in self._contexts:
            self._contexts[context_id].pending.discard(request_id)

    # --- interruption --------------------------------------------------------------------------

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Barge-in: forget the context and stop the server's work on its requests."""
        await self.stop_all_metrics()
        context = self._contexts.pop(context_id, None)
        dropped = [rid for rid, ctx in self._context_of.items() if ctx == context_id]
        for request_id in dropped:
            self._context_of.pop(request_id, None)
            self._starts_at.pop(request_id, None)
            self._rate_of.pop(request_id, None)
        session = self._session
        if session is not None:
            # This context's requests alone: another audio context Pipecat still holds keeps its
            # audio. Last first, so that the server never starts a queued one in between; the
            # one in progress (the first) is stopped last, a few messages later. The session
            # stays open: an interruption never reconnects.
            ordered = dict.fromkeys([*dropped, *(context.pending if context is not None else ())])
            for request_id in reversed(ordered):
                try:
                    await session.cancel(request_id)
                except SessionError as error:
                    logger.warning("%s: cancel failed: %s", self, error)
                    break
        await super().on_audio_context_interrupted(context_id)
