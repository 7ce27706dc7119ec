"""deploy_validate.asl.json in moto's interpreter; the validation task is our real handler, and
the endpoint behind SageMaker's (faked) runtime is the real local Kokoro server."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.statemachines.conftest import (
    ACCOUNT,
    ENDPOINT,
    REGION,
    Executions,
    LambdaRouter,
    load_handler_module,
)
from tests.statemachines.fake_response_stream import FakeResponseStreamRuntime
from tests.support.fake_sagemaker import FakeSageMakerRuntime
from tests.support.server import LiveServer, start_server
from voicestream.aws.tasks.validate import EndpointValidator
from voicestream.engine.base import SpeechEngine
from voicestream.wire.bidi import Limits

FAST = {"poll_seconds": 0, "max_polls": 1000, "silence_timeout_s": 60}


class TextFramesOnly:
    """The anchor's bug as a server variant: binary WebSocket frames never reach the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        async def text_only() -> Message:
            while True:
                message = await receive()
                if message["type"] == "websocket.receive" and message.get("bytes") is not None:
                    continue
                return message

        await self.app(scope, text_only, send)


@pytest.fixture(scope="module")
def text_only_server(kokoro_engine: SpeechEngine) -> Iterator[LiveServer]:
    from voicestream.kokoro_server import create_app

    app = create_app(kokoro_engine, Limits())
    app.add_middleware(TextFramesOnly)
    with start_server(app) as server:
        yield server


@contextlib.contextmanager
def sagemaker_in_front_of(server: LiveServer, kokoro_server: LiveServer) -> Iterator[tuple[Any, Any]]:
    """SageMaker's runtime for ENDPOINT: the bidi stream goes to `server`'s WebSocket route (as
    the sidecar does), POST /invocations to the real Kokoro server."""
    # mock_aws installs its own fake credentials in the environment; the SDK signs with those.
    credentials = {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}
    bidi = FakeSageMakerRuntime(region=REGION, credentials=credentials, endpoints={ENDPOINT: server.ws_url})
    stream = FakeResponseStreamRuntime(
        region=REGION, endpoints={ENDPOINT: kokoro_server.http_url}, secrets=lambda: credentials
    )
    with start_server(stream.app(), wait_ready=False) as runtime_server:
        runtime = boto3.client("sagemaker-runtime", region_name=REGION, endpoint_url=runtime_server.http_url)
        yield EndpointValidator(http_client_factory=bidi.connection, runtime_client=runtime), (bidi, stream)


def _machine(
    executions: Executions, lambdas: LambdaRouter, validator: EndpointValidator, expected_device: str = "cpu"
) -> str:
    module = load_handler_module("validate")
    # The handler's one dependency, pointed at the fake SageMaker in front of a real server.
    setattr(module, "validator", validator)  # noqa: B010
    arn = lambdas.add("voicestream-validate", module.handler)
    # The local server runs the onnx engine on the CPU: as the template says for an ml.c7i endpoint.
    substitutions = {
        "EndpointName": ENDPOINT, "ValidateFunctionArn": arn, "ExpectedDevice": expected_device, "SpeechModel": "kokoro"
    }  # fmt: skip
    return executions.create("deploy_validate", substitutions)


@pytest.fixture
def real_endpoint(kokoro_server: LiveServer) -> Iterator[tuple[EndpointValidator, Any]]:
    with sagemaker_in_front_of(kokoro_server, kokoro_server) as pair:
        yield pair


def test_passes_against_the_real_kokoro_server(
    endpoint: Any, real_endpoint: tuple[EndpointValidator, Any], executions: Executions, lambdas: LambdaRouter
) -> None:
    validator, (bidi, stream) = real_endpoint
    machine = _machine(executions, lambdas, validator)

    result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", (result.describe(), bidi.rejections)
    report = result.output["validation"]
    assert result.output["endpoint_status"] == "InService"
    assert report["passed"] is True, report["cause"]
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == [
        "bidi_connect", "bidi_three_sentences", "bidi_device", "bidi_malformed_message", "invocations_stream"
    ]  # fmt: skip
    assert all(c["passed"] for c in checks.values())
    assert checks["bidi_device"]["data"] == {"engine": "onnx", "device": "cpu", "expected_device": "cpu"}
    sentences = checks["bidi_three_sentences"]["data"]["sentences"]
    assert len(sentences) == 3
    assert all(s["audio_ms"] > 500 and s["audio_bytes"] > 0 for s in sentences)
    assert checks["bidi_malformed_message"]["data"]["code"] == "invalid_json"
    assert checks["invocations_stream"]["data"]["audio_ms"] > 500
    # Every client payload crossed SageMaker as data_type BINARY, in ONE session.
    assert len(bidi.streams) == 1
    assert {part.data_type for part in bidi.streams[0].received} == {"BINARY"}
    assert len(stream.calls) == 1
    assert stream.rejections == []


