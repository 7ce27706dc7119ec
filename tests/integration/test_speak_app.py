"""POST /speak end to end: the real app under uvicorn on a real socket, talking to the real
Kokoro server (real model) over a real bidi session; both modes, both transports, formats."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support.server import LiveServer
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.speak.config import SpeakConfig
from voicestream.wire.speak import AgentStart, Done, Sentence, SentenceAudio, SentenceSpoken, SpeakEvent, TextDelta

TEXT = "Sure, here is what I found. The museum opens at ten in the morning. Would you like tickets?"
FAST = {"first_token_ms": 100, "tokens_per_s": 200}


@pytest.fixture(scope="module")
def speak_server(kokoro_server: LiveServer) -> Iterator[SpeakServer]:
    config = SpeakConfig(kokoro_ws_url=kokoro_server.ws_url, service=f"speak-test-{uuid.uuid4().hex[:8]}")
    with start_speak_server(config) as server:
        yield server


async def speak(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[SpeakEvent]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10)) as client:
        return [event async for event in call_speak(client, url, body, credentials=None, headers=headers)]


def of(events: list[SpeakEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def check_order_and_timings(events: list[SpeakEvent], mode: str, transport: str) -> Done:
    """Everything a caller may rely on, independent of how fast this machine is."""
    assert isinstance(events[0], AgentStart) and events[0].mode == mode
    assert isinstance(events[-1], Done) and events[-1].status == "complete", events[-1]
    done: Done = events[-1]
    assert of(events, Done) == [done]
    position = {id(event): i for i, event in enumerate(events)}

    deltas = of(events, TextDelta)
    sentences = of(events, Sentence)
    chunks = of(events, SentenceAudio)
    completes = of(events, SentenceSpoken)
    assert "".join(d.text for d in deltas) == done.text
    assert [s.index for s in sentences] == list(range(len(sentences))) == [c.index for c in completes]
    assert done.sentences == len(sentences)
    assert " ".join(s.text for s in sentences) == " ".join(done.text.split())
    for sentence, complete in zip(sentences, completes, strict=True):
        own = [c for c in chunks if c.index == sentence.index]
        assert own, f"sentence {sentence.index} has no audio"
        # A sentence is cut before its audio arrives, and completes after all of it.
        assert position[id(sentence)] < position[id(own[0])]
        assert position[id(own[-1])] < position[id(complete)]
    assert [c.index for c in chunks] == sorted(c.index for c in chunks)  # sentences never interleave
    assert done.audio_bytes == sum(len(c.data) for c in chunks)

    if mode == "bidi":
        # The first piece is cut while the model is still writing: before the last delta.
        assert position[id(sentences[0])] < position[id(deltas[-1])]
        assert len(sentences) >= 3
    else:
        assert len(sentences) == 1 and position[id(sentences[0])] > position[id(deltas[-1])]

    t = done.timings
    assert t.first_text_ms is not None and t.first_sentence_ms is not None and t.first_audio_ms is not None
    assert FAST["first_token_ms"] <= t.first_text_ms <= t.first_sentence_ms <= t.first_audio_ms <= t.total_ms
    assert t.first_text_ms == deltas[0].t_ms and t.first_sentence_ms == sentences[0].t_ms
    stamped = [e.t_ms for e in events if e.t_ms is not None]
    assert stamped == sorted(stamped), "events leave in the order they happened"
    if transport == "sse":
        assert chunks[0].t_ms == t.first_audio_ms
    else:
        assert all(c.t_ms is None for c in chunks)  # bare AUDIO frames carry no clock
    return done


@pytest.mark.parametrize("transport", ["sse", "binary"])
@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_speaks_the_text_in_order_and_it_is_speech(
    speak_server: SpeakServer, asr: ModuleType, mode: str, transport: str
) -> None:
    events = await speak(speak_server.url, {"text": TEXT, "mode": mode, "transport": transport, "pace": FAST})
    done = check_order_and_timings(events, mode, transport)
    assert done.text == TEXT
    pcm = b"".join(c.data for c in of(events, SentenceAudio))
    assert done.audio_ms == pytest.approx(len(pcm) / 48, abs=1)  # 24 kHz 16-bit mono: 48 bytes per ms
    heard = asr.transcribe(pcm)
    assert asr.word_error_rate(TEXT, heard) <= 0.2, heard


async def test_raw_sse_is_well_formed(speak_server: SpeakServer) -> None:
    """What an SSE pipeline that never heard of our decoder sees: event/data lines, JSON, base64."""
    async with (
        httpx.AsyncClient(timeout=120) as client,
        client.stream("POST", f"{speak_server.url}/speak", json={"text": "Hello there.", "pace": FAST}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-correlation-id"]
        raw = (await response.aread()).decode()
    blocks = [block for block in raw.split("\n\n") if block]
    names = [block.split("\n")[0].removeprefix("event: ") for block in blocks]
    assert names[0] == "agent_start" and names[-1] == "done"
    audio = [json.loads(block.split("\n")[1].removeprefix("data: ")) for block in blocks if "audio_chunk" in block]
    assert audio and all(isinstance(body["audio"], str) and body["bytes"] > 0 for body in audio)


async def test_binary_transport_content_type(speak_server: SpeakServer) -> None:
    async with (
        httpx.AsyncClient(timeout=120) as client,
        client.stream(
            "POST", f"{speak_server.url}/speak", json={"text": "Hi.", "pace": FAST, "transport": "binary"}
        ) as response,
    ):
        assert response.headers["content-type"] == "application/vnd.voicestream.wire.framing"
        body = await response.aread()
    assert body[0] == 0x01  # the first frame is an EVENT (agent_start), not base64 or SSE text
    assert b"base64" not in body and b"event: " not in body


async def test_wav_is_one_stream_with_one_header(speak_server: SpeakServer) -> None:
    events = await speak(speak_server.url, {"text": TEXT, "format": "wav", "pace": FAST})
    assert isinstance(events[-1], Done) and events[-1].status == "complete"
    assert of(events, AgentStart)[0].format == "wav"
    audio = b"".join(c.data for c in of(events, SentenceAudio))
    assert audio[:4] == b"RIFF" and audio[8:16] == b"WAVEfmt "
    assert audio.count(b"RIFF") == 1  # later sentences come as raw PCM continuing the stream
    import wave

    with wave.open(io.BytesIO(audio)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24_000, 1, 2)


async def test_mp3_frames(speak_server: SpeakServer) -> None:
    events = await speak(speak_server.url, {"text": "Hello. Good morning.", "format": "mp3", "pace": FAST})
    assert isinstance(events[-1], Done) and events[-1].status == "complete"
    audio = b"".join(c.data for c in of(events, SentenceAudio))
    # An MPEG audio frame sync (11 set bits) at the start: no WAV header, no base64.
    assert audio[0] == 0xFF and audio[1] & 0xE0 == 0xE0
    assert events[-1].audio_ms > 500


async def test_logs_carry_the_correlation_id_and_metrics_are_emf(
    kokoro_server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = io.StringIO()
    service = f"speak-test-{uuid.uuid4().hex[:8]}"
    config = SpeakConfig(kokoro_ws_url=kokoro_server.ws_url, service=service, metrics_namespace="voicestream-test")
    with start_speak_server(config, log_stream=logs) as server:
        await speak(server.url, {"text": "Hi there.", "mode": "batch", "pace": FAST}, {"X-Correlation-Id": "abc-123"})
        async with httpx.AsyncClient(timeout=120) as client:  # no id given: one is made up
            response = await client.post(f"{server.url}/speak", json={"text": "Bye.", "pace": FAST})
        generated = response.headers["x-correlation-id"]

    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    finished = [line for line in lines if line["message"] == "speak finished"]
    assert [line["correlation_id"] for line in finished] == ["abc-123", generated]
    assert finished[0]["status"] == "complete"
    assert finished[0]["mode"] == "batch" and finished[0]["service"] == service
    # Every line of a reply carries its id, the core's lines included.
    assert {line["correlation_id"] for line in lines} == {"abc-123", generated}

    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    record, _ = [r for r in emf if r.get("service") == service]
    directive = record["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "voicestream-test"
    assert ["mode", "service"] in [sorted(d) for d in directive["Dimensions"]]
    names = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert names["TimeToFirstAudio"] == "Milliseconds" and record["mode"] == "batch"
    assert record["TimeToFirstAudio"] == [finished[0]["first_audio_ms"]] and record["Replies"] == [1.0]
