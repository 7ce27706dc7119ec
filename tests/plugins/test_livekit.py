"""The LiveKit Agents plugin, standalone (no room), against the real local server: synthesize()
and stream() give exactly the server's audio, stream() emits timed transcripts on the segment's
timeline, metrics are reported, and aclose() makes the server cancel its work (its own log says
so). Runs in .venv-livekit (make test-plugins)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from livekit.agents import tts as lk_tts
from livekit.agents.metrics import TTSMetrics
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT, TimedString

from tests.plugins.conftest import ServerProcess
from voicestream.chunker import SentenceChunker
from voicestream.integrations.livekit import TTS
from voicestream.speak.sources import word_tokens
from voicestream.speech import BidiSession, VllmOmniSession
from voicestream.texts import bench_texts
from voicestream.wire.vllm_omni import SessionConfig

BOUND_S = 240.0
LONG = " ".join(f"Sentence number {n} is here to keep the speaker busy for a while." for n in range(12))


def pieces_of(text: str) -> list[str]:
    chunker = SentenceChunker()  # the plugin's default cut
    pieces = [piece for token in word_tokens(text) for piece in chunker.feed(token)]
    rest = chunker.flush()
    return pieces + ([rest] if rest else [])


async def server_audio(url: str, pieces: list[str], sample_rate: int = 24_000, **options: Any) -> bytes:
    async with httpx.AsyncClient(timeout=120) as client:
        body = {"format": "pcm", "sample_rate": sample_rate, **options}
        return b"".join([(await client.post(f"{url}/invocations", json={"text": p, **body})).content for p in pieces])


def pcm(events: list[lk_tts.SynthesizedAudio]) -> bytes:
    return b"".join(bytes(event.frame.data) for event in events)


def assert_same_audio(got: bytes, expected: bytes) -> None:
    """LiveKit's emitter ends a segment with a short silent marker frame (10 ms here)."""
    assert got[: len(expected)] == expected
    tail = got[len(expected) :]
    assert len(tail) <= 960 and not any(tail), len(tail)


async def test_synthesize_is_the_servers_audio(kokoro_url: str) -> None:
    text = "The museum opens at ten. Tickets cost eighteen euros."
    engine = TTS(url=kokoro_url)
    metrics: list[TTSMetrics] = []
    engine.on("metrics_collected", metrics.append)
    async with asyncio.timeout(BOUND_S):
        events = [event async for event in engine.synthesize(text)]
        await asyncio.sleep(0.1)  # metrics are emitted by a task of their own
        await engine.aclose()
    assert events and all(e.frame.sample_rate == 24_000 and e.frame.num_channels == 1 for e in events)
    assert_same_audio(pcm(events), await server_audio(kokoro_url, [text]))
    assert metrics and metrics[0].ttfb > 0 and metrics[0].audio_duration > 1.0 and not metrics[0].streamed


async def test_a_telephony_rate_is_asked_of_the_server(kokoro_url: str) -> None:
    """TTS(sample_rate=8000) (a SIP room): the server delivers 8 kHz, nothing is resampled here."""
    text = "The museum opens at ten. Tickets cost eighteen euros."
    engine = TTS(url=kokoro_url, sample_rate=8000)
    assert engine.sample_rate == 8000
    async with asyncio.timeout(BOUND_S):
        events = [event async for event in engine.synthesize(text)]
        await engine.aclose()
    assert events and all(e.frame.sample_rate == 8000 for e in events)
    assert_same_audio(pcm(events), await server_audio(kokoro_url, [text], sample_rate=8000))


async def test_stream_speaks_the_chunkers_pieces_on_one_session(kokoro_url: str) -> None:
    text = bench_texts()["paragraph_4_sentences"]
    engine = TTS(url=kokoro_url)
    engine.prewarm()
    async with asyncio.timeout(BOUND_S):
        stream = engine.stream()
        for token in word_tokens(text):
            stream.push_text(token)
        stream.end_input()
        events = [event async for event in stream]
        await stream.aclose()
        await engine.aclose()
    assert events[-1].is_final and not any(e.is_final for e in events[:-1])
    assert len(pieces_of(text)) >= 4
    assert_same_audio(pcm(events), await server_audio(kokoro_url, pieces_of(text)))


async def test_stream_emits_timed_transcripts(tone_url: str) -> None:
    text = "Sure, I can help with that today. Your table is booked for eight tonight."
    engine = TTS(url=tone_url)
    async with asyncio.timeout(BOUND_S):
        stream = engine.stream()
        for token in word_tokens(text):
            stream.push_text(token)
        stream.end_input()
        events = [event async for event in stream]
        await stream.aclose()
        await engine.aclose()
    assert engine.capabilities.streaming and engine.capabilities.aligned_transcript
    words: list[TimedString] = [w for e in events for w in e.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])]
    assert "".join(words).strip() == text
    # The tone server speaks 15 ms per character: each word starts at its characters before it,
    # plus the audio of the segment's earlier pieces.
    expected: list[float] = []
    offset = 0.0
    for piece in pieces_of(text):
        spoken = piece.strip()
        expected += [offset + 0.015 * match.start() for match in re.finditer(r"\S+", spoken)]
        offset += 0.015 * len(spoken)
    assert [w.start_time for w in words] == pytest.approx(expected, abs=0.002)


