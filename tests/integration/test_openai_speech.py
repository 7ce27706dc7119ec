"""/v1/audio/speech with the official `openai` package against the real server and model.

Every format is decoded by FFmpeg (PyAV) and heard by Whisper; streaming is checked causally
(when the first chunk is in the client's hands, the server has not yet started the last
sentence), never with a clock. SageMaker's route is the same body through boto3's
InvokeEndpointWithResponseStream with CustomAttributes, via the SigV4-checking fake runtime.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from types import ModuleType

import boto3
import httpx
import openai
import pytest
from botocore.config import Config

from tests.statemachines.fake_response_stream import FakeResponseStreamRuntime
from tests.support.audio_decode import decode
from tests.support.server import LiveServer, start_server
from voicestream.chunker import split_sentences
from voicestream.texts import bench_texts
from voicestream.wire.framing import SSEDecoder

TEXT = "The museum opens at ten in the morning. Tickets cost eighteen euros."
MAX_WER = 0.25


@pytest.fixture(scope="module")
def client(kokoro_server: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{kokoro_server.http_url}/v1", api_key="unused", max_retries=0) as client:
        yield client


def test_non_streamed_wav_is_the_text(client: openai.OpenAI, asr: ModuleType) -> None:
    response = client.audio.speech.create(model="kokoro", voice="af_heart", input=TEXT, response_format="wav")
    assert response.response.headers["content-type"] == "audio/wav"
    samples, codec = decode(response.content, "wav")
    assert codec == "pcm_s16le" and len(samples) > 24_000
    assert asr.word_error_rate(TEXT, asr.transcribe(samples)) <= MAX_WER


def test_streamed_pcm_arrives_before_the_last_sentence_is_synthesized(
    client: openai.OpenAI, kokoro_server: LiveServer, asr: ModuleType
) -> None:
    text = bench_texts()["paragraph_4_sentences"]
    sentences = len(split_sentences(text))
    assert sentences == 4
    runtime = kokoro_server.runtime
    before = kokoro_server.on_loop(lambda: runtime.stats.sentences_started)
    chunks: list[bytes] = []
    started_at_first_chunk = None
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="af_heart", input=text, response_format="pcm"
    ) as response:
        assert response.headers["content-type"].startswith("audio/pcm")
        for chunk in response.iter_bytes(4800):
            if started_at_first_chunk is None:
                started_at_first_chunk = kokoro_server.on_loop(lambda: runtime.stats.sentences_started) - before
            chunks.append(chunk)
    assert started_at_first_chunk is not None and started_at_first_chunk < sentences
    assert len(chunks) > 10  # read piece by piece, as it streamed
    assert asr.word_error_rate(text, asr.transcribe(b"".join(chunks))) <= MAX_WER


@pytest.mark.parametrize(
    ("audio_format", "codec"),
    [("mp3", "mp3float"), ("opus", "opus"), ("aac", "aac"), ("flac", "flac"), ("pcm", "pcm_s16le")],
)
def test_every_format_decodes_and_is_heard_right(
    client: openai.OpenAI, asr: ModuleType, audio_format: str, codec: str
) -> None:
    response = client.audio.speech.create(
        model="kokoro",
        voice="am_adam",
        input=TEXT,
        response_format=audio_format,  # type: ignore[arg-type]
        instructions="Ignored: Kokoro has no instructions.",
    )
    samples, found = decode(response.content, audio_format)
    assert found == codec
    assert asr.word_error_rate(TEXT, asr.transcribe(samples)) <= MAX_WER


def test_sse_carries_openais_events(kokoro_server: LiveServer, asr: ModuleType) -> None:
    body = {"model": "kokoro", "voice": "nova", "input": TEXT, "response_format": "pcm", "stream_format": "sse"}
    decoder = SSEDecoder()
    events = []
    with httpx.stream("POST", f"{kokoro_server.http_url}/v1/audio/speech", json=body, timeout=120) as response:
        assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
        for chunk in response.iter_raw():
            events.extend(decoder.feed(chunk))
    decoder.close()
    kinds = [event.json()["type"] for event in events]
    assert kinds[-1] == "speech.audio.done" and set(kinds[:-1]) == {"speech.audio.delta"}
    assert events[-1].json()["usage"]["input_tokens"] == len(TEXT)
    audio = b"".join(base64.b64decode(event.json()["audio"]) for event in events[:-1])
    assert asr.word_error_rate(TEXT, asr.transcribe(audio)) <= MAX_WER


@pytest.mark.parametrize(
    ("fields", "error", "code", "param"),
    [
        ({"voice": "zz_nobody"}, openai.BadRequestError, "unknown_voice", "voice"),
        ({"voice": "af_heart:0.5,zz_nobody:0.5"}, openai.BadRequestError, "unknown_voice", "voice"),
        ({"response_format": "ogg"}, openai.BadRequestError, "invalid_format", "response_format"),
        ({"speed": 3.0}, openai.BadRequestError, "invalid_speed", "speed"),
        ({"speed": 0.25}, openai.BadRequestError, "invalid_speed", "speed"),
        ({"input": ""}, openai.BadRequestError, "empty_text", "input"),
        ({"input": "x" * 2001}, openai.APIStatusError, "text_too_long", "input"),
        ({"model": "gpt-5"}, openai.NotFoundError, "model_not_found", "model"),
    ],
)
def test_bad_requests_are_openai_errors(
    client: openai.OpenAI, fields: dict[str, object], error: type[openai.APIStatusError], code: str, param: str
) -> None:
    request: dict[str, object] = {"model": "kokoro", "voice": "af_heart", "input": "Hello.", **fields}
    with pytest.raises(error) as caught:
        client.audio.speech.create(**request)  # type: ignore[arg-type]
    assert 400 <= caught.value.status_code < 500
    assert (caught.value.code, caught.value.param) == (code, param)
    assert isinstance(caught.value.body, dict) and caught.value.body["type"] == "invalid_request_error"


def test_models_and_voices(client: openai.OpenAI, kokoro_server: LiveServer) -> None:
    assert {model.id for model in client.models.list()} >= {"kokoro", "tts-1"}
    voices = httpx.get(f"{kokoro_server.http_url}/v1/audio/voices").json()
    assert "af_heart" in voices["voices"] and voices["default"] == "af_heart"


def test_the_same_body_through_sagemaker_invocations(kokoro_server: LiveServer, asr: ModuleType) -> None:
    region, endpoint, secrets = "us-east-1", "kokoro", {"AKIDTEST": "secret"}
    fake = FakeResponseStreamRuntime(
        region=region, endpoints={endpoint: kokoro_server.http_url}, secrets=lambda: secrets
    )
    body = {"model": "kokoro", "voice": "af_heart", "input": TEXT, "response_format": "flac"}
    with start_server(fake.app(), wait_ready=False) as front:
        runtime = boto3.client(
            "sagemaker-runtime",
            region_name=region,
            endpoint_url=front.http_url,
            aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret",
            config=Config(retries={"max_attempts": 1}),
        )
        response = runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint,
            Body=json.dumps(body),
            ContentType="application/json",
            CustomAttributes="route=/v1/audio/speech",
        )
        audio = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event)
        assert response["ContentType"] == "audio/flac"
        # Without the attribute the same body is an /invocations body: refused, no "text".
        with pytest.raises(runtime.exceptions.ModelError, match="missing_text"):
            runtime.invoke_endpoint_with_response_stream(
                EndpointName=endpoint, Body=json.dumps(body), ContentType="application/json"
            )
    samples, codec = decode(audio, "flac")
    assert codec == "flac"
    assert asr.word_error_rate(TEXT, asr.transcribe(samples)) <= MAX_WER
    # Errors keep OpenAI's shape on this route too.
    refused = httpx.post(
        f"{kokoro_server.http_url}/invocations",
        json={**body, "speed": 9},
        headers={"X-Amzn-SageMaker-Custom-Attributes": "route=/v1/audio/speech"},
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "speed"
