"""The speak function as deployed (Strands on Bedrock, the Kokoro endpoint through SageMaker),
its AWS calls audited against the SpeakRole of the transformed template.

Only the services are played: Bedrock's ConverseStream (tests/support/fake_bedrock.py) and
SageMaker's HTTP/2 bidi service in front of the real local Kokoro server. The app, Strands,
boto3 and the SageMaker SDK are real; every call they make is checked as IAM would check it
(the iam_audit fixture), so a grant the role lacks fails here, not on the first real deploy.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import httpx
import pytest

from tests.statemachines.conftest import REGION
from tests.support.fake_bedrock import FakeBedrock, Turn, fake_bedrock
from tests.support.fake_sagemaker import FakeSageMakerRuntime
from tests.support.iam.asgi import ActingAs
from tests.support.iam.audit import IamAudit
from tests.support.server import LiveServer, start_server
from voicestream.aws.function_url import call_speak
from voicestream.speak.app import create_app
from voicestream.speak.config import SpeakConfig
from voicestream.speak.sources import BedrockSettings
from voicestream.wire.speak import Done, SentenceAudio

ENDPOINT = "voicestream-kokoro"
# A cross-region inference profile, as the template's default model id is.
MODEL_ID = "us.amazon.nova-lite-v1:0"
REPLY = ("The museum", " opens at ten.", " Enjoy it!")


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    with fake_bedrock([Turn(deltas=REPLY)]) as fake:
        yield fake


@pytest.fixture
def speak_url(iam_audit: IamAudit, bedrock: FakeBedrock, kokoro_server: LiveServer) -> Iterator[str]:
    credentials = {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}
    sagemaker = FakeSageMakerRuntime(region=REGION, credentials=credentials, endpoints={ENDPOINT: kokoro_server.ws_url})
    config = SpeakConfig(
        sagemaker_endpoint=ENDPOINT,
        region=REGION,
        bedrock=BedrockSettings(model_id=MODEL_ID, region=REGION, endpoint_url=bedrock.url),
        sagemaker_http_client=sagemaker.connection,
    )
    # The names the deployed function gets from its environment (template.yaml).
    iam_audit.stack.bind_environment(
        "SpeakFunction", {"SAGEMAKER_ENDPOINT_NAME": ENDPOINT, "BEDROCK_MODEL_ID": MODEL_ID}
    )
    app = ActingAs(create_app(config, metrics=False), "speak")
    with start_server(app, wait_ready=False) as server:  # type: ignore[arg-type]
        yield server.http_url


async def test_a_prompted_reply_uses_only_what_the_speak_role_grants(
    speak_url: str, bedrock: FakeBedrock, iam_audit: IamAudit
) -> None:
    async with asyncio.timeout(120), httpx.AsyncClient(timeout=120) as client:
        events = [
            e async for e in call_speak(client, speak_url, {"prompt": "When?", "transport": "binary"}, credentials=None)
        ]

    done = events[-1]
    assert isinstance(done, Done) and done.status == "complete", done
    assert sum(len(e.data) for e in events if isinstance(e, SentenceAudio)) > 0
    assert len(bedrock.requests) == 1
    calls = {(call.service, call.operation) for call in iam_audit.calls if call.principal == "speak"}
    assert calls == {("bedrock", "ConverseStream"), ("sagemaker", "InvokeEndpointWithBidirectionalStream")}
    assert iam_audit.violations() == []
