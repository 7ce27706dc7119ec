"""The Pipecat plugin in a real Pipecat pipeline (PipelineWorker + WorkerRunner) against the real
local server: audio frames in order and exactly the audio the server makes for the chunker's
pieces, word timestamps as TTSTextFrames, TTFB metrics, interruption → cancel, and one session
across turns. Runs in .venv-pipecat (make test-plugins)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from voicestream.chunker import SentenceChunker
from voicestream.integrations.pipecat import VoicestreamTTSService
from voicestream.speak.sources import word_tokens
from voicestream.speech import BidiSession, VllmOmniSession
from voicestream.texts import bench_texts
from voicestream.wire.vllm_omni import SessionConfig

BOUND_S = 240.0


@dataclass
class Seen:
    at: float
    frame: Frame


class Collector(FrameProcessor):
    """The end of the pipeline: records every downstream frame with its arrival time."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Seen] = []
        self.arrived = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            self.frames.append(Seen(asyncio.get_running_loop().time(), frame))
            self.arrived.set()
        await self.push_frame(frame, direction)

    def of(self, kind: type) -> list[Frame]:
        return [seen.frame for seen in self.frames if isinstance(seen.frame, kind)]

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        async with asyncio.timeout(BOUND_S):
            while not condition():
                self.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.arrived.wait(), 1.0)
        assert condition(), what


@dataclass
class Running:
    tts: VoicestreamTTSService
    worker: PipelineWorker
    sink: Collector
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def say(self, text: str) -> None:
        frames: list[Frame] = [LLMFullResponseStartFrame()]
        frames += [LLMTextFrame(token) for token in word_tokens(text)]
        frames.append(LLMFullResponseEndFrame())
        await self.worker.queue_frames(frames)