def test_fails_with_a_clear_cause_against_a_server_that_reads_only_text_frames(
    endpoint: Any,
    text_only_server: LiveServer,
    kokoro_server: LiveServer,
    executions: Executions,
    lambdas: LambdaRouter,
) -> None:
    with sagemaker_in_front_of(text_only_server, kokoro_server) as (validator, _):
        machine = _machine(executions, lambdas, validator)

        result = executions.run(machine, {**FAST, "silence_timeout_s": 3})

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointValidationFailed"
    assert result.cause is not None
    assert f"endpoint '{ENDPOINT}' is InService but failed validation" in result.cause
    assert "bidi_three_sentences" in result.cause
    assert "BINARY" in result.cause
    assert "reads only text WebSocket frames" in result.cause
    # The other cause that looks the same from outside: a GPU host without the streaming sidecar.
    assert "InferenceAmiVersion must be al2023-ami-sagemaker-inference-gpu-4-1" in result.cause


def test_waits_while_creating_then_validates_once_in_service(
    endpoint: Any, real_endpoint: tuple[EndpointValidator, Any], executions: Executions, lambdas: LambdaRouter
) -> None:
    validator, _ = real_endpoint
    machine = _machine(executions, lambdas, validator)
    endpoint.endpoint_status = "Creating"

    execution = executions.start(machine, {**FAST, "poll_seconds": 1})
    executions.wait_until(execution, lambda history: any(e["type"] == "WaitStateEntered" for e in history))
    endpoint.endpoint_status = "InService"
    result = executions.finish(execution)

    assert result.status == "SUCCEEDED", result.describe()
    entered = result.entered()
    assert entered.count("DescribeEndpoint") >= 2
    assert "WaitForEndpoint" in entered
    assert entered.index("Validate") > entered.index("WaitForEndpoint")
    assert result.output["status_polls"] >= 1
    assert result.output["validation"]["passed"] is True


def test_a_failed_endpoint_fails_with_its_failure_reason(
    endpoint: Any, executions: Executions, lambdas: LambdaRouter
) -> None:
    machine = _machine(executions, lambdas, EndpointValidator())
    endpoint.endpoint_status = "Failed"
    reason = "The primary container for production variant AllTraffic did not pass the ping health check."
    endpoint.failure_reason = reason

    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointFailed"
    assert result.cause == f"endpoint {ENDPOINT} is Failed: {reason}"
    assert lambdas.calls("voicestream-validate") == []


def test_a_failed_endpoint_without_a_failure_reason_still_fails_clearly(
    endpoint: Any, executions: Executions, lambdas: LambdaRouter
) -> None:
    # DescribeEndpoint may omit FailureReason; the state that reports it must not fail on the
    # missing path (States.Runtime) instead of naming the endpoint.
    machine = _machine(executions, lambdas, EndpointValidator())
    endpoint.endpoint_status = "Failed"
    endpoint.failure_reason = None

    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointFailed"
    assert result.cause == (
        f"endpoint {ENDPOINT} is Failed and SageMaker gave no FailureReason: "
        f"see its log group /aws/sagemaker/Endpoints/{ENDPOINT}"
    )
    assert "EndpointFailedWithoutReason" in result.entered()


def test_an_endpoint_that_never_leaves_creating_hits_the_deadline(
    endpoint: Any, executions: Executions, lambdas: LambdaRouter
) -> None:
    machine = _machine(executions, lambdas, EndpointValidator())
    endpoint.endpoint_status = "Creating"

    result = executions.run(machine, {**FAST, "max_polls": 3})

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointWaitTimedOut"
    assert result.cause == f"endpoint {ENDPOINT} still Creating after 3 polls 0 s apart"
    assert result.entered().count("DescribeEndpoint") == 4
    assert lambdas.calls("voicestream-validate") == []


def test_a_missing_endpoint_fails_with_sagemakers_message(
    aws: None, executions: Executions, lambdas: LambdaRouter
) -> None:
    machine = _machine(executions, lambdas, EndpointValidator())

    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.cause is not None
    assert "deploy-validate stopped" in result.cause
    assert f"Could not find endpoint 'arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}'" in result.cause


def test_fails_with_a_clear_cause_when_the_server_is_not_on_the_expected_device(
    endpoint: Any, real_endpoint: tuple[EndpointValidator, Any], executions: Executions, lambdas: LambdaRouter
) -> None:
    # What a GPU endpoint whose container fell back to the CPU looks like from outside: it
    # speaks (every other check passes), but on the wrong device.
    validator, _ = real_endpoint
    machine = _machine(executions, lambdas, validator, expected_device="cuda")

    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointValidationFailed"
    assert result.cause is not None
    assert "bidi_device: the server synthesizes with onnx on cpu, expected cuda" in result.cause
    assert "InferenceAmiVersion" in result.cause
    assert "4 of 5 checks passed" in result.cause
