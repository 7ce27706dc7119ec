"""The deploy/validate/benchmark/destroy commands, against moto where they need no SAM or Docker.

The stack is template.yaml itself, transformed and created in moto's CloudFormation
(tests/sam/moto_stack.py); the steps then run with real boto3 clients against it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend

from tests.sam.conftest import REGION, REPO, Transform
from tests.sam.fake_hub import FakeHub, serve
from tests.sam.moto_stack import create_stack, make_executable
from tests.statemachines.conftest import ACCOUNT, LambdaRouter, load_handler_module
from tests.statemachines.test_deploy_validate import sagemaker_in_front_of
from tests.support.server import LiveServer
from voicestream.aws.deploy.bedrock import check_agent_model, configured_model
from voicestream.aws.deploy.commands import (
    Settings,
    deploy,
    destroy,
    ensure_endpoint,
    ensure_image,
    ensure_model,
    require_stack,
    validate,
)
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.execution import format_report, run_state_machine
from voicestream.aws.deploy.image import (
    CONTEXT_KEY,
    build_context,
    build_with_codebuild,
    build_with_docker,
    buildx_command,
    check_image_manifest,
    docker_available,
    image_exists,
)
from voicestream.aws.deploy.model import SHA256_METADATA, fetch_model, local_files, model_prefix, upload_model
from voicestream.aws.deploy.pins import MODEL_REPO, MODEL_REVISION
from voicestream.aws.deploy.stack import describe
from voicestream.aws.deploy.target import connect

STACK = "voicestream"
MOTO_PARAMETERS = {"InstanceType": "ml.g4dn.xlarge"}  # moto rejects ml.g5 (docs/platform-facts.md#sam)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(config={"lambda": {"use_docker": False}, "stepfunctions": {"execute_state_machine": True}}):
        yield


@pytest.fixture
def stack(aws: None, transform: Transform) -> dict[str, str]:
    """The first deploy's stack (no endpoint yet) in moto; its outputs."""
    created = create_stack(
        boto3.client("cloudformation", region_name=REGION), boto3.client("s3", region_name=REGION),
        STACK, transform(), MOTO_PARAMETERS,
    )  # fmt: skip
    assert created["StackStatus"] == "CREATE_COMPLETE"
    return {output["OutputKey"]: output["OutputValue"] for output in created["Outputs"]}


class Lines(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


# ------------------------------------------------------------- credentials
@pytest.mark.parametrize("command", ["deploy", "validate", "benchmark", "destroy"])
def test_without_credentials_every_command_fails_fast_and_clearly(command: str, tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata lookups from a test
    }  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "voicestream.cli", command], cwd=REPO, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("voicestream: no AWS credentials found: configure them"), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert time.monotonic() - started < 30


def test_a_missing_profile_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(DeployError, match="AWS profile 'nope' is not configured"):
        connect(profile="nope", region=REGION)


def test_connect_reports_the_account(aws: None) -> None:
    target = connect(region=REGION)
    assert target.account == "123456789012" and target.region == REGION


# ------------------------------------------------------------------ model
def model_dir(root: Path) -> Path:
    (root / "voices").mkdir(parents=True)
    (root / "config.json").write_text('{"vocab": {}}\n')
    (root / "kokoro-v1_0.pth").write_bytes(os.urandom(300_000))
    (root / "voices" / "af_heart.pt").write_bytes(os.urandom(20_000))
    (root / ".cache").mkdir()  # what hf_hub_download leaves; never uploaded
    (root / ".cache" / "x.lock").write_text("")
    return root