@contextlib.asynccontextmanager
async def pipeline(url: str, out_rate: int = 24_000, **options: Any) -> AsyncIterator[Running]:
    tts = VoicestreamTTSService(url=url, voice="af_heart", **options)
    sink = Collector()
    worker = PipelineWorker(
        Pipeline([tts, sink]),
        params=PipelineParams(enable_metrics=True, audio_out_sample_rate=out_rate),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(worker: PipelineWorker, frame: Frame) -> None:
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    task = asyncio.create_task(runner.run())
    running = Running(tts, worker, sink, [task])
    try:
        async with asyncio.timeout(60):
            await started.wait()
        yield running
    finally:
        await worker.queue_frame(EndFrame())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                await task
        if not task.done():
            task.cancel()


def pieces_of(text: str) -> list[str]:
    chunker = SentenceChunker()  # the plugin's default cut
    pieces = [piece for token in word_tokens(text) for piece in chunker.feed(token)]
    rest = chunker.flush()
    return pieces + ([rest] if rest else [])


async def test_a_reply_is_spoken_in_order_as_the_chunker_cut_it(kokoro_url: str) -> None:
    text = bench_texts()["paragraph_4_sentences"]
    async with pipeline(kokoro_url) as running:
        await running.say(text)
        await running.sink.until(lambda: bool(running.sink.of(TTSStoppedFrame)), "the reply ended")
        session = running.tts._session
    kinds = [type(seen.frame) for seen in running.sink.frames]
    first_audio, started = kinds.index(TTSAudioRawFrame), kinds.index(TTSStartedFrame)
    assert started < first_audio < kinds.index(TTSStoppedFrame)
    audio = b"".join(frame.audio for frame in running.sink.of(TTSAudioRawFrame))
    # The same server, asked for each piece the chunker cuts, one request at a time: the plugin's
    # frames are exactly that audio, in that order (the int8 graph is deterministic).
    expected = b""
    async with httpx.AsyncClient(timeout=120) as client:
        for piece in pieces_of(text):
            response = await client.post(f"{kokoro_url}/invocations", json={"text": piece, "format": "pcm"})
            expected += response.content
    assert len(pieces_of(text)) >= 4  # a fast first clause, then sentences
    assert audio == expected
    ttfb = [
        data
        for frame in running.sink.of(MetricsFrame)
        for data in frame.data
        if isinstance(data, TTFBMetricsData) and data.processor == running.tts.name
    ]
    # Pipecat reports a zero TTFB at start; the reply's own is the time to its first audio.
    assert [data.model for data in ttfb if data.value > 0] == ["kokoro-82m"]
    assert session is not None


async def test_a_telephony_pipeline_gets_the_servers_8khz_audio_as_it_is(kokoro_url: str) -> None:
    """At 8 kHz (Pipecat's telephony serializers' rate) the plugin asks the server for 8 kHz and
    passes its audio on untouched: exactly what the server makes at that rate, no resampling here."""
    text = "Your table is booked for eight tonight. We look forward to seeing you."
    async with pipeline(kokoro_url, out_rate=8000) as running:
        await running.say(text)
        await running.sink.until(lambda: bool(running.sink.of(TTSStoppedFrame)), "the reply ended")
    frames = running.sink.of(TTSAudioRawFrame)
    assert frames and all(frame.sample_rate == 8000 for frame in frames)
    expected = b""
    async with httpx.AsyncClient(timeout=120) as client:
        for piece in pieces_of(text):
            body = {"text": piece, "format": "pcm", "sample_rate": 8000}
            expected += (await client.post(f"{kokoro_url}/invocations", json=body)).content
    assert b"".join(frame.audio for frame in frames) == expected


async def test_words_arrive_as_text_frames_in_step_with_the_audio(tone_url: str) -> None:
    text = "Sure, I can help with that today. Your table is booked for eight tonight."
    async with pipeline(tone_url) as running:
        await running.say(text)
        await running.sink.until(lambda: bool(running.sink.of(TTSStoppedFrame)), "the reply ended")
    words = running.sink.of(TTSTextFrame)
    assert " ".join(frame.text.strip() for frame in words) == text
    # Each word's presentation time is where the server timed it on the turn's timeline: the
    # tone server speaks 15 ms per character, so a word starts at its characters before it,
    # plus the audio of the turn's earlier pieces.
    expected: list[float] = []
    offset = 0.0
    for piece in pieces_of(text):
        spoken = piece.strip()
        expected += [offset + 0.015 * match.start() for match in re.finditer(r"\S+", spoken)]
        offset += 0.015 * len(spoken)
    stamps = [(frame.pts - words[0].pts) / 1e9 for frame in words]
    assert stamps == pytest.approx(expected, abs=0.002)


async def test_interruption_cancels_and_audio_stops_within_a_frame(tone_url: str) -> None:
    long_text = " ".join(f"Sentence number {n} is here to keep the speaker busy for a while." for n in range(12))
    async with pipeline(tone_url) as running:
        session = None
        await running.say(long_text)
        await running.sink.until(lambda: len(running.sink.of(TTSAudioRawFrame)) >= 10, "audio started")
        session = running.tts._session
        await running.worker.queue_frame(InterruptionFrame())
        await running.sink.until(lambda: bool(running.tts.cancelled_at), "the server confirmed the cancel")
        cancelled_at = running.tts.cancelled_at[0]
        await asyncio.sleep(1.0)  # anything still on its way would arrive now
        late = [s for s in running.sink.frames if isinstance(s.frame, TTSAudioRawFrame) and s.at > cancelled_at]
        assert len(late) <= 1, f"{len(late)} audio frames after the server's cancelled"
        before = len(running.sink.of(TTSAudioRawFrame))
        assert before < 200  # far from the whole reply
        # The same session speaks the next turn.
        await running.say("And now something short.")
        await running.sink.until(lambda: len(running.sink.of(TTSStoppedFrame)) >= 1, "the next turn ended")
        assert running.tts._session is session
        assert len(running.sink.of(TTSAudioRawFrame)) > before


async def test_lexicon_and_normalize_go_with_every_sentence(kokoro_url: str) -> None:
    """The service's `lexicon` and `normalize` reach each piece the chunker cuts: the audio is
    exactly the server's for those pieces with those options, and each option changes it."""
    text = "Our chef at Kokoro cooks tonight. Read the menu at example.com/menu before you come."
    options: dict[str, Any] = {"lexicon": {"Kokoro": "Tokyo"}, "normalize": False}
    async with pipeline(kokoro_url, **options) as running:
        await running.say(text)
        await running.sink.until(lambda: bool(running.sink.of(TTSStoppedFrame)), "the reply ended")
    audio = b"".join(frame.audio for frame in running.sink.of(TTSAudioRawFrame))

    async def server_audio(**body: Any) -> bytes:
        async with httpx.AsyncClient(timeout=120) as client:
            answers = [
                await client.post(f"{kokoro_url}/invocations", json={"text": piece, "format": "pcm", **body})
                for piece in pieces_of(text)
            ]
        return b"".join(answer.content for answer in answers)

    assert len(pieces_of(text)) >= 2
    assert audio == await server_audio(**options)
    assert audio != await server_audio(lexicon=options["lexicon"])  # normalize: false was sent
    assert audio != await server_audio(normalize=False)  # and the lexicon


def test_text_options_are_checked_when_the_service_is_built() -> None:
    with pytest.raises(ValueError, match="lexicon"):
        VoicestreamTTSService(url="ws://127.0.0.1:1", lexicon={"two words": "/tˈu/"})
    with pytest.raises(ValueError, match="vLLM-Omni"):
        VoicestreamTTSService(url="ws://127.0.0.1:1", upstream="vllm-omni", normalize=False)


def test_exactly_one_destination() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        VoicestreamTTSService()
    with pytest.raises(ValueError, match="region"):
        VoicestreamTTSService(endpoint_name="kokoro")


async def test_the_upstream_picks_the_session_open_session_makes() -> None:
    # Sessions come from voicestream.speech.open_session: vLLM-Omni needs no code of its own here.
    config = SessionConfig(voice="vivian")
    qwen = VoicestreamTTSService(url="ws://127.0.0.1:1", upstream="vllm-omni", vllm_omni=config)
    session = qwen._open_session()
    assert isinstance(session, VllmOmniSession) and session.config == config
    assert isinstance(VoicestreamTTSService(url="ws://127.0.0.1:1")._open_session(), BidiSession)
