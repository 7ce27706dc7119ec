"""`sam local invoke` of each task function, fed its events/ file, on the local emulation image.

The real SAM CLI builds its invoke image from ours and creates the function's container; with
no bridge network on this engine it cannot reach that container's emulator (see
tests/container/sam_local.py and docs/deploy.md), which each test asserts, so that the day this
changes the tests say so. SAM's own container definition then runs on the host network and
the event goes to the function inside it, as SAM would send it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.container.conftest import REPO, free_port
from tests.container.engine import DockerEngine, docker
from tests.container.lambda_image import LABEL as LAMBDA_LABEL
from tests.container.lambda_image import build as build_lambda_image
from tests.container.sam_local import CONNECTION_FAILURE, Invocation, SamAttempt, attempt, invoke, replay
from tests.sam.conftest import AWS_TEST_ENV, EVENTS, REGION, RIC_DIR, SAM, TASK_FUNCTIONS, event, require_sam
from voicestream.aws.deploy.local_image import debian_image
from voicestream.aws.tasks.checks import ValidationSettings

InvokeTask = Callable[..., Invocation]


@pytest.fixture(scope="session")
def lambda_image(docker_engine: DockerEngine) -> Iterator[str]:
    require_sam()
    yield build_lambda_image(debian_image(REPO), RIC_DIR)
    # SAM rebuilds its invoke image on every invoke (the layer is in the template): drop the
    # ones that a changed layer left untagged.
    docker("image", "prune", "--force", "--filter", f"label={LAMBDA_LABEL}", timeout=120)


@pytest.fixture(scope="session")
def sam_attempts(sam_build: Path, sam_env: dict[str, str], lambda_image: str) -> dict[str, SamAttempt]:
    """`sam local invoke` of every task function with its events/ file, all at once: SAM builds
    its invoke image once and the others wait for that build (its own lock)."""
    env = {**sam_env, **AWS_TEST_ENV}
    template = sam_build / "template.yaml"
    with ThreadPoolExecutor(len(TASK_FUNCTIONS)) as pool:
        futures = {
            function: pool.submit(attempt, SAM, function, template, EVENTS / f"{name}.json", lambda_image, env)
            for name, function in TASK_FUNCTIONS.items()
        }
    return {function: future.result() for function, future in futures.items()}


@pytest.fixture(scope="session")
def sam_local(sam_attempts: dict[str, SamAttempt]) -> InvokeTask:
    """The function's `sam local invoke` container, replayed on the host network, fed its event."""

    def run(function: str, event_name: str, extra_env: Mapping[str, str] | None = None) -> Invocation:
        sam = sam_attempts[function]
        # SAM gives up on the container's published port, and still exits 0.
        assert CONNECTION_FAILURE in sam.output and sam.returncode == 0, sam.output[-4000:]
        assert sam.container, f"SAM created no container:\n{sam.output[-4000:]}"
        config = sam.container["Config"]
        assert config["Image"].startswith("samcli/lambda-python:3.12-x86_64-")  # built FROM our image
        assert f"AWS_LAMBDA_FUNCTION_NAME={function}" in config["Env"]
        assert {"Destination": "/var/task", "RW": False}.items() <= sam.container["Mounts"][0].items()
        port = free_port()
        container = replay(sam.container, f"voicestream-sam-{os.getpid()}-{event_name}", port, extra_env or {})
        try:
            return invoke(container, port, event(event_name))
        finally:
            container.remove()

    return run


def test_benchmark_function_aggregates_the_sample_trials(sam_local: InvokeTask) -> None:
    sample = event("benchmark")
    result = sam_local("BenchmarkFunction", "benchmark")
    assert not result.failed, result.payload
    report = result.payload
    assert report["trials"] == len(sample["trials"])
    batch = [t["agent"]["batch"]["first_audio_s"] for t in sample["trials"]]
    bidi = [t["agent"]["bidi"]["first_audio_s"] for t in sample["trials"]]
    expected = (sum(batch) / len(batch)) / (sum(bidi) / len(bidi))
    assert report["ratios"]["agent_first_audio_batch_over_bidi"]["mean"] == pytest.approx(expected, rel=1e-3)
    assert '"_aws"' in result.logs  # the EMF metrics line
    # Lambda's python3.12 runtime: this machine's 3.12 build, awslambdaric, the layer at /opt.
    assert '"function_name":"BenchmarkFunction"' in result.logs.replace(" ", "")


def test_teardown_function_empties_the_sample_bucket(sam_local: InvokeTask, moto_server: str) -> None:
    sample = event("teardown")
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_server, **_credentials())
    s3.create_bucket(Bucket=sample["bucket"])
    s3.put_bucket_versioning(Bucket=sample["bucket"], VersioningConfiguration={"Status": "Enabled"})
    for index in range(12):
        s3.put_object(Bucket=sample["bucket"], Key=f"benchmarks/{index % 5}.json", Body=json.dumps(index).encode())
    s3.delete_object(Bucket=sample["bucket"], Key="benchmarks/0.json")  # a delete marker
    # The container shares the host's network: the moto server on 127.0.0.1 is its AWS.
    result = sam_local("TeardownFunction", "teardown", {"AWS_ENDPOINT_URL": moto_server})
    assert not result.failed, result.payload
    assert result.payload["done"] is True and result.payload["already_gone"] is False
    assert result.payload["deleted_versions"] == 12 and result.payload["deleted_markers"] == 1
    listing = s3.list_object_versions(Bucket=sample["bucket"])
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")
    assert '"service":"teardown"' in result.logs.replace(" ", "")


def test_validate_function_reports_an_unreachable_endpoint(sam_local: InvokeTask) -> None:
    # No SageMaker runtime is reachable from here: the function loads, runs its checks against
    # the sample event's endpoint and reports the failure in its report instead of crashing.
    # (tests/sam/test_build.py runs the same built handler against the real server.)
    sample = event("validate")
    assert ValidationSettings.from_event(sample, default_region=REGION).endpoint_name == "voicestream-kokoro"
    result = sam_local("ValidateFunction", "validate")
    assert not result.failed, result.payload
    report = result.payload
    assert report["passed"] is False and report["endpoint_name"] == "voicestream-kokoro", report
    connect = report["checks"][0]
    assert connect["name"] == "bidi_connect" and not connect["passed"], report
    # The HTTP/2 client (awscrt, from the layer) ran inside the container and named the endpoint.
    assert "cannot open SageMaker endpoint 'voicestream-kokoro' in us-east-1" in connect["detail"], report
    assert '"service":"validate"' in result.logs.replace(" ", "")


def _credentials() -> dict[str, Any]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
