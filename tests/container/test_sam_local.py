"""`sam local invoke` of each Step Functions task function, fed its events/ file, as a user runs it.

Plain SAM CLI, after `sam build`, with `--invoke-image` the local stand-in for Lambda's python3.12
image (tests/container/lambda_image.py: public.ecr.aws is not reachable here). The functions
run in SAM's containers on Docker's default bridge network; their AWS is a moto server on the
host's bridge address, named by AWS_ENDPOINT_URL in an `--env-vars` file. The tests check what
each function is for: the bucket emptied, the report aggregated, the endpoint's failure
reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.container.conftest import REPO, free_port
from tests.container.engine import DockerEngine, docker
from tests.container.lambda_image import LABEL as LAMBDA_LABEL
from tests.container.lambda_image import build as build_lambda_image
from tests.container.sam_local import SamInvocation, bridge_gateway, invoke
from tests.sam.conftest import AWS_TEST_ENV, EVENTS, REGION, RIC_DIR, SAM, event, require_sam
from voicestream.aws.deploy.local_image import debian_image
from voicestream.aws.tasks.checks import ValidationSettings

InvokeTask = Callable[..., SamInvocation]


@pytest.fixture(scope="session")
def bridge(docker_engine: DockerEngine) -> str:
    """The host's address on the default bridge; the tests are skipped, saying why, without one."""
    if not docker_engine.bridge:
        pytest.skip(f"sam local invoke needs Docker's default bridge network: {docker_engine.describe()}")
    return bridge_gateway()


@pytest.fixture(scope="session")
def lambda_image(docker_engine: DockerEngine) -> Iterator[str]:
    require_sam()
    yield build_lambda_image(debian_image(REPO), RIC_DIR)
    # SAM rebuilds its invoke image on every invoke (the layer is in the template): drop the
    # ones that a changed layer left untagged.
    docker("image", "prune", "--force", "--filter", f"label={LAMBDA_LABEL}", timeout=120)


@pytest.fixture(scope="module")
def bridge_moto(bridge: str) -> Iterator[str]:
    """A moto server on the host's bridge address: reachable from SAM's containers and from here."""
    port = free_port()
    server = ThreadedMotoServer(ip_address=bridge, port=port, verbose=False)
    server.start()
    try:
        yield f"http://{bridge}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sam_local(
    sam_build: Path,
    sam_env: dict[str, str],
    lambda_image: str,
    bridge_moto: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> InvokeTask:
    """`sam local invoke FUNCTION --event events/NAME.json --env-vars FILE`, AWS_ENDPOINT_URL the moto server."""
    env = {**sam_env, **AWS_TEST_ENV}
    env_vars_dir = tmp_path_factory.mktemp("env-vars")

    def run(function: str, event_name: str, env_vars: Mapping[str, str] | None = None) -> SamInvocation:
        variables = {"AWS_ENDPOINT_URL": bridge_moto, **(env_vars or {})}
        return invoke(
            SAM, function, sam_build / "template.yaml", EVENTS / f"{event_name}.json", lambda_image, env,
            variables, env_vars_dir / f"{function}.json",
        )  # fmt: skip

    return run


def test_teardown_function_empties_the_sample_bucket(sam_local: InvokeTask, bridge_moto: str) -> None:
    sample = event("teardown")
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=bridge_moto, **_credentials())
    s3.create_bucket(Bucket=sample["bucket"])
    s3.put_bucket_versioning(Bucket=sample["bucket"], VersioningConfiguration={"Status": "Enabled"})
    for index in range(12):
        s3.put_object(Bucket=sample["bucket"], Key=f"benchmarks/{index % 5}.json", Body=json.dumps(index).encode())
    s3.delete_object(Bucket=sample["bucket"], Key="benchmarks/0.json")  # a delete marker
    result = sam_local("TeardownFunction", "teardown")
    assert not result.failed, result.logs[-4000:]
    assert result.payload["done"] is True and result.payload["already_gone"] is False
    assert result.payload["deleted_versions"] == 12 and result.payload["deleted_markers"] == 1
    listing = s3.list_object_versions(Bucket=sample["bucket"])
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")
    assert '"service":"teardown"' in result.logs.replace(" ", "")


def test_benchmark_function_aggregates_the_sample_trials(sam_local: InvokeTask) -> None:
    sample = event("benchmark")
    result = sam_local("BenchmarkFunction", "benchmark")
    assert not result.failed, result.logs[-4000:]
    report = result.payload
    assert report["trials"] == len(sample["trials"])
    batch = [t["agent"]["batch"]["first_audio_s"] for t in sample["trials"]]
    bidi = [t["agent"]["bidi"]["first_audio_s"] for t in sample["trials"]]
    expected = (sum(batch) / len(batch)) / (sum(bidi) / len(bidi))
    assert report["ratios"]["agent_first_audio_batch_over_bidi"]["mean"] == pytest.approx(expected, rel=1e-3)
    assert '"_aws"' in result.logs  # the EMF metrics line
    # Lambda's python3.12 runtime: this machine's 3.12 build, awslambdaric, the layer at /opt.
    assert '"function_name":"BenchmarkFunction"' in result.logs.replace(" ", "")


def test_validate_function_reports_an_unreachable_endpoint(sam_local: InvokeTask) -> None:
    # No SageMaker runtime is reachable from here: the function loads, runs its checks against
    # the sample event's endpoint and reports the failure in its report instead of crashing.
    # (tests/sam/test_build.py runs the same built handler against the real server.)
    sample = event("validate")
    assert ValidationSettings.from_event(sample, default_region=REGION).endpoint_name == "voicestream-kokoro"
    result = sam_local("ValidateFunction", "validate")
    assert not result.failed, result.logs[-4000:]
    report = result.payload
    assert report["passed"] is False and report["endpoint_name"] == "voicestream-kokoro", report
    connect = report["checks"][0]
    assert connect["name"] == "bidi_connect" and not connect["passed"], report
    # The HTTP/2 client (awscrt, from the layer) ran inside the container and named the endpoint.
    assert "cannot open SageMaker endpoint 'voicestream-kokoro' in us-east-1" in connect["detail"], report
    assert '"service":"validate"' in result.logs.replace(" ", "")


def _credentials() -> dict[str, Any]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
