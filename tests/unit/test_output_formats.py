"""G.711 (mulaw, alaw) and `sample_rate` on every route's contract: what is accepted, the default
rate of each format, the coded refusals, the encoders, and a bidi session delivering the rate it
was asked for (with the tone engine; the real model and a standard decoder are in
tests/integration/test_telephony.py)."""

from __future__ import annotations

import io
import json
from typing import Any

import av
import numpy as np
import pytest
import soxr

from tests.unit.test_server_session import converse, requests_of
from voicestream.kokoro_server.encoders import G711Encoder, content_type, create_encoder
from voicestream.speak.request import parse_speak_request
from voicestream.wire.bidi import (
    SAMPLE_RATES,
    Config,
    Synthesize,
    parse_client_message,
    parse_invocation_request,
    parse_sample_rate,
)
from voicestream.wire.errors import ProtocolError
from voicestream.wire.openai_speech import OpenAIRequestError, parse_openai_speech_request

BAD_RATES: list[Any] = [11025, 96000, 0, -8000, 8000.0, "8000", True, [8000], 10**400]


@pytest.mark.parametrize("rate", SAMPLE_RATES)
def test_every_offered_rate_is_accepted(rate: int) -> None:
    assert parse_sample_rate(rate) == rate


@pytest.mark.parametrize("rate", BAD_RATES)
def test_a_bad_rate_is_a_coded_error_that_lists_the_rates(rate: Any) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_sample_rate(rate)
    assert caught.value.code == "invalid_sample_rate" and caught.value.status == 400
    assert "8000, 16000, 22050, 24000, 44100, 48000" in caught.value.message


def test_the_bidi_messages_carry_format_and_rate() -> None:
    message = parse_client_message(json.dumps({"text": "Hi.", "format": "mulaw", "sample_rate": 16000}))
    assert message == Synthesize(text="Hi.", format="mulaw", sample_rate=16000)
    assert parse_client_message('{"text": "Hi.", "format": "alaw"}') == Synthesize(text="Hi.", format="alaw")
    assert parse_client_message('{"type": "config", "sample_rate": 8000}') == Config(sample_rate=8000)
    for body in ({"text": "Hi.", "sample_rate": 11025}, {"type": "config", "sample_rate": "16k"}):
        with pytest.raises(ProtocolError) as caught:
            parse_client_message(json.dumps({**body, "request_id": "r1"}))
        assert (caught.value.code, caught.value.request_id) == ("invalid_sample_rate", "r1")


@pytest.mark.parametrize(
    ("fields", "resolved"),
    [
        ({}, ("pcm", 24000)),
        ({"format": "mulaw"}, ("mulaw", 8000)),
        ({"format": "alaw"}, ("alaw", 8000)),
        ({"format": "mulaw", "sample_rate": 16000}, ("mulaw", 16000)),
        ({"format": "wav", "sample_rate": 48000}, ("wav", 48000)),
        ({"format": "mp3", "sample_rate": 22050}, ("mp3", 22050)),
    ],
)
def test_invocations_resolve_the_formats_default_rate(fields: dict[str, Any], resolved: tuple[str, int]) -> None:
    request = parse_invocation_request(json.dumps({"text": "Hi.", **fields}))
    assert (request.format, request.sample_rate) == resolved


def test_openai_route_takes_g711_and_sample_rate_as_an_extra_field() -> None:
    def parse(**fields: Any) -> tuple[str, int]:
        body = {"model": "kokoro", "input": "Hi.", "voice": "af_heart", **fields}
        request = parse_openai_speech_request(json.dumps(body))
        return request.response_format, request.sample_rate

    assert parse() == ("mp3", 24000)
    assert parse(response_format="mulaw") == ("mulaw", 8000)
    assert parse(response_format="alaw", sample_rate=16000) == ("alaw", 16000)
    assert parse(response_format="opus", sample_rate=48000) == ("opus", 48000)
    for fields in ({"sample_rate": 12345}, {"response_format": "opus", "sample_rate": 44100}):
        with pytest.raises(OpenAIRequestError) as caught:
            parse(**fields)
        assert (caught.value.code, caught.value.param, caught.value.status) == (
            "invalid_sample_rate",
            "sample_rate",
            400,
        )


def test_the_speak_body_takes_g711_and_a_rate() -> None:
    request = parse_speak_request(b'{"text": "Hi.", "format": "mulaw"}')
    assert (request.format, request.sample_rate) == ("mulaw", 8000)
    assert parse_speak_request(b'{"text": "Hi.", "sample_rate": 16000}').sample_rate == 16000
    with pytest.raises(ProtocolError) as caught:
        parse_speak_request(b'{"text": "Hi.", "sample_rate": 44000}')
    assert caught.value.code == "invalid_sample_rate"