def test_model_upload_is_verified_and_resumable(aws: None, tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="models")
    s3.put_bucket_versioning(Bucket="models", VersioningConfiguration={"Status": "Enabled"})
    files = local_files(model_dir(tmp_path / "model"))
    assert [f.key for f in files] == ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt"]
    prefix = model_prefix()
    assert prefix == "kokoro-82m/f3ff3571791e/"

    first = upload_model(s3, "models", prefix, files, Lines())
    assert first.uploaded == ["config.json", "kokoro-v1_0.pth", "voices/af_heart.pt"] and first.skipped == []
    for file in files:
        head = s3.head_object(Bucket="models", Key=prefix + file.key)
        assert head["Metadata"][SHA256_METADATA] == hashlib.sha256(file.path.read_bytes()).hexdigest()
        body = s3.get_object(Bucket="models", Key=prefix + file.key)["Body"].read()
        assert body == file.path.read_bytes()

    again = upload_model(s3, "models", prefix, files, Lines())
    assert again.uploaded == [] and len(again.skipped) == 3

    # An object that is not what the file is (a partial or foreign upload) is replaced.
    s3.put_object(Bucket="models", Key=prefix + "kokoro-v1_0.pth", Body=b"truncated")
    repaired = upload_model(s3, "models", prefix, files, Lines())
    assert repaired.uploaded == ["kokoro-v1_0.pth"]


def test_model_upload_to_a_missing_bucket_fails_clearly(aws: None, tmp_path: Path) -> None:
    files = local_files(model_dir(tmp_path / "model"))
    with pytest.raises(DeployError, match="s3://absent/"):
        upload_model(boto3.client("s3", region_name=REGION), "absent", "p/", files, Lines())


# ------------------------------------------------------------------ image
def test_build_context_is_what_the_dockerfile_copies() -> None:
    context = build_context(REPO)
    assert {"container/Dockerfile", "container/serve", "pyproject.toml", "README.md"} <= set(context.files)
    assert "src/voicestream/kokoro_server/app.py" in context.files
    assert "packaging/en_core_web_sm/pyproject.toml" in context.files
    assert not [f for f in context.files if "__pycache__" in f or ".egg-info" in f or f.startswith("tests/")]
    assert context.tag == build_context(REPO).tag and context.tag.startswith("ctx-")
    assert context.zip_bytes() == context.zip_bytes()  # same context, same archive


def test_the_tag_follows_the_context(tmp_path: Path) -> None:
    for name in ("container", "src/voicestream/wire", "packaging/en_core_web_sm"):
        (tmp_path / name).mkdir(parents=True)
    for name in ("container/Dockerfile", "container/Dockerfile.dockerignore", "container/serve", "pyproject.toml",
                 "README.md", "packaging/en_core_web_sm/pyproject.toml"):  # fmt: skip
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "src/voicestream/wire/bidi.py").write_text("A = 1\n")
    before = build_context(tmp_path).tag
    (tmp_path / "src/voicestream/__pycache__").mkdir()
    (tmp_path / "src/voicestream/__pycache__/protocol.cpython-312.pyc").write_bytes(b"\0")
    assert build_context(tmp_path).tag == before  # ignored files do not count
    (tmp_path / "src/voicestream/wire/bidi.py").write_text("A = 2\n")
    assert build_context(tmp_path).tag != before


def test_image_exists_reads_the_repository(stack: dict[str, str]) -> None:
    ecr = boto3.client("ecr", region_name=REGION)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"})
    ecr.put_image(repositoryName=stack["RepositoryName"], imageManifest=manifest, imageTag="ctx-present")
    assert image_exists(ecr, stack["RepositoryName"], "ctx-present")
    assert not image_exists(ecr, stack["RepositoryName"], "ctx-absent")
    with pytest.raises(DeployError, match="cannot read ECR repository"):
        image_exists(ecr, "no-such-repository", "ctx-present")


