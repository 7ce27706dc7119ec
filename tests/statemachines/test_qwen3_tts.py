"""The state machines of a SpeechModel=qwen3-tts stack, in moto's interpreter with our real task
handlers: behind the (faked) SageMaker runtime is the faithful fake of vLLM-Omni's speech stream
(tests/support/fake_vllm_omni.py), reached as the DLC is: through `model_invocation_path`, with
every payload part UTF8. The fake ends any session that gets a binary frame, so these runs also
prove that nothing on the way sends one."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials

from tests.statemachines.conftest import ENDPOINT, REGION, Executions, LambdaRouter, load_handler_module
from tests.statemachines.test_deploy_validate import FAST
from tests.support.fake_sagemaker import FakeSageMakerRuntime
from tests.support.fake_vllm_omni import ROUTE, FakeVllmOmni, serve_fake
from tests.support.server import start_server
from voicestream.aws.tasks.benchmark import Benchmarker
from voicestream.aws.tasks.validate import EndpointValidator
from voicestream.speak.app import create_app as create_speak_app
from voicestream.speak.config import SpeakConfig

RESULTS_BUCKET = "voicestream-results-qwen3"


def _credentials() -> dict[str, str]:
    # mock_aws installs its own fake credentials in the environment; the SDK signs with those.
    return {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}


@contextlib.contextmanager
def vllm_omni_endpoint(fake: FakeVllmOmni) -> Iterator[tuple[FakeSageMakerRuntime, str]]:
    """The fake vLLM-Omni on a real socket, and SageMaker's runtime in front of it for ENDPOINT
    (its sidecar reaches the container at the route that `model_invocation_path` names)."""
    with serve_fake(fake) as (_live, url):
        service = FakeSageMakerRuntime(
            region=REGION, credentials=_credentials(), endpoints={ENDPOINT: url.removesuffix(ROUTE)}
        )
        yield service, url


def validate_machine(executions: Executions, lambdas: LambdaRouter, service: FakeSageMakerRuntime) -> str:
    module = load_handler_module("validate")
    setattr(module, "validator", EndpointValidator(http_client_factory=service.connection))  # noqa: B010
    arn = lambdas.add("voicestream-validate", module.handler)
    # ExpectedDevice as the template renders it for a GPU stack; the qwen3-tts checks do not use it.
    substitutions = {"EndpointName": ENDPOINT, "ValidateFunctionArn": arn, "SpeechModel": "qwen3-tts"}
    return executions.create("deploy_validate", {**substitutions, "ExpectedDevice": "cuda"})


def test_deploy_validate_passes_against_vllm_omni(endpoint: Any, executions: Executions, lambdas: LambdaRouter) -> None:
    fake = FakeVllmOmni(realtime_factor=0.2)  # audio paced a little, as a GPU streams it
    with vllm_omni_endpoint(fake) as (service, url):
        machine = validate_machine(executions, lambdas, service)
        result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", (result.describe(), service.rejections)
    report = result.output["validation"]
    assert report["passed"] is True, report["cause"]
    checks = {check["name"]: check for check in report["checks"]}
    assert list(checks) == ["vllm_omni_connect", "vllm_omni_sentences", "vllm_omni_cancel"]
    sentences = checks["vllm_omni_sentences"]["data"]["sentences"]
    assert len(sentences) == 3
    assert all(s["pairs"] == 1 and s["audio_bytes"] > 2000 for s in sentences)
    assert checks["vllm_omni_cancel"]["data"]["cancelled_outcome"] == "cancelled"
    # The task addressed the speech route, every payload UTF8, config first on each stream
    # (the cancel check opened a second one).
    assert len(service.streams) == 2
    for stream in service.streams:
        assert stream.headers["x-amzn-sagemaker-model-invocation-path"] == "v1/audio/speech/stream"
        assert stream.model_url == url
        assert {part.data_type for part in stream.received} == {"UTF8"}
        assert stream.received[0].payload.startswith(b'{"type":"session.config"')
    assert all(record.errors == [] for record in fake.sessions)
    spoken = [g.text for record in fake.sessions for g in record.generations]
    assert spoken[:3] == [sentence["text"] for sentence in sentences]


def test_deploy_validate_fails_when_the_audio_is_too_short(
    endpoint: Any, executions: Executions, lambdas: LambdaRouter
) -> None:
    # A model that says almost nothing: 1,000 bytes (21 ms) whatever the text.
    fake = FakeVllmOmni(lambda text, settings: iter([b"\x10\x00" * 500]))
    with vllm_omni_endpoint(fake) as (service, _url):
        machine = validate_machine(executions, lambdas, service)
        result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.error == "EndpointValidationFailed"
    assert result.cause is not None
    assert f"endpoint '{ENDPOINT}' is InService but failed validation (1 of 3 checks passed)" in result.cause
    assert "vllm_omni_sentences" in result.cause and "(needs more than 2000)" in result.cause


def test_deploy_validate_fails_clearly_when_the_container_does_not_answer(
    endpoint: Any, executions: Executions, lambdas: LambdaRouter
) -> None:
    service = FakeSageMakerRuntime(
        region=REGION, credentials=_credentials(), endpoints={ENDPOINT: f"ws://127.0.0.1:{_closed_port()}"}
    )
    machine = validate_machine(executions, lambdas, service)
    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.cause is not None
    assert "vllm_omni_connect: cannot open" in result.cause and "cannot reach the model container" in result.cause
    assert "vllm_omni_sentences: not run: the session did not open" in result.cause


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def speak_url(aws: None) -> Iterator[tuple[str, FakeVllmOmni, FakeSageMakerRuntime]]:
    """A speak app with SPEECH_UPSTREAM=vllm-omni (unsigned here: test_benchmark.py checks the
    signing), and the SageMaker runtime, both in front of one fake vLLM-Omni."""
    fake = FakeVllmOmni()
    with vllm_omni_endpoint(fake) as (service, url):
        app = create_speak_app(SpeakConfig(upstream="vllm-omni", vllm_omni_url=url), metrics=False)
        with start_server(app, wait_ready=False) as server:
            yield server.http_url, fake, service


def test_benchmark_runs_both_experiments_on_vllm_omni(
    speak_url: tuple[str, FakeVllmOmni, FakeSageMakerRuntime], executions: Executions, lambdas: LambdaRouter
) -> None:
    url, fake, service = speak_url
    module = load_handler_module("benchmark")
    benchmarker = Benchmarker(http_client_factory=service.connection, credentials=_unchecked_credentials())
    setattr(module, "benchmarker", benchmarker)  # noqa: B010
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=RESULTS_BUCKET)
    machine = executions.create(
        "benchmark",
        {
            "EndpointName": ENDPOINT,
            "SpeechModel": "qwen3-tts",
            "SpeakFunctionUrl": url,
            "ResultsBucket": RESULTS_BUCKET,
            "BenchmarkFunctionArn": lambdas.add("voicestream-benchmark", module.handler),
        },
    )
    text = "The first sentence is short. The second one is short too."
    # metrics_wait_seconds 0: the ASL's default waits 120 s (in real time under moto) for CloudWatch.
    run = {"trials": 1, "text": text, "prompt": "", "silence_timeout_s": 60, "metrics_wait_seconds": 0}
    result = executions.run(machine, run)

    assert result.status == "SUCCEEDED", result.describe()
    raw = result.output["report"]["raw"][0]
    assert raw["isolated"]["sentences"]["pieces"] == 2 and raw["isolated"]["whole"]["pieces"] == 1
    assert raw["agent"]["bidi"]["sentences"] == 2 and raw["agent"]["batch"]["sentences"] == 1
    # Isolated: two SageMaker streams (whole, sentences), UTF8 only. Agent: the speak app's own
    # sessions straight to the server. Every utterance the fake spoke was one piece.
    assert len(service.streams) == 2
    assert all({p.data_type for p in stream.received} == {"UTF8"} for stream in service.streams)
    assert all(record.errors == [] for record in fake.sessions)
    spoken = sorted(g.text for record in fake.sessions for g in record.generations)
    assert spoken.count(text) == 2  # whole paragraph: isolated "whole" and agent "batch"


def _unchecked_credentials() -> Credentials:
    return Credentials("AKIDTEST", "secret")
