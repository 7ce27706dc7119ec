"""The fake vLLM-Omni route (tests/support/fake_vllm_omni.py) speaking with the real Kokoro-82M:
what it streams is heard by Whisper. Its behaviour on the wire, with a tone, is tested in
tests/unit/test_fake_vllm_omni.py, whose helpers this uses."""

from __future__ import annotations

from types import ModuleType

from websockets.asyncio.client import connect

from tests.support.fake_vllm_omni import kokoro_synthesizer
from tests.unit.test_fake_vllm_omni import STREAM_CONFIG, FakeFactory, audio_of, controls, send, until
from tests.unit.test_fake_vllm_omni import fake_server as fake_server  # the fixture
from voicestream.engine.base import SpeechEngine


async def test_real_speech_through_the_fake(
    fake_server: FakeFactory, kokoro_engine: SpeechEngine, asr: ModuleType
) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    with fake_server(synthesizer=kokoro_synthesizer(kokoro_engine)) as (_fake, url):
        async with connect(url) as ws:
            await send(ws, STREAM_CONFIG)
            await send(ws, {"type": "input.text", "text": text})
            await send(ws, {"type": "input.done"})
            frames = await until(ws, "session.done", wait_s=120)
    audio = audio_of(frames)
    assert controls(frames)[0]["sample_rate"] == 24_000
    assert asr.word_error_rate(text, asr.transcribe(audio)) <= 0.2