@pytest.mark.parametrize("closer", ["stream", "tts"])
async def test_aclose_makes_the_server_cancel(tone: ServerProcess, closer: str) -> None:
    engine = TTS(url=tone.url)
    before = len(tone.log_events("cancelled"))
    async with asyncio.timeout(BOUND_S):
        stream = engine.stream()
        for token in word_tokens(LONG):
            stream.push_text(token)
        stream.end_input()
        got = 0
        async for _event in stream:
            got += 1
            if got == 3:
                break
        await (stream.aclose() if closer == "stream" else engine.aclose())
        await engine.aclose()
    cancelled = tone.wait_for_log("cancelled")[before:]
    assert cancelled and cancelled[-1]["request_ids"], cancelled  # the server dropped queued/in-progress work
    ended = tone.wait_for_log("session_end")
    assert ended[-1]["reason"] in ("close", "disconnect")


async def test_an_interrupted_stream_leaves_its_session_to_the_next_reply(tone: ServerProcess) -> None:
    engine = TTS(url=tone.url)
    async with asyncio.timeout(BOUND_S):
        stream = engine.stream()
        for token in word_tokens(LONG):
            stream.push_text(token)
        stream.end_input()
        got = 0
        async for _event in stream:
            got += 1
            if got == 3:
                break
        await stream.aclose()  # the agent was interrupted
        opened = len(tone.log_events("session_open"))
        reply = engine.stream()
        reply.push_text("And now something short.")
        reply.end_input()
        events = [event async for event in reply]
        await engine.aclose()
    assert pcm(events), "the next reply was spoken"
    assert len(tone.log_events("session_open")) == opened, "the interruption reconnected"
    cancelled = tone.wait_for_log("cancelled")
    assert cancelled[-1]["request_ids"], cancelled  # the interrupted reply's work was dropped


async def test_lexicon_and_normalize_go_with_every_request(kokoro_url: str) -> None:
    """TTS(lexicon=..., normalize=False): synthesize() and stream() are the server's audio with
    those options, and each option changes that audio."""
    text = "Our chef at Kokoro cooks tonight. Read the menu at example.com/menu before you come."
    options: dict[str, Any] = {"lexicon": {"Kokoro": "Tokyo"}, "normalize": False}
    engine = TTS(url=kokoro_url, **options)
    async with asyncio.timeout(BOUND_S):
        whole = [event async for event in engine.synthesize(text)]
        stream = engine.stream()
        for token in word_tokens(text):
            stream.push_text(token)
        stream.end_input()
        streamed = [event async for event in stream]
        await stream.aclose()
        await engine.aclose()
    expected = await server_audio(kokoro_url, [text], **options)
    assert_same_audio(pcm(whole), expected)
    assert_same_audio(pcm(streamed), await server_audio(kokoro_url, pieces_of(text), **options))
    assert expected != await server_audio(kokoro_url, [text], lexicon=options["lexicon"])  # normalize was sent
    assert expected != await server_audio(kokoro_url, [text], normalize=False)  # and the lexicon


def test_text_options_are_checked_when_the_tts_is_built() -> None:
    with pytest.raises(ValueError, match="lexicon"):
        TTS(url="ws://127.0.0.1:1", lexicon={"two words": "/tˈu/"})
    with pytest.raises(ValueError, match="vLLM-Omni"):
        TTS(url="ws://127.0.0.1:1", upstream="vllm-omni", lexicon={"Kokoro": "Tokyo"})


def test_exactly_one_destination() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        TTS()
    with pytest.raises(ValueError, match="region"):
        TTS(endpoint_name="kokoro")


def test_a_rate_the_server_does_not_offer_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate must be one of"):
        TTS(url="ws://127.0.0.1:1", sample_rate=11025)


def test_the_upstream_picks_the_session_open_session_makes() -> None:
    # Sessions come from voicestream.speech.open_session: vLLM-Omni needs no code of its own here.
    qwen = TTS(url="ws://127.0.0.1:1", upstream="vllm-omni", vllm_omni=SessionConfig(voice="vivian"))
    session = qwen._pool.factory()
    assert isinstance(session, VllmOmniSession) and session.config is not None
    assert session.config.voice == "vivian" and qwen.voice is None and qwen.model == "qwen3-tts"
    kokoro = TTS(url="ws://127.0.0.1:1")
    assert isinstance(kokoro._pool.factory(), BidiSession) and kokoro.voice == "af_heart"
