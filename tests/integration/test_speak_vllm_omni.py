"""POST /speak with SPEECH_UPSTREAM=vllm-omni: the real speak app under uvicorn, its replies
spoken by the faithful fake of vLLM-Omni's speech stream (tests/support/fake_vllm_omni.py) with
the real Kokoro-82M plugged in as its synthesizer, so ASR can check what comes back."""

from __future__ import annotations

import dataclasses
import io
import uuid
import wave
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.integration.test_speak_app import FAST, TEXT, check_order_and_timings, of, speak
from tests.support.fake_vllm_omni import FakeVllmOmni, kokoro_synthesizer, serve_fake
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.engine.base import SpeechEngine
from voicestream.env import Env
from voicestream.speak.config import SpeakConfig
from voicestream.wire.speak import Done, Sentence, SentenceAudio

# Qwen3-TTS voice names, mapped onto Kokoro voices by the fake's synthesizer.
VOICES = {"vivian": "af_heart", "ryan": "am_michael"}


@pytest.fixture(scope="module")
def fake_vllm_omni(kokoro_engine: SpeechEngine) -> Iterator[tuple[FakeVllmOmni, str]]:
    fake = FakeVllmOmni(kokoro_synthesizer(kokoro_engine, voice_map=VOICES))
    with serve_fake(fake) as (_live, url):
        yield fake, url


@pytest.fixture(scope="module")
def speak_server(fake_vllm_omni: tuple[FakeVllmOmni, str]) -> Iterator[SpeakServer]:
    _fake, url = fake_vllm_omni
    # Configured as the deployed function is: through the environment.
    env = Env({"SPEECH_UPSTREAM": "vllm-omni", "VLLM_OMNI_URL": url, "VLLM_OMNI_LANGUAGE": "English"})
    config = SpeakConfig.from_env(env)
    assert config.upstream == "vllm-omni" and config.vllm_omni.voice == "vivian"
    with start_speak_server(dataclasses.replace(config, service=f"speak-vo-{uuid.uuid4().hex[:8]}")) as server:
        yield server


@pytest.mark.parametrize("mode", ["bidi", "batch"])
async def test_speaks_the_text_through_vllm_omni_and_it_is_speech(
    speak_server: SpeakServer, fake_vllm_omni: tuple[FakeVllmOmni, str], asr: ModuleType, mode: str
) -> None:
    fake, _url = fake_vllm_omni
    before = len(fake.sessions)
    events = await speak(speak_server.url, {"text": TEXT, "mode": mode, "transport": "binary", "pace": FAST})
    done = check_order_and_timings(events, mode, "binary")
    pcm = b"".join(c.data for c in of(events, SentenceAudio))
    assert done.audio_ms == pytest.approx(len(pcm) / 48, abs=1)
    heard = asr.transcribe(pcm)
    assert asr.word_error_rate(TEXT, heard) <= 0.2, heard
    # One connection per reply, one utterance per piece the chunker cut, config first.
    (record,) = fake.sessions[before:]
    kinds = [kind for _, kind in record.received]
    assert kinds[0] == "session.config" and "binary" not in kinds
    assert [g.text for g in record.generations] == [s.text for s in of(events, Sentence)]
    assert len(record.generations) == done.sentences
    assert {g.voice for g in record.generations} == {"vivian"}


async def test_a_request_voice_reaches_the_server(
    speak_server: SpeakServer, fake_vllm_omni: tuple[FakeVllmOmni, str]
) -> None:
    fake, _url = fake_vllm_omni
    before = len(fake.sessions)
    events = await speak(speak_server.url, {"text": "Hello from Ryan.", "voice": "ryan", "pace": FAST})
    assert isinstance(events[-1], Done) and events[-1].status == "complete", events[-1]
    (record,) = fake.sessions[before:]
    assert [g.voice for g in record.generations] == ["ryan"]


async def test_wav_is_one_stream_with_one_header(speak_server: SpeakServer) -> None:
    events = await speak(speak_server.url, {"text": TEXT, "format": "wav", "pace": FAST})
    assert isinstance(events[-1], Done) and events[-1].status == "complete", events[-1]
    audio = b"".join(c.data for c in of(events, SentenceAudio))
    assert audio[:4] == b"RIFF" and audio.count(b"RIFF") == 1
    with wave.open(io.BytesIO(audio)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24_000, 1, 2)


@pytest.mark.parametrize(("extra", "code"), [({"speed": 1.3}, "invalid_speed"), ({"format": "mp3"}, "invalid_format")])
async def test_what_vllm_omni_cannot_do_is_a_clear_400(
    speak_server: SpeakServer, extra: dict[str, Any], code: str
) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(f"{speak_server.url}/speak", json={"text": "Hi.", **extra})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == code and "Kokoro upstream" in body["message"]


async def test_health_names_the_upstream(speak_server: SpeakServer) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        health = (await client.get(f"{speak_server.url}/health")).json()
    assert health["tts"].startswith("vLLM-Omni websocket ws://127.0.0.1:")
