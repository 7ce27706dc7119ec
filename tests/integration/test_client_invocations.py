"""The POST /invocations client against the real server: binary and SSE, and refusals."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.server import LiveServer
from voicestream.speech.invocations import InvocationError, invoke

TEXT = "Your flight leaves at nine."
BOUND_S = 300.0


async def test_binary_pcm_and_sse_carry_the_same_speech(kokoro_server: LiveServer) -> None:
    async with asyncio.timeout(BOUND_S):
        heard: list[bytes] = []
        binary = await invoke(kokoro_server.http_url, TEXT, on_audio=heard.append)
        sse = await invoke(kokoro_server.http_url, TEXT, transport="sse")
    assert (binary.format, binary.sample_rate) == ("pcm", 24_000)
    assert len(binary.audio) > 24_000 and len(binary.audio) % 2 == 0
    assert b"".join(heard) == binary.audio
    assert binary.first_audio_s is not None and 0 < binary.first_audio_s <= binary.total_s
    assert sse.server_timings["audio_bytes"] == len(sse.audio)
    # Same text, voice and speed: the same amount of audio either way.
    assert abs(len(sse.audio) - len(binary.audio)) <= 0.05 * len(binary.audio)
    assert sse.request_id and sse.first_audio_at is not None


async def test_wav_has_its_header(kokoro_server: LiveServer) -> None:
    async with asyncio.timeout(BOUND_S):
        wav = await invoke(kokoro_server.http_url, "Hello.", format="wav")
    assert wav.audio[:4] == b"RIFF" and wav.audio[8:12] == b"WAVE" and wav.format == "wav"


@pytest.mark.parametrize("transport", ["binary", "sse"])
async def test_refusals_carry_the_contract_code(kokoro_server: LiveServer, transport: str) -> None:
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(InvocationError, match="HTTP 400") as caught:
            await invoke(kokoro_server.http_url, "Hello.", voice="no_such_voice", transport=transport)  # type: ignore[arg-type]
    assert caught.value.code == "unknown_voice" and caught.value.status == 400
