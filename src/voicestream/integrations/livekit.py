"""voicestream as a LiveKit Agents TTS (livekit-agents 1.8): streaming, with aligned transcripts.

    from voicestream.integrations.livekit import TTS
    tts = TTS(url="ws://127.0.0.1:8080")                          # a local server
    tts = TTS(endpoint_name="kokoro", region="us-east-1")         # a SageMaker endpoint

- `synthesize(text)` (`ChunkedStream`): one request on a bidi session; the server cuts the text
  into sentences and streams each one's audio as soon as it exists.
- `stream()` (`SynthesizeStream`): `push_text` tokens as the LLM writes them; voicestream's
  sentence chunker (fast first clause) cuts pieces that go into the open session at once
  (pipelined); `flush()` sends what is pending, `end_input()` ends the segment once every piece
  was spoken. The server's word timings come out as `TimedString`s on the segment's timeline
  (`aligned_transcript=True`), which LiveKit's transcription synchronizer plays in step with
  the audio.
- Sessions are pooled (`prewarm()` opens one ahead of the first turn); a stream gives its
  session back when it ends. One closed early (`aclose()`: barge-in, the agent was
  interrupted) first sends `cancel`, so the server stops synthesizing at once, and the next
  reply speaks on the same session: an interruption never reconnects.
  `TTS.aclose()` does that for every stream still open and closes the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    APIConnectionError,
    APIConnectOptions,
    APIStatusError,
    tts,
    utils,
)
from livekit.agents.types import TimedString

from voicestream.chunker import FIRST_CLAUSE_MIN_WORDS, SentenceChunker
from voicestream.integrations.text_options import text_options
from voicestream.speech import (
    Audio,
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
from voicestream.wire.words import WordTiming

SessionFactory = Callable[[], SpeechSession]
MIME_TYPE = "audio/pcm"


class _SessionPool:
    """Connected sessions waiting for a stream; at most `max_idle` are kept."""

    def __init__(self, factory: SessionFactory, max_idle: int = 1) -> None:
        self.factory = factory
        self.max_idle = max_idle
        self._idle: list[SpeechSession] = []
        self._prewarm: asyncio.Task[None] | None = None

    async def acquire(self) -> SpeechSession:
        if self._prewarm is not None:
            await asyncio.gather(self._prewarm, return_exceptions=True)
            self._prewarm = None
        while self._idle:
            session = self._idle.pop()
            if session.is_open:
                return session
        session = self.factory()
        try:
            await session.connect()
        except SessionError as error:
            raise APIConnectionError(f"voicestream: cannot open the speech session: {error}") from error
        return session

    async def release(self, session: SpeechSession, reusable: bool) -> None:
        if reusable and session.is_open and len(self._idle) < self.max_idle:
            self._idle.append(session)
            return
        await session.close()

    def prewarm(self) -> None:
        if self._prewarm is None and not self._idle:
            self._prewarm = asyncio.create_task(self._open_one(), name="voicestream-prewarm")

    async def _open_one(self) -> None:
        session = self.factory()
        with contextlib.suppress(SessionError):
            await session.connect()
            self._idle.append(session)

    async def aclose(self) -> None:
        if self._prewarm is not None:
            await asyncio.gather(self._prewarm, return_exceptions=True)
        sessions, self._idle = self._idle, []
        for session in sessions:
            await session.close()


@dataclass
class _Timeline:
    """Where each request starts on the segment's audio timeline, for its word timings."""

    audio_s: float = 0.0
    starts: dict[str, float] = field(default_factory=dict)

    def timed(self, request_id: str, words: tuple[WordTiming, ...]) -> list[TimedString]:
        offset = self.starts.get(request_id, 0.0)
        return [TimedString(f"{w.word} ", start_time=offset + w.start_s, end_time=offset + w.end_s) for w in words]


