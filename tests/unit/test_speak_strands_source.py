"""StrandsSource against a fake Bedrock: real Strands, real boto3, only the service is played."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Iterator

import boto3
import pytest

from tests.support.fake_bedrock import FakeBedrock, Turn, fake_bedrock
from voicestream.speak.sources import BedrockModelFactory, BedrockSettings, StrandsSource, TextSourceError

MODEL_ID = "us.amazon.nova-lite-v1:0"


def make_factory(fake: FakeBedrock) -> BedrockModelFactory:
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1")
    settings = BedrockSettings(model_id=MODEL_ID, region="us-east-1", endpoint_url=fake.url)
    return BedrockModelFactory(settings, boto_session=session)


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    with fake_bedrock() as fake:
        yield fake


async def collect(source: StrandsSource) -> list[str]:
    return [delta async for delta in source.stream()]


async def test_deltas_stream_in_order(bedrock: FakeBedrock) -> None:
    deltas = ("Sure", ", the", " weather is", " mild today.", " Take a", " jacket.")
    bedrock.turns = [Turn(deltas=deltas)]
    source = StrandsSource("What is the weather like?", make_factory(bedrock))
    assert source.name == f"bedrock:{MODEL_ID}"
    assert await collect(source) == list(deltas)

    [request] = bedrock.requests
    assert request.model_id == MODEL_ID
    assert request.body["messages"][-1]["content"][0]["text"] == "What is the weather like?"
    assert "voice assistant" in request.body["system"][0]["text"]
    assert request.body["inferenceConfig"]["maxTokens"] == 400


async def test_the_model_is_built_once_and_shared(bedrock: FakeBedrock) -> None:
    factory = make_factory(bedrock)
    await collect(StrandsSource("one", factory))
    await collect(StrandsSource("two", factory))
    assert factory.model() is factory.model()
    # Each request is a fresh conversation: the second carries no trace of the first.
    assert [len(r.body["messages"]) for r in bedrock.requests] == [1, 1]


async def test_http_error_becomes_a_text_source_error(bedrock: FakeBedrock) -> None:
    bedrock.turns = [Turn(http_error=(400, "ValidationException", "The provided model identifier is invalid."))]
    with pytest.raises(TextSourceError) as caught:
        await collect(StrandsSource("hello", make_factory(bedrock)))
    assert caught.value.code == "model_error"
    assert "ValidationException" in caught.value.message
    assert "model identifier is invalid" in caught.value.message


async def test_in_stream_exception_becomes_a_text_source_error(bedrock: FakeBedrock) -> None:
    bedrock.turns = [Turn(deltas=("Partial",), stream_error=("modelStreamErrorException", "the model fell over"))]
    received: list[str] = []
    with pytest.raises(TextSourceError) as caught:
        async for delta in StrandsSource("hello", make_factory(bedrock)).stream():
            received.append(delta)
    assert received == ["Partial"]
    assert "the model fell over" in caught.value.message


async def test_an_in_stream_exception_releases_the_connection(bedrock: FakeBedrock) -> None:
    # botocore leaves the socket open after an in-stream exception; unreleased it would only
    # close when garbage-collected, with a ResourceWarning, once per failed reply.
    bedrock.turns = [Turn(deltas=("Partial",), stream_error=("throttlingException", "slow down"))]
    with pytest.raises(TextSourceError):
        await collect(StrandsSource("hello", make_factory(bedrock)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_closing_early_cancels_the_model_stream(bedrock: FakeBedrock) -> None:
    bedrock.turns = [Turn(deltas=tuple(f" word{i}" for i in range(200)), delay_s=0.02)]
    stream = StrandsSource("talk for a while", make_factory(bedrock)).stream()
    assert (await anext(stream)) == " word0"
    await stream.aclose()
    [request] = bedrock.requests
    # The bound only keeps a broken implementation from hanging the suite.
    finished = await asyncio.to_thread(request.finished.wait, 20)
    assert finished
    assert request.disconnected
    assert request.events_sent < 200