def tone(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def decode_g711(data: bytes, audio_format: str, rate: int) -> np.ndarray:
    """FFmpeg's G.711 decoder (PyAV): the raw codes as a stream of its demuxer."""
    demuxer = {"mulaw": "mulaw", "alaw": "alaw"}[audio_format]
    container: Any = av.open(io.BytesIO(data), format=demuxer, options={"sample_rate": str(rate)})
    with container:
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
    return np.concatenate(frames).astype(np.float32) / 32768.0


@pytest.mark.parametrize("audio_format", ["mulaw", "alaw"])
def test_g711_encoders_one_byte_a_sample_and_decodable(audio_format: str) -> None:
    encoder = create_encoder(audio_format)
    assert isinstance(encoder, G711Encoder) and encoder.sample_rate == 8000 and encoder.bytes_per_second == 8000
    code = "PCMU" if audio_format == "mulaw" else "PCMA"
    assert encoder.content_type == f"audio/{code};rate=8000"
    audio = tone(0.25, 8000)
    data = encoder.encode(audio[:700]) + encoder.encode(audio[700:]) + encoder.finish()
    assert len(data) == len(audio)
    decoded = decode_g711(data, audio_format, 8000)
    assert np.max(np.abs(decoded - audio)) < 0.02  # G.711's ~8-bit resolution at this level


def test_content_types_name_the_delivered_rate() -> None:
    assert content_type("pcm", 8000) == "audio/pcm;rate=8000;channels=1;encoding=s16le"
    assert content_type("mulaw", 16000) == "audio/PCMU;rate=16000"
    assert content_type("wav", 8000) == "audio/wav"
    assert create_encoder("wav", 16000).encode(b"\0\0")[24:28] == (16000).to_bytes(4, "little")


async def test_a_session_delivers_mulaw_at_8khz_and_says_so() -> None:
    talk = await converse()
    talk.send({"type": "synthesize", "text": "A telephone call.", "format": "mulaw", "request_id": "t"})
    start = await talk.until("synthesis_start", "t")
    assert (start["format"], start["sample_rate"]) == ("mulaw", 8000)
    await talk.until("synthesis_complete", "t")
    [(_, audio_bytes)] = requests_of(talk.seen)
    samples_24k = talk.engine.samples_for("A telephone call.")
    assert audio_bytes == round(samples_24k / 3)  # one byte a sample at a third of the rate
    data = b"".join(frame for frame in talk.seen if isinstance(frame, bytes))
    spoken = decode_g711(data, "mulaw", 8000)
    # The tone engine's audio, resampled whole: the streamed chunks add nothing of their own.
    engine_audio = np.concatenate([chunk.samples for chunk in talk.engine._chunks("A telephone call.")])
    expected = soxr.resample(engine_audio, 24000, 8000, quality="HQ")
    assert len(spoken) == len(expected) and np.max(np.abs(spoken - expected)) < 0.03


async def test_config_sets_the_rate_and_a_request_overrides_it() -> None:
    talk = await converse()
    talk.send({"type": "config", "sample_rate": 16000})
    talk.send({"type": "synthesize", "text": "Wideband.", "request_id": "a"})
    talk.send({"type": "synthesize", "text": "Narrow.", "request_id": "b", "format": "alaw", "sample_rate": 8000})
    talk.send({"type": "synthesize", "text": "Configured.", "request_id": "c", "format": "mulaw"})
    starts = [await talk.until("synthesis_start", rid) for rid in "abc"]
    assert [(s["format"], s["sample_rate"]) for s in starts] == [("pcm", 16000), ("alaw", 8000), ("mulaw", 16000)]
    await talk.until("synthesis_complete", "c")
    sizes = dict(requests_of(talk.seen))
    assert sizes["a"] == 2 * round(talk.engine.samples_for("Wideband.") * 2 / 3)


def test_vllm_omni_refuses_g711_and_other_rates() -> None:
    from voicestream.speech.vllm_omni import refused_options

    assert refused_options(None, "pcm", 24000) is None and refused_options(None, "wav") is None
    for audio_format in ("mulaw", "alaw", "mp3"):
        refused = refused_options(None, audio_format)
        assert refused is not None and refused.code == "invalid_format"
    refused = refused_options(None, "pcm", 8000)
    assert refused is not None and refused.code == "invalid_sample_rate" and "24000 Hz only" in refused.message


def test_the_clis_sinks_write_g711_raw_and_wav_at_its_rate(tmp_path: Any) -> None:
    from voicestream.clients.audio_out import AudioOutError, open_sink

    sink = open_sink(str(tmp_path / "call.ulaw"), play=False, audio_format="mulaw", sample_rate=8000)
    sink.write(b"\x01\x02\x03")
    sink.close()
    assert (tmp_path / "call.ulaw").read_bytes() == b"\x01\x02\x03"
    wav = open_sink(str(tmp_path / "wide.wav"), play=False, sample_rate=16000)
    wav.write(b"\0\0")
    wav.close()
    assert (tmp_path / "wide.wav").read_bytes()[24:28] == (16000).to_bytes(4, "little")
    with pytest.raises(AudioOutError, match="--play plays 16-bit PCM"):
        open_sink(None, play=True, audio_format="alaw", sample_rate=8000)
