"""Telephony audio on every route: 8 kHz G.711 from the real server and model, decoded by sox (a
standard decoder, not ours) and heard right by Whisper; the codec itself checked against sox over
every code; and no click where the engine's chunks meet once the audio is resampled."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import numpy as np
import openai
import pytest
import soxr
from websockets.asyncio.client import connect

from tests.support import sox
from tests.support.seams import step_ratio
from tests.support.server import LiveServer, start_server
from tests.support.session_client import collect, send_json
from tests.support.speak_server import SpeakServer, start_speak_server
from voicestream.aws.function_url import call_speak
from voicestream.cli import main
from voicestream.engine.base import AudioChunk, SpeechEngine
from voicestream.engine.text.options import TextOptions
from voicestream.kokoro_server import create_app
from voicestream.kokoro_server.encoders import create_encoder
from voicestream.speak.config import SpeakConfig
from voicestream.wire.bidi import Limits
from voicestream.wire.framing import ResponseTransport
from voicestream.wire.speak import AgentStart, SentenceAudio

TEXT = "Your table is booked for eight tonight. Please call us if your plans change."
MAX_WER = 0.25
RATE = 8000


def heard_right(asr: ModuleType, data: bytes, audio_format: str = "mulaw", rate: int = RATE) -> None:
    audio = sox.decode_float(data, audio_format, rate)
    assert len(audio) > rate  # over a second of speech
    heard = asr.transcribe(audio, rate)
    assert asr.word_error_rate(TEXT, heard) <= MAX_WER, heard


# --- the codec ------------------------------------------------------------------------------


@pytest.mark.parametrize("audio_format", ["mulaw", "alaw"])
def test_g711_codes_agree_with_sox_over_every_code_and_every_sample(audio_format: str) -> None:
    """Every one of the 256 codes, decoded by sox and encoded by ours, is that code again (mu-law's
    two zeros, 0x7F and 0xFF, are one level); every 16-bit sample is encoded to one of the two
    G.711 levels around it, as sox decodes them (G.711 leaves the choice at a decision boundary
    to the implementation: FFmpeg's and sox's differ by one level on ~1-3 % of samples)."""
    codes = np.arange(256, dtype=np.uint8)
    levels = sox.decode(codes.tobytes(), audio_format, RATE)
    encoder = create_encoder(audio_format, RATE)
    again = np.frombuffer(encoder.encode(levels.astype("<i2").tobytes()), dtype=np.uint8)
    same_level = sox.decode(again.tobytes(), audio_format, RATE) == levels
    assert same_level.all()
    assert [int(c) for c in codes[again != codes]] == ([0x7F] if audio_format == "mulaw" else [])

    samples = np.arange(-32768, 32768, dtype=np.int16)
    ours = sox.decode(encoder.encode(samples.astype("<i2").tobytes()), audio_format, RATE).astype(np.int64)
    grid = np.unique(levels.astype(np.int64))
    above = np.clip(np.searchsorted(grid, samples, side="left"), 0, len(grid) - 1)
    below = np.clip(np.searchsorted(grid, samples, side="right") - 1, 0, len(grid) - 1)
    assert np.all((ours == grid[above]) | (ours == grid[below]))


# --- every route, 8 kHz mu-law, heard by Whisper ----------------------------------------------


async def test_bidi_session(kokoro_server: LiveServer, asr: ModuleType) -> None:
    async with connect(kokoro_server.ws_url) as ws:
        await send_json(ws, {"text": TEXT, "request_id": "call", "format": "mulaw", "words": True})
        [result], others = await collect(ws, 1)
    assert result.start is not None and (result.start["format"], result.start["sample_rate"]) == ("mulaw", RATE)
    assert result.end is not None and result.end["audio_bytes"] == len(result.audio)
    # Times stay in seconds of the delivered audio: one byte a sample at 8 kHz is the same
    # duration, and the word timings fall inside it, the last word near its end.
    audio_s = len(result.audio) / RATE
    assert abs(audio_s - result.end["audio_ms"] / 1000) < 0.01
    words = [word for message in others if message["type"] == "words" for word in message["words"]]
    assert [word["word"].strip(".,") for word in words] == TEXT.replace(".", "").split()
    assert words[0]["start_s"] >= 0 and audio_s - 1.0 < words[-1]["end_s"] <= audio_s
    heard_right(asr, bytes(result.audio))


@pytest.mark.parametrize("transport", ["binary", "sse"])
async def test_invocations(kokoro_server: LiveServer, asr: ModuleType, transport: ResponseTransport) -> None:
    from voicestream.speech.invocations import invoke

    result = await invoke(kokoro_server.http_url, TEXT, format="mulaw", sample_rate=RATE, transport=transport)
    assert (result.format, result.sample_rate) == ("mulaw", RATE)
    heard_right(asr, result.audio)


def test_openai_speech(kokoro_server: LiveServer, asr: ModuleType) -> None:
    body = {"model": "kokoro", "voice": "af_heart", "input": TEXT, "response_format": "mulaw", "sample_rate": RATE}
    response = httpx.post(f"{kokoro_server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/PCMU;rate=8000"
    assert response.headers["x-sample-rate"] == "8000"
    heard_right(asr, response.content)


def test_openai_sdk_with_sample_rate_as_an_extra_body_field(kokoro_server: LiveServer, asr: ModuleType) -> None:
    """What docs/protocol.md tells an OpenAI SDK user to write."""
    with openai.OpenAI(base_url=f"{kokoro_server.http_url}/v1", api_key="unused", max_retries=0) as client:
        response = client.audio.speech.create(
            model="kokoro",
            voice="af_heart",
            input=TEXT,
            response_format="mulaw",  # type: ignore[arg-type]  # our extension of OpenAI's formats
            extra_body={"sample_rate": RATE},
        )
    assert response.response.headers["content-type"] == "audio/PCMU;rate=8000"
    heard_right(asr, response.content)


def test_openai_speech_alaw_at_16khz(kokoro_server: LiveServer, asr: ModuleType) -> None:
    body = {"model": "kokoro", "voice": "af_heart", "input": TEXT, "response_format": "alaw", "sample_rate": 16000}
    response = httpx.post(f"{kokoro_server.http_url}/v1/audio/speech", json=body, timeout=120)
    assert response.headers["content-type"] == "audio/PCMA;rate=16000"
    heard_right(asr, response.content, "alaw", 16000)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/invocations", {"text": TEXT, "format": "mulaw", "sample_rate": 11025}),
        ("/v1/audio/speech", {"model": "kokoro", "voice": "af_heart", "input": TEXT, "sample_rate": "8k"}),
    ],
)
def test_a_bad_rate_is_a_coded_400(kokoro_server: LiveServer, path: str, body: dict[str, Any]) -> None:
    response = httpx.post(f"{kokoro_server.http_url}{path}", json=body, timeout=30)
    assert response.status_code == 400
    text = response.text
    assert "invalid_sample_rate" in text and "8000, 16000, 22050, 24000, 44100, 48000" in text


@pytest.fixture(scope="module")
def speak_server(kokoro_server: LiveServer) -> Iterator[SpeakServer]:
    config = SpeakConfig(kokoro_ws_url=kokoro_server.ws_url, service=f"speak-test-{uuid.uuid4().hex[:8]}")
    with start_speak_server(config) as server:
        yield server


@pytest.mark.parametrize("transport", ["sse", "binary"])
async def test_speak_function_events(speak_server: SpeakServer, asr: ModuleType, transport: str) -> None:
    body = {"text": TEXT, "format": "mulaw", "transport": transport, "pace": {"tokens_per_s": 200}}
    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10)) as client:
        events = [event async for event in call_speak(client, speak_server.url, body, credentials=None)]
    start = events[0]
    assert isinstance(start, AgentStart) and (start.format, start.sample_rate) == ("mulaw", RATE)
    heard_right(asr, b"".join(event.data for event in events if isinstance(event, SentenceAudio)))


def test_cli_say(kokoro_server: LiveServer, asr: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "call.ulaw"
    arguments = ["say", "--upstream", "kokoro", "--url", kokoro_server.http_url, "--format", "mulaw", "-o", str(out)]
    assert main([*arguments, TEXT]) == 0
    heard_right(asr, out.read_bytes())


def test_cli_speak(kokoro_server: LiveServer, asr: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "call.ulaw"
    assert main(["speak", "--url", kokoro_server.http_url, "--format", "mulaw", "--out", str(out), TEXT]) == 0
    heard_right(asr, out.read_bytes())


# --- no click at the chunk seams ----------------------------------------------------------------


class ChunkRecorder(SpeechEngine):
    """The real engine; records the length of every chunk it yields (where the seams are)."""

    def __init__(self, inner: SpeechEngine) -> None:
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.chunks: list[np.ndarray] = []
        self._lock = threading.Lock()

    def _load(self) -> None:
        self.inner.load()

    def voices(self) -> tuple[str, ...]:
        return self.inner.voices()

    def _synthesize(
        self, text: str, voice: str, speed: float, ahead_s: float, behind: bool, text_options: TextOptions
    ) -> Iterator[AudioChunk]:
        for chunk in self.inner.synthesize(text, voice, speed, text_options=text_options):
            with self._lock:
                self.chunks.append(chunk.samples)
            yield chunk


SEAM_SLACK = 0.05  # tests/unit/test_resample.py: how far beyond the whole's step ratio a seam may go


async def test_no_click_at_the_engines_chunk_seams(kokoro_engine: SpeechEngine) -> None:
    """8 kHz mu-law of a long sentence (several engine chunks), decoded by sox: at each seam
    between chunks the step ratio is no larger than in the same audio resampled whole."""
    text = (
        "Thank you for calling the museum: our opening hours are ten in the morning until six in the "
        "evening on every weekday, and until eight on fridays during the summer exhibition."
    )
    engine = ChunkRecorder(kokoro_engine)
    with start_server(create_app(engine, Limits())) as server:  # the test engine is not paced: conftest.py
        engine.chunks.clear()  # the server's warm-up synthesis
        async with connect(server.ws_url) as ws:
            await send_json(ws, {"text": text, "request_id": "seams", "format": "mulaw"})
            [result], _ = await collect(ws, 1)
    chunks = engine.chunks
    assert len(chunks) >= 3
    streamed = sox.decode_float(bytes(result.audio), "mulaw", RATE)
    whole_24k = np.concatenate(chunks)
    whole_pcm = create_encoder("mulaw", RATE).encode(soxr.resample(whole_24k, 24_000, RATE, quality="HQ"))
    whole = sox.decode_float(whole_pcm, "mulaw", RATE)
    assert len(streamed) == len(whole)
    seams = [round(end * RATE / 24_000) for end in np.cumsum([len(c) for c in chunks])[:-1]]
    beyond = [step_ratio(streamed, s, RATE) - step_ratio(whole, s, RATE) for s in seams]
    print(f"{len(seams)} seams; worst step ratio beyond the whole's: {max(beyond):.3f}")
    assert max(beyond) <= SEAM_SLACK