def test_an_image_index_is_refused_with_the_fix(stack: dict[str, str]) -> None:
    ecr = boto3.client("ecr", region_name=REGION)
    repository = stack["RepositoryName"]
    single = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
              "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2,
                         "digest": "sha256:" + "a" * 64}, "layers": []}  # fmt: skip
    # What `docker build` with BuildKit's default provenance attestation pushes: an index of
    # the image and an attestation manifest.
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "b" * 64, "size": 9,
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "c" * 64, "size": 9,
         "platform": {"architecture": "unknown", "os": "unknown"}}]}  # fmt: skip
    ecr.put_image(repositoryName=repository, imageManifest=json.dumps(single), imageTag="ctx-single")
    ecr.put_image(repositoryName=repository, imageManifest=json.dumps(index), imageTag="ctx-index")

    assert check_image_manifest(ecr, repository, "ctx-single") == "application/vnd.docker.distribution.manifest.v2+json"
    with pytest.raises(DeployError, match=r"image index .*--platform linux/amd64 --provenance=false"):
        check_image_manifest(ecr, repository, "ctx-index")
    with pytest.raises(DeployError, match="cannot read the manifest"):
        check_image_manifest(ecr, repository, "ctx-absent")


def test_codebuild_builds_the_uploaded_context_version(stack: dict[str, str]) -> None:
    codebuild = boto3.client("codebuild", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    bucket = stack["ModelBucketName"]
    # moto's CloudFormation has no CodeBuild: the project is made as the template describes it.
    codebuild.create_project(
        name="voicestream-image", source={"type": "S3", "location": f"{bucket}/{CONTEXT_KEY}"},
        artifacts={"type": "NO_ARTIFACTS"}, serviceRole="arn:aws:iam::123456789012:role/build",
        environment={"type": "LINUX_CONTAINER", "image": "aws/codebuild/amazonlinux-x86_64-standard:5.0",
                     "computeType": "BUILD_GENERAL1_LARGE", "privilegedMode": True},
    )  # fmt: skip
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    context = build_context(REPO)
    lines = Lines()
    build_id = build_with_codebuild(
        codebuild, s3, project="voicestream-image", bucket=bucket, context=context, tag=context.tag,
        progress=lines, poll_s=0,
    )  # fmt: skip
    (build,) = codebuild.batch_get_builds(ids=[build_id])["builds"]
    latest = s3.head_object(Bucket=bucket, Key=CONTEXT_KEY)
    assert build["sourceVersion"] == latest["VersionId"]
    # (moto does not keep environmentVariablesOverride, which carries IMAGE_TAG.)
    archive = zipfile.ZipFile(BytesIO(s3.get_object(Bucket=bucket, Key=CONTEXT_KEY)["Body"].read()))
    assert sorted(archive.namelist()) == context.files
    assert any(line.strip().startswith("CodeBuild ") for line in lines)


def docker_stand_in(tmp_path: Path, *, buildx: bool) -> Path:
    """A `docker` on PATH that records its calls (and login's stdin): buildx, and so the
    production build, cannot run on the test machines (Debian's docker.io has no buildx)."""
    calls = tmp_path / "docker-calls.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    refuse_buildx = "" if buildx else 'if [ "$1" = buildx ]; then echo "unknown command" >&2; exit 1; fi\n'
    script = bin_dir / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s | %s\\n" "$(pwd)" "$*" >> "{calls}"\n'
        f"{refuse_buildx}"
        f'if [ "$1" = login ]; then read -r password; echo "stdin: $password" >> "{calls}"; fi\n'
    )
    script.chmod(0o755)
    return bin_dir


