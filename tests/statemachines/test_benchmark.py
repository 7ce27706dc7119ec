"""benchmark.asl.json in moto's interpreter; the benchmark task is our real handler. Behind the
(faked) SageMaker runtime is the real local Kokoro server, and behind the (faked) function URL
the real speak app, which checks the task's SigV4 signature as a function URL with AWS_IAM auth."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials

from tests.statemachines.conftest import REGION, Executions, LambdaRouter, load_handler_module
from tests.statemachines.sigv4 import RequireSigV4
from tests.support.fake_sagemaker import FakeSageMakerRuntime
from tests.support.iam.audit import IamAudit
from tests.support.iam.function_url import FunctionUrlIam
from tests.support.server import LiveServer, start_server
from voicestream.aws.tasks.benchmark import Benchmarker
from voicestream.speak.app import create_app as create_speak_app
from voicestream.speak.config import SpeakConfig

ENDPOINT = "voicestream-kokoro"
RESULTS_BUCKET = "voicestream-results-test"
# Short texts: the real model runs on two shared CPU cores.
TEXT = "The first sentence is short. The second one is short too."
RUN = {"trials": 2, "text": TEXT, "prompt": "", "silence_timeout_s": 60, "metrics_wait_seconds": 0}
STATS = ("n", "mean", "p50", "p95", "min", "max")


def _credentials() -> dict[str, str]:
    # mock_aws installs its own fake credentials in the environment; everything signs with those.
    return {os.environ["AWS_ACCESS_KEY_ID"]: os.environ["AWS_SECRET_ACCESS_KEY"]}


@pytest.fixture
def speak_url(iam_audit: IamAudit, kokoro_server: LiveServer) -> Iterator[tuple[str, list[str]]]:
    """The real speak app (talking to the real Kokoro server) behind a SigV4 check and the IAM
    check of a function URL; its only caller in these tests is the benchmark function."""
    app = create_speak_app(SpeakConfig(kokoro_ws_url=kokoro_server.ws_url))
    rejections: list[str] = []
    app.add_middleware(FunctionUrlIam, caller="function:benchmark")
    app.add_middleware(RequireSigV4, secrets=_credentials, region=REGION, service="lambda", rejections=rejections)
    with start_server(app, wait_ready=False) as server:
        yield server.http_url, rejections


def _machine(
    executions: Executions, lambdas: LambdaRouter, kokoro_server: LiveServer, speak: str, credentials: Any = None
) -> tuple[str, FakeSageMakerRuntime]:
    bidi = FakeSageMakerRuntime(region=REGION, credentials=_credentials(), endpoints={ENDPOINT: kokoro_server.ws_url})
    module = load_handler_module("benchmark")
    # The handler's one dependency, pointed at the fake SageMaker in front of the real server.
    setattr(module, "benchmarker", Benchmarker(http_client_factory=bidi.connection, credentials=credentials))  # noqa: B010
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=RESULTS_BUCKET)
    machine = executions.create(
        "benchmark",
        {
            "EndpointName": ENDPOINT,
            "SpeechModel": "kokoro",
            "SpeakFunctionUrl": speak,
            "ResultsBucket": RESULTS_BUCKET,
            "BenchmarkFunctionArn": lambdas.add("voicestream-benchmark", module.handler),
        },
    )
    return machine, bidi


def test_benchmark_writes_the_report_with_statistics_to_s3(
    speak_url: tuple[str, list[str]], kokoro_server: LiveServer, executions: Executions, lambdas: LambdaRouter
) -> None:
    url, rejections = speak_url
    machine, bidi = _machine(executions, lambdas, kokoro_server, url)

    result = executions.run(machine, RUN)

    assert result.status == "SUCCEEDED", result.describe()
    execution_name = result.arn.rsplit(":", 1)[1]
    assert result.output["report_uri"] == f"s3://{RESULTS_BUCKET}/benchmarks/{execution_name}.json"
    stored = boto3.client("s3", region_name=REGION).get_object(
        Bucket=RESULTS_BUCKET, Key=f"benchmarks/{execution_name}.json"
    )
    assert stored["ContentType"] == "application/json"
    report = json.loads(stored["Body"].read())
    assert report == result.output["report"]

    assert report["trials"] == 2
    assert [t["trial"] for t in report["raw"]] == [1, 2]
    stats = report["statistics"]
    for experiment, variants in {"isolated": ("whole", "sentences"), "agent": ("bidi", "batch")}.items():
        for variant in variants:
            for measure in ("first_audio_s", "total_s"):
                summary = stats[experiment][variant][measure]
                assert set(summary) == set(STATS)
                assert summary["n"] == 2
                assert 0 < summary["min"] <= summary["p50"] <= summary["p95"] <= summary["max"]
                raw = [t[experiment][variant][measure] for t in report["raw"]]
                assert summary["mean"] == pytest.approx(sum(raw) / 2)
    for name, ratios in report["ratios"].items():
        assert ratios["mean"] is not None and ratios["mean"] > 0, name
        assert ratios["p50"] is not None and ratios["p50"] > 0, name
    whole = stats["isolated"]["whole"]["first_audio_s"]["mean"]
    sentences = stats["isolated"]["sentences"]["first_audio_s"]["mean"]
    assert report["ratios"]["isolated_first_audio_whole_over_sentences"]["mean"] == pytest.approx(whole / sentences)

    # The experiments really ran: two sentences pipelined vs one whole request, each on its own
    # SageMaker session (2 per trial), and the speak function spoke both sentences in each mode.
    first = report["raw"][0]
    assert first["isolated"]["sentences"]["pieces"] == 2
    assert first["isolated"]["whole"]["pieces"] == 1
    assert len(bidi.streams) == 4
    assert first["agent"]["bidi"]["sentences"] == 2
    assert first["agent"]["batch"]["sentences"] == 1
    assert rejections == []
    # Trials ran one at a time: each trial's two invocations are adjacent.
    trials = [c.event.get("trial") for c in lambdas.calls("voicestream-benchmark") if "trial" in c.event]
    assert trials == [1, 1, 2, 2]
    # Both metrics auto scaling tracks, side by side over the run (moto has no datapoints for them).
    metrics = {m["Id"]: m for m in report["scaling_metrics"]}
    assert set(metrics) == {"concurrent_requests_per_model", "open_sessions"}
    assert "ConcurrentRequestsPerModel" in metrics["concurrent_requests_per_model"]["Label"]
    assert "OpenSessions" in metrics["open_sessions"]["Label"]
    assert all("Values" in m and "Timestamps" in m for m in metrics.values())


def test_a_failing_experiment_fails_the_run_with_a_readable_cause(
    speak_url: tuple[str, list[str]], kokoro_server: LiveServer, executions: Executions, lambdas: LambdaRouter
) -> None:
    url, rejections = speak_url
    # Signed with a key the function URL does not know: AWS answers 403.
    machine, _ = _machine(executions, lambdas, kokoro_server, url, credentials=Credentials("AKIDUNKNOWN", "nope"))

    result = executions.run(machine, {**RUN, "trials": 1})

    assert result.status == "FAILED", result.describe()
    assert result.error == "BenchmarkError"
    assert result.cause is not None
    assert "benchmark stopped (BenchmarkError)" in result.cause
    assert "answered HTTP 403" in result.cause
    assert rejections and "unknown access key AKIDUNKNOWN" in rejections[0]
    assert "SaveReport" not in result.entered()