class TTS(tts.TTS):
    """A LiveKit Agents TTS on voicestream bidi sessions (see the module docstring)."""

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
        sample_rate: int = SAMPLE_RATE,
    ) -> None:
        """Exactly one of `url` (a speech server), `endpoint_name` (+ `region`: a SageMaker
        endpoint, needs voicestream's aws extra) or `session_factory`. `sample_rate`: the rate
        the agent's audio runs at (one of wire.bidi.SAMPLE_RATES; e.g. 8000 or 16000 for a SIP
        room): the server delivers that rate, resampled once and statefully, so LiveKit has
        nothing left to resample. `lexicon` (word -> "/phonemes/" or a respelling) and `normalize`
        (False: speak the text as written) go with every request, as in docs/protocol.md; Kokoro
        upstream only."""
        options = text_options(upstream, lexicon, normalize)
        if sample_rate not in SAMPLE_RATES:
            raise ValueError(f"sample_rate must be one of {', '.join(map(str, SAMPLE_RATES))}, got {sample_rate}")
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
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.voice = voice
        self.upstream = upstream
        self.speed = speed
        self.text_options = options
        self.first_clause_min_words = first_clause_min_words
        self._pool = _SessionPool(session_factory)
        self._streams: weakref.WeakSet[SynthesizeStream | ChunkedStream] = weakref.WeakSet()

    async def _send(self, session: SpeechSession, text: str) -> str:
        """`text` as one request with this TTS's options: its request id."""
        return await session.send(
            text,
            voice=self.voice,
            speed=self.speed,
            words=True,
            sample_rate=self.sample_rate,
            lexicon=self.text_options.lexicon,
            normalize=self.text_options.normalize,
        )

    @property
    def model(self) -> str:
        return "kokoro-82m" if self.upstream == "kokoro" else "qwen3-tts"

    @property
    def provider(self) -> str:
        return "voicestream"

    def prewarm(self) -> None:
        self._pool.prewarm()

    def synthesize(self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> ChunkedStream:
        stream = ChunkedStream(tts=self, input_text=text, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> SynthesizeStream:
        stream = SynthesizeStream(tts=self, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    async def aclose(self) -> None:
        """Close every stream still open (the server stops their work) and the pooled sessions."""
        for stream in list(self._streams):
            await stream.aclose()
        self._streams.clear()
        await self._pool.aclose()


async def _finish(pool: _SessionPool, session: SpeechSession, outstanding: bool) -> None:
    """Give a session back; one interrupted with requests in flight first cancels them (it
    serves one stream at a time: they are all this stream's), so the next stream reuses it and
    an interruption never reconnects. What the cancelled requests still had on its way, and
    the `cancelled` answer, reach the next stream, which reads only its own request ids."""
    reusable = True
    if outstanding:
        try:
            await session.cancel()
        except SessionError:
            reusable = False
    await pool.release(session, reusable=reusable)


def _refusal(event: ErrorMessage) -> APIStatusError:
    return APIStatusError(f"voicestream: [{event.code}] {event.message}", status_code=400, body=event.body())


class ChunkedStream(tts.ChunkedStream):
    """`TTS.synthesize`: one request; its audio and word timings as they stream."""

    def __init__(self, *, tts: TTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._voicestream = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._voicestream
        session = await owner._pool.acquire()
        outstanding = True
        try:
            request_id = await owner._send(session, self.input_text)
            output_emitter.initialize(
                request_id=request_id, sample_rate=owner.sample_rate, num_channels=1, mime_type=MIME_TYPE
            )
            timeline = _Timeline()
            async with contextlib.aclosing(session.events()) as events:
                async for event in events:
                    if getattr(event, "request_id", None) != request_id:
                        continue
                    if isinstance(event, Audio):
                        output_emitter.push(event.data)
                    elif isinstance(event, Words):
                        output_emitter.push_timed_transcript(timeline.timed(request_id, event.words))
                    elif isinstance(event, RequestCompleted):
                        outstanding = False
                        break
                    elif isinstance(event, ErrorMessage):
                        outstanding = False
                        raise _refusal(event)
            if outstanding:
                raise APIConnectionError("voicestream: the session ended before the audio did")
            output_emitter.flush()
        except SessionError as error:
            raise APIConnectionError(f"voicestream: {error}") from error
        finally:
            await asyncio.shield(_finish(owner._pool, session, outstanding))


class SynthesizeStream(tts.SynthesizeStream):
    """`TTS.stream`: tokens in, pieces out as the chunker cuts them, audio and timed words back."""

    def __init__(self, *, tts: TTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._voicestream = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._voicestream
        output_emitter.initialize(
            request_id=utils.shortuuid(),
            sample_rate=owner.sample_rate,
            num_channels=1,
            mime_type=MIME_TYPE,
            stream=True,
        )
        output_emitter.start_segment(segment_id=utils.shortuuid())
        session = await owner._pool.acquire()
        sent: list[str] = []
        completed: set[str] = set()
        all_sent = asyncio.Event()
        all_spoken = asyncio.Event()
        timeline = _Timeline()

        def check_spoken() -> None:
            if all_sent.is_set() and completed >= set(sent):
                all_spoken.set()

        async def send(piece: str) -> None:
            self._mark_started()
            sent.append(await owner._send(session, piece))

        async def read_text() -> None:
            chunker = SentenceChunker(first_clause_min_words=owner.first_clause_min_words)
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    rest = chunker.flush()
                    if rest is not None:
                        await send(rest)
                    continue
                for piece in chunker.feed(data):
                    await send(piece)
            rest = chunker.flush()
            if rest is not None:
                await send(rest)
            all_sent.set()
            check_spoken()

        async def read_audio() -> None:
            async for event in session.events():
                request_id = getattr(event, "request_id", None)
                if isinstance(event, SessionClosed):
                    raise APIConnectionError("voicestream: the server closed the session mid-segment")
                if request_id not in sent:
                    continue
                if isinstance(event, Audio):
                    timeline.audio_s += len(event.data) / 2 / owner.sample_rate
                    output_emitter.push(event.data)
                elif isinstance(event, SynthesisStart):
                    timeline.starts[event.request_id] = timeline.audio_s
                elif isinstance(event, Words):
                    output_emitter.push_timed_transcript(timeline.timed(event.request_id, event.words))
                elif isinstance(event, RequestCompleted):
                    completed.add(event.request_id)
                    check_spoken()
                elif isinstance(event, ErrorMessage):
                    raise _refusal(event)

        text_task, audio_task = asyncio.create_task(read_text()), asyncio.create_task(read_audio())
        spoken = asyncio.create_task(all_spoken.wait())
        tasks = [text_task, audio_task]
        try:
            pending: set[asyncio.Task[Any]] = {text_task, audio_task, spoken}
            while not spoken.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done - {spoken}:
                    error = task.exception()
                    if error is not None:
                        raise error
                    if task is audio_task:  # the session's events ended before every piece was spoken
                        raise APIConnectionError("voicestream: the session ended before the audio did")
            output_emitter.end_segment()
        except SessionError as error:
            raise APIConnectionError(f"voicestream: {error}") from error
        finally:
            for task in [*tasks, spoken]:
                task.cancel()
            await asyncio.gather(*tasks, spoken, return_exceptions=True)
            outstanding = not (all_sent.is_set() and completed >= set(sent))
            await asyncio.shield(_finish(owner._pool, session, outstanding))