def test_docker_builds_and_pushes_with_buildx_for_amd64_without_provenance(
    stack: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{docker_stand_in(tmp_path, buildx=True)}:{os.environ['PATH']}")
    assert docker_available()
    ecr = boto3.client("ecr", region_name=REGION)
    context = build_context(REPO)
    uri = stack["RepositoryUri"]
    build_with_docker(ecr, context, uri, context.tag, Lines())
    calls = (tmp_path / "docker-calls.log").read_text().splitlines()
    registry = uri.split("/", 1)[0]
    token = base64.b64decode(ecr.get_authorization_token()["authorizationData"][0]["authorizationToken"]).decode()
    assert calls[-3:] == [
        f"{REPO} | login --username {token.split(':')[0]} --password-stdin {registry}",
        f"stdin: {token.split(':', 1)[1]}",
        f"{REPO} | buildx build --platform linux/amd64 --provenance=false --file container/Dockerfile "
        f"--tag {uri}:{context.tag} --push .",
    ]


def test_without_buildx_auto_uses_codebuild_and_docker_is_refused(
    stack: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{docker_stand_in(tmp_path, buildx=False)}:{os.environ['PATH']}")
    assert not docker_available()
    deployed = require_stack(connect(region=REGION), STACK)
    with pytest.raises(DeployError, match="--builder docker needs a running Docker engine with buildx"):
        ensure_image(connect(region=REGION), deployed, build_context(REPO), "docker", Lines())


def test_codebuild_is_refused_while_its_base_image_would_come_anonymously_from_docker_hub(
    stack: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No buildx here, so auto falls back to CodeBuild; the stack has no Docker Hub secret.
    monkeypatch.setenv("PATH", f"{docker_stand_in(tmp_path, buildx=False)}:{os.environ['PATH']}")
    assert stack["BaseImagePull"] == "docker-hub-anonymous"
    deployed = require_stack(connect(region=REGION), STACK)
    for builder in ("auto", "codebuild"):
        with pytest.raises(DeployError, match=r"anonymously.*DockerHubCredentialsSecretArn.*--builder docker"):
            ensure_image(connect(region=REGION), deployed, build_context(REPO), builder, Lines())
    assert boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=stack["ModelBucketName"])["KeyCount"] == 0


def test_codebuild_runs_the_same_buildx_command(transform: Transform) -> None:
    project = transform()["Resources"]["ImageBuildProject"]["Properties"]
    command = " ".join(buildx_command('"$REPOSITORY_URI:$IMAGE_TAG"', base_registry="$BASE_REGISTRY"))
    assert command in project["Source"]["BuildSpec"]
    assert project["Environment"]["Image"] == "aws/codebuild/amazonlinux-x86_64-standard:5.0"  # has buildx


# --------------------------------------------------------------- endpoint
def test_endpoint_is_created_by_a_parameter_update_once(stack: dict[str, str]) -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    first = describe(cfn, STACK)
    assert first is not None and first.outputs["EndpointDeployed"] == "false"
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_endpoints()["Endpoints"] == []

    lines = Lines()
    updated = ensure_endpoint(cfn, first, "ctx-0123", "kokoro-82m/f3ff3571791e/", lines)
    assert updated.status == "UPDATE_COMPLETE" and updated.outputs["EndpointDeployed"] == "true"
    assert updated.parameters["ImageTag"] == "ctx-0123"
    assert updated.parameters["InstanceType"] == "ml.g4dn.xlarge"  # the others kept their values
    (endpoint,) = sagemaker.list_endpoints()["Endpoints"]
    assert endpoint["EndpointStatus"] == "InService"
    (model,) = sagemaker.list_models()["Models"]
    container = sagemaker.describe_model(ModelName=model["ModelName"])["PrimaryContainer"]
    assert container["Image"].endswith(f"/{stack['RepositoryName']}:ctx-0123")

    again = Lines()
    ensure_endpoint(cfn, updated, "ctx-0123", "kokoro-82m/f3ff3571791e/", again)
    assert any("already set" in line for line in again)


def test_a_speech_model_switch_on_a_live_stack_is_refused_before_sam_runs(
    stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    first = describe(cfn, STACK)
    assert first is not None
    ensure_endpoint(cfn, first, "ctx-0123", "kokoro-82m/f3ff3571791e/", Lines())
    monkeypatch.setenv("VOICESTREAM_SAM", "/nonexistent/sam")  # reaching SAM would fail otherwise
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    settings = Settings(stack_name=STACK, root=REPO, region=REGION, speech_model="qwen3-tts", validate=False)
    with pytest.raises(DeployError) as refused:
        deploy(settings, Lines())
    message = str(refused.value)
    assert "serves kokoro on a live endpoint" in message and "instance type of its auto-scaled variant" in message
    assert f"voicestream destroy --stack-name {STACK}" in message and "--stack-name <another>" in message
    after = describe(cfn, STACK)
    assert after is not None and after.outputs["SpeechModel"] == "kokoro" and after.status == "UPDATE_COMPLETE"


def test_a_speech_model_switch_before_any_endpoint_goes_on_to_sam(
    stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICESTREAM_SAM", "/nonexistent/sam")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    settings = Settings(stack_name=STACK, root=REPO, region=REGION, speech_model="qwen3-tts", validate=False)
    with pytest.raises(DeployError, match="SAM CLI not found"):  # past the checks: SAM's turn
        deploy(settings, Lines())


def test_a_region_without_the_default_agent_model_stops_before_sam(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICESTREAM_SAM", "/nonexistent/sam")
    with pytest.raises(DeployError, match=r"no profile for region ca-central-1: set BedrockModelId"):
        deploy(Settings(stack_name=STACK, root=REPO, region="ca-central-1", validate=False), Lines())


def test_the_agent_model_comes_from_samconfig_the_stack_or_the_region(tmp_path: Path) -> None:
    assert configured_model(REPO) == ""  # the shipped samconfig.toml leaves the default
    assert check_agent_model("eu-west-1", tmp_path, None) == "eu.amazon.nova-lite-v1:0"
    assert check_agent_model("ap-south-1", tmp_path, None) == "apac.amazon.nova-lite-v1:0"
    assert check_agent_model("ca-central-1", tmp_path, {"BedrockModelId": "amazon.nova-lite-v1:0"}) == (
        "amazon.nova-lite-v1:0"
    )
    (tmp_path / "samconfig.toml").write_text(
        '[default.deploy.parameters]\nparameter_overrides = "InstanceType=ml.g5.xlarge BedrockModelId=my.model-v1:0"\n'
    )
    assert check_agent_model("ca-central-1", tmp_path, {"BedrockModelId": ""}) == "my.model-v1:0"


def test_validate_needs_an_endpoint(stack: dict[str, str]) -> None:
    with pytest.raises(DeployError, match="has no endpoint yet"):
        validate(Settings(stack_name=STACK, region=REGION), Lines())


def test_commands_on_a_missing_stack(aws: None) -> None:
    lines = Lines()
    assert destroy(Settings(stack_name="absent", region=REGION), lines) == 0
    assert lines[-1].startswith("no stack absent in account 123456789012")
    with pytest.raises(DeployError, match="run `voicestream deploy` first"):
        require_stack(connect(region=REGION), "absent")


def test_destroy_asks_before_removing(stack: dict[str, str]) -> None:
    with pytest.raises(DeployError, match="not confirmed: nothing was removed"):
        destroy(Settings(stack_name=STACK, region=REGION), Lines(), confirm=lambda question: False)
    assert describe(boto3.client("cloudformation", region_name=REGION), STACK) is not None


# ---------------------------------------------------------- state machines
def machine(definition: dict[str, Any]) -> str:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    created = sfn.create_state_machine(
        name=f"m{time.monotonic_ns()}", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/sfn"
    )
    return str(created["stateMachineArn"])


def test_a_succeeding_execution_returns_its_report(aws: None) -> None:
    report = {
        "passed": True,
        "checks": [{"name": "binary_frames", "passed": True, "detail": "3 sentences", "seconds": 1.5}],
    }
    arn = machine({"StartAt": "Report", "States": {"Report": {"Type": "Pass", "Result": report, "End": True}}})
    output = run_state_machine(
        boto3.client("stepfunctions", region_name=REGION), arn, {}, Lines(), label="x", poll_s=0.05
    )
    assert output == report
    (line,) = [line for line in format_report(output) if "binary_frames" in line]
    assert line.split()[:2] == ["PASS", "binary_frames"] and "1.50 s" in line


def test_a_failing_execution_raises_its_cause(aws: None) -> None:
    arn = machine({"StartAt": "Fail", "States": {"Fail": {"Type": "Fail", "Error": "ValidationFailed",
                                                           "Cause": "binary frames got no audio"}}})  # fmt: skip
    with pytest.raises(DeployError, match="deploy-validate FAILED: ValidationFailed: binary frames got no audio"):
        run_state_machine(
            boto3.client("stepfunctions", region_name=REGION), arn, {}, Lines(), label="deploy-validate", poll_s=0.05
        )


# ------------------------------------------------- model from the hub
HUB_FILES = {
    "config.json": json.dumps({"vocab": {"a": 1}, "n_token": 178}).encode(),
    "kokoro-v1_0.pth": os.urandom(200_000),
    "voices/af_heart.pt": os.urandom(10_000),
    "voices/am_michael.pt": os.urandom(10_000),
    "README.md": b"# not needed by the endpoint\n",
}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    from huggingface_hub import constants

    fake = FakeHub(MODEL_REPO, "c0ffee" + "0" * 34, HUB_FILES, lfs_suffixes=(".pth", ".pt"))
    with serve(fake) as url:
        # Both are read from HF_ENDPOINT when huggingface_hub is first imported.
        monkeypatch.setattr(constants, "ENDPOINT", url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
        from huggingface_hub import HfApi, hf_hub_url

        # Never the real hub from a test: stop here if this client version looks elsewhere.
        assert hf_hub_url(MODEL_REPO, "config.json").startswith(url) and HfApi().endpoint == url
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield fake


def test_model_step_puts_the_hub_files_in_the_bucket_verified(aws: None, hub: FakeHub, tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="models")
    settings = Settings(region=REGION, revision=hub.commit, model_cache=tmp_path / "cache")
    prefix = ensure_model(s3, "models", settings, Lines())
    assert prefix == f"kokoro-82m/{hub.commit[:12]}/"
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="models", Prefix=prefix)["Contents"]}
    wanted = {"config.json", "kokoro-v1_0.pth", "voices/af_heart.pt", "voices/am_michael.pt", "SOURCE.json"}
    assert keys == {prefix + name for name in wanted}  # README.md is not model data
    body = s3.get_object(Bucket="models", Key=prefix + "kokoro-v1_0.pth")["Body"].read()
    assert body == HUB_FILES["kokoro-v1_0.pth"]

    # Again: nothing is downloaded or uploaded twice.
    downloads = len(hub.downloads)
    lines = Lines()
    ensure_model(s3, "models", settings, lines)
    assert len(hub.downloads) == downloads
    assert lines[-1].endswith("0 uploaded, 5 already there")


def test_model_step_refuses_bytes_that_do_not_match_the_hub(aws: None, hub: FakeHub, tmp_path: Path) -> None:
    hub.tamper("voices/af_heart.pt", os.urandom(10_000))
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="models")
    settings = Settings(region=REGION, revision=hub.commit, model_cache=tmp_path / "cache")
    with pytest.raises(DeployError, match=r"voices/af_heart\.pt does not match the hub"):
        ensure_model(s3, "models", settings, Lines())
    assert "Contents" not in s3.list_objects_v2(Bucket="models")  # nothing unverified reaches the bucket


def test_the_pinned_revision_must_carry_the_pinned_checkpoint(hub: FakeHub, tmp_path: Path) -> None:
    hub.commit = MODEL_REVISION  # the hub claims the pinned commit but serves another checkpoint
    with pytest.raises(DeployError, match="is not the pinned checkpoint"):
        fetch_model(tmp_path / "cache", MODEL_REVISION, Lines())


def test_deploy_after_the_stack_is_resumable(stack: dict[str, str], hub: FakeHub, tmp_path: Path) -> None:
    """Steps 2-5 of `voicestream deploy` on the moto stack (SAM and the deploy-validate run are
    out of moto's reach); a second run finds every step done."""
    context = build_context(REPO)
    ecr = boto3.client("ecr", region_name=REGION)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json"})
    ecr.put_image(repositoryName=stack["RepositoryName"], imageManifest=manifest, imageTag=context.tag)  # pushed
    settings = Settings(
        stack_name=STACK, root=REPO, region=REGION, builder="codebuild", model_cache=tmp_path / "cache",
        revision=hub.commit, validate=False, update_stack=False,
    )  # fmt: skip
    first = Lines()
    assert deploy(settings, first) == 0
    assert [line.split("]")[0] for line in first if line.startswith("[")] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    deployed = describe(boto3.client("cloudformation", region_name=REGION), STACK)
    assert deployed is not None and deployed.outputs["EndpointDeployed"] == "true"
    assert deployed.parameters["ImageTag"] == context.tag
    assert deployed.parameters["ModelDataPrefix"] == model_prefix(hub.commit)
    assert len(boto3.client("sagemaker", region_name=REGION).list_endpoints()["Endpoints"]) == 1

    second = Lines()
    assert deploy(settings, second) == 0
    text = "\n".join(second)
    assert "0 uploaded, 5 already there" in text
    assert f"{stack['RepositoryName']}:{context.tag} already in ECR" in text
    assert "parameters already set" in text


def test_deploy_of_qwen3_tts_builds_and_uploads_nothing(aws: None, transform: Transform, tmp_path: Path) -> None:
    """SpeechModel=qwen3-tts: the stack holds the endpoint already (AWS's vLLM-Omni image, the
    model from the Hub), so deploy's steps are the stack and its outputs only."""
    parameters = {"SpeechModel": "qwen3-tts"}
    created = create_stack(
        boto3.client("cloudformation", region_name=REGION), boto3.client("s3", region_name=REGION),
        STACK, transform(**parameters), parameters,
    )  # fmt: skip
    outputs = {output["OutputKey"]: output["OutputValue"] for output in created["Outputs"]}
    settings = Settings(
        stack_name=STACK, root=REPO, region=REGION, model_cache=tmp_path / "never-used",
        validate=False, update_stack=False, speech_model="qwen3-tts",
    )  # fmt: skip
    lines = Lines()
    assert deploy(settings, lines) == 0
    assert [line.split("]")[0] for line in lines if line.startswith("[")] == ["[1/2", "[2/2"]
    assert "deploying stack voicestream (qwen3-tts)" in lines[0]
    assert not (tmp_path / "never-used").exists()
    s3 = boto3.client("s3", region_name=REGION)
    assert s3.list_objects_v2(Bucket=outputs["ModelBucketName"]).get("KeyCount") == 0
    ecr = boto3.client("ecr", region_name=REGION)
    assert ecr.list_images(repositoryName=outputs["RepositoryName"])["imageIds"] == []
    # Without --speech-model the deployed stack's model is kept.
    again = Lines()
    assert deploy(Settings(stack_name=STACK, root=REPO, region=REGION, validate=False, update_stack=False), again) == 0
    assert "(qwen3-tts)" in again[0]


def test_deploy_refuses_another_model_on_a_stack_it_does_not_update(stack: dict[str, str]) -> None:
    settings = Settings(stack_name=STACK, root=REPO, region=REGION, update_stack=False, speech_model="qwen3-tts")
    with pytest.raises(DeployError, match="runs kokoro, not qwen3-tts: deploy with --speech-model qwen3-tts"):
        deploy(settings, Lines())


# ------------------------------------------- the stack's state machines, run
@pytest.fixture
def endpoint_stack(aws: None, transform: Transform, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The stack with its endpoint, in moto. moto names the endpoint itself (it ignores
    EndpointName), so the endpoint the state machines address is made under its real name."""
    for key, value in {"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_NAMESPACE": "voicestream"}.items():
        monkeypatch.setenv(key, value)
    # The local server runs onnx on the CPU: the stack says so (a c7i endpoint), so deploy-validate
    # expects the device the server reports.
    parameters = {"InstanceType": "ml.c7i.xlarge", "EngineBackend": "onnx", "ImageTag": "ctx-0123",
                  "ModelDataPrefix": "kokoro-82m/f3ff3571791e/"}  # fmt: skip
    created = create_stack(
        boto3.client("cloudformation", region_name=REGION), boto3.client("s3", region_name=REGION),
        STACK, transform(**parameters), parameters,
    )  # fmt: skip
    outputs = {output["OutputKey"]: output["OutputValue"] for output in created["Outputs"]}
    make_executable(ACCOUNT, REGION)
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    (config,) = sagemaker.list_endpoint_configs()["EndpointConfigs"]
    sagemaker.create_endpoint(EndpointName=outputs["EndpointName"], EndpointConfigName=config["EndpointConfigName"])
    return outputs


def route_lambdas(monkeypatch: pytest.MonkeyPatch, handlers: dict[str, Any]) -> LambdaRouter:
    """moto's Lambda invokes of the stack's functions (by logical id) go to these real handlers."""
    names = [f["FunctionName"] for f in boto3.client("lambda", region_name=REGION).list_functions()["Functions"]]
    router = LambdaRouter()
    for logical_id, handler in handlers.items():
        (name,) = [name for name in names if f"-{logical_id}-" in name]
        router.handlers[name] = handler

    def invoke(backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response: Any) -> bytes:
        payload, error = router.invoke(function_name, body)
        if error:
            response["x-amz-function-error"] = error
        return payload

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    return router


def test_validate_command_runs_the_stacks_deploy_validate(
    endpoint_stack: dict[str, str], kokoro_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load_handler_module("validate")
    with sagemaker_in_front_of(kokoro_server, kokoro_server) as (validator, _):
        monkeypatch.setattr(module, "validator", validator)
        route_lambdas(monkeypatch, {"ValidateFunction": module.handler})
        lines = Lines()
        assert validate(Settings(stack_name=STACK, region=REGION), lines) == 0
    marks = {line.split()[1]: line.split()[0] for line in lines if line.strip().startswith(("PASS", "FAIL"))}
    assert marks == {
        "bidi_connect": "PASS", "bidi_three_sentences": "PASS", "bidi_device": "PASS", "bidi_malformed_message": "PASS",
        "invocations_stream": "PASS",
    }  # fmt: skip


def test_destroy_runs_teardown_before_sam_delete(
    endpoint_stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    for index in range(3):
        s3.put_object(Bucket=endpoint_stack["ModelBucketName"], Key=f"kokoro-82m/x/{index}", Body=b"weights")
        s3.put_object(Bucket=endpoint_stack["ResultsBucketName"], Key=f"benchmarks/{index}.json", Body=b"{}")
    route_lambdas(monkeypatch, {"TeardownFunction": load_handler_module("teardown").handler})
    # sam delete is SAM CLI's part (no SAM here): destroy must have torn down before it stops there.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    lines = Lines()
    with pytest.raises(DeployError, match="SAM CLI not found"):
        destroy(Settings(stack_name=STACK, region=REGION), lines, assume_yes=True)
    report = "\n".join(lines)
    assert "[1/3] teardown state machine" in report and "[2/3] sam delete" in report
    assert report.count('"deleted_versions": 3') == 2  # what was removed, as the report says
    for bucket in ("ModelBucketName", "ResultsBucketName"):
        assert not s3.list_object_versions(Bucket=endpoint_stack[bucket]).get("Versions")
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    names = [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]]
    assert endpoint_stack["EndpointName"] not in names
    assert sagemaker.list_endpoint_configs()["EndpointConfigs"] == []
