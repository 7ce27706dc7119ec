"""POST /speak {"prompt"} with the Strands agent on Bedrock: only Bedrock's HTTP service is played
(tests/support/fake_bedrock.py); the app, Strands, boto3 and the Kokoro server are real."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from types import ModuleType

import httpx
import pytest

from tests.support.fake_bedrock import FakeBedrock, Turn, fake_bedrock
from tests.support.server import LiveServer
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.speak.config import SpeakConfig
from voicestream.speak.sources import BedrockSettings
from voicestream.wire.errors import FAILURE_MESSAGES
from voicestream.wire.speak import AgentStart, Done, ReplyError, Sentence, SentenceAudio, SpeakEvent, TextDelta

MODEL_ID = "us.amazon.nova-micro-v1:0"
HANG_GUARD_S = 90
REPLY = ("Sure", ", the museum", " opens at ten.", " Tickets cost", " eighteen euros.", " Enjoy your visit!")


@pytest.fixture
def bedrock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBedrock]:
    # boto3's default credential chain, as in Lambda (there from the execution role).
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with fake_bedrock() as fake:
        yield fake


@pytest.fixture
def speak_server(kokoro_server: LiveServer, bedrock: FakeBedrock) -> Iterator[SpeakServer]:
    settings = BedrockSettings(model_id=MODEL_ID, region="us-east-1", endpoint_url=bedrock.url)
    config = SpeakConfig(
        kokoro_ws_url=kokoro_server.ws_url, bedrock=settings, service=f"speak-test-{uuid.uuid4().hex[:8]}"
    )
    with start_speak_server(config) as server:
        yield server


async def speak(url: str, body: dict[str, str]) -> list[SpeakEvent]:
    async with asyncio.timeout(HANG_GUARD_S), httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
        return [event async for event in call_speak(client, url, body, credentials=None)]


async def test_the_agent_reply_is_spoken_as_it_streams(
    speak_server: SpeakServer, bedrock: FakeBedrock, asr: ModuleType
) -> None:
    bedrock.turns = [Turn(deltas=REPLY, first_delay_s=0.2, delay_s=0.05)]
    events = await speak(speak_server.url, {"prompt": "When does the museum open?", "transport": "binary"})

    start, done = events[0], events[-1]
    assert isinstance(start, AgentStart) and start.source == f"bedrock:{MODEL_ID}"
    assert isinstance(done, Done) and done.status == "complete"
    assert [e.text for e in events if isinstance(e, TextDelta)] == list(REPLY)
    sentences = [e.text for e in events if isinstance(e, Sentence)]
    assert sentences == ["Sure, the museum opens at ten.", "Tickets cost eighteen euros.", "Enjoy your visit!"]
    [request] = bedrock.requests
    assert request.body["messages"][0]["content"][0]["text"] == "When does the museum open?"

    heard = asr.transcribe(b"".join(e.data for e in events if isinstance(e, SentenceAudio)))
    assert asr.word_error_rate("".join(REPLY), heard) <= 0.2, heard


@pytest.mark.parametrize(
    "turn",
    [
        Turn(
            http_error=(403, "AccessDeniedException", "You don't have access to the model with the specified model ID.")
        ),
        Turn(deltas=("Sure, the museum opens",), stream_error=("modelStreamErrorException", "the model fell over")),
    ],
    ids=["http-error", "in-stream-error"],
)
async def test_model_errors_end_the_stream_cleanly(speak_server: SpeakServer, bedrock: FakeBedrock, turn: Turn) -> None:
    bedrock.turns = [turn]
    events = await speak(speak_server.url, {"prompt": "Hello?"})
    *_, error, done = events
    assert isinstance(error, ReplyError) and error.code == "model_error"
    assert error.message == FAILURE_MESSAGES["model_error"]  # Bedrock's own words are logged only
    assert isinstance(done, Done) and done.status == "error"


async def test_disconnect_cancels_the_model_stream(
    speak_server: SpeakServer, bedrock: FakeBedrock, kokoro_server: LiveServer
) -> None:
    bedrock.turns = [Turn(deltas=("Sure, here it is.", *(f" Word {i}." for i in range(300))), delay_s=0.02)]
    async with httpx.AsyncClient(timeout=HANG_GUARD_S) as client:
        stream = call_speak(client, speak_server.url, {"prompt": "Talk for a long time."}, credentials=None)
        async for event in stream:
            if isinstance(event, Sentence):
                break  # hang up once the first sentence is cut
        await stream.aclose()

    [request] = bedrock.requests
    assert await asyncio.to_thread(request.finished.wait, HANG_GUARD_S)
    assert request.disconnected, "Bedrock's response stream was closed by the caller going away"
    assert request.events_sent < 300
    stats = kokoro_server.runtime.stats
    kokoro_server.wait_until(lambda s: s.on_loop(lambda: (stats.sessions_active, stats.steps_running)) == (0, 0))
