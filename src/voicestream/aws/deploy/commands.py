"""The four commands: deploy, validate, benchmark, destroy (each step idempotent and resumable)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from voicestream.aws.deploy.bedrock import check_agent_model
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.execution import format_report, run_state_machine
from voicestream.aws.deploy.image import (
    BuildContext,
    build_context,
    build_with_codebuild,
    build_with_docker,
    check_image_manifest,
    docker_available,
    image_exists,
)
from voicestream.aws.deploy.model import (
    default_cache_dir,
    fetch_model,
    local_files,
    model_prefix,
    upload_model,
)
from voicestream.aws.deploy.pins import MODEL_REPO, MODEL_REVISION
from voicestream.aws.deploy.progress import Progress, Steps
from voicestream.aws.deploy.sam import run_sam
from voicestream.aws.deploy.stack import CAPABILITIES, Stack, describe, set_parameters
from voicestream.aws.deploy.target import AwsTarget, connect
from voicestream.speech.base import SPEECH_MODELS

Builder = Literal["auto", "docker", "codebuild"]
FetchModel = Callable[[Path, str, Progress], Path]


@dataclass(frozen=True)
class Settings:
    stack_name: str = "voicestream"
    root: Path = field(default_factory=Path.cwd)
    region: str | None = None
    profile: str | None = None
    builder: Builder = "auto"
    model_cache: Path | None = None
    revision: str = MODEL_REVISION
    validate: bool = True
    update_stack: bool = True  # False: use the stack as deployed (skip sam build/deploy)
    speech_model: str | None = None  # kokoro | qwen3-tts; None: keep the stack's (a new stack: kokoro)

    def template(self) -> Path:
        template = self.root / "template.yaml"
        if not template.is_file():
            raise DeployError(f"{template} not found: run from the voicestream checkout (or pass --root)")
        return template


# -- the steps, each usable on its own (and against moto) ------------------------------------------


def ensure_model(s3: Any, bucket: str, settings: Settings, progress: Progress, fetch: FetchModel = fetch_model) -> str:
    """The model files of the pinned revision in the bucket (verified); their prefix."""
    prefix = model_prefix(settings.revision)
    cache = settings.model_cache or default_cache_dir(settings.revision)
    root = fetch(cache, settings.revision, progress)
    summary = upload_model(s3, bucket, prefix, local_files(root), progress)
    progress(f"      s3://{bucket}/{prefix}: {len(summary.uploaded)} uploaded, {len(summary.skipped)} already there")
    return prefix


def ensure_image(target: AwsTarget, stack: Stack, context: BuildContext, builder: Builder, progress: Progress) -> str:
    """The image of this build context in the repository (built only when absent); its tag."""
    tag = context.tag
    ecr = target.client("ecr")
    repository = stack.output("RepositoryName")
    if image_exists(ecr, repository, tag):
        progress(f"      {repository}:{tag} already in ECR")
        check_image_manifest(ecr, repository, tag)
        return tag
    use_docker = builder != "codebuild" and docker_available()
    if builder == "docker" and not use_docker:
        raise DeployError("--builder docker needs a running Docker engine with buildx; or use --builder codebuild")
    if use_docker:
        build_with_docker(ecr, context, stack.output("RepositoryUri"), tag, progress)
    else:
        require_cached_base(stack)
        progress("      no local Docker with buildx: building in the stack's CodeBuild project")
        build_with_codebuild(
            target.client("codebuild"), target.client("s3"),
            project=stack.output("ImageBuildProjectName"), bucket=stack.output("ModelBucketName"),
            context=context, tag=tag, progress=progress,
        )  # fmt: skip
    if not image_exists(ecr, repository, tag):
        raise DeployError(f"the build finished but {repository}:{tag} is not in ECR")
    check_image_manifest(ecr, repository, tag)
    return tag


def require_cached_base(stack: Stack) -> None:
    """CodeBuild builds only when its base image comes through the stack's pull-through cache:
    anonymous Docker Hub pulls are rate-limited per IP, and CodeBuild's IPs are shared, so such a
    build fails with `toomanyrequests` at random."""
    if stack.outputs.get("BaseImagePull", "docker-hub-anonymous") != "pull-through-cache":
        raise DeployError(
            "CodeBuild would pull the CUDA base image from Docker Hub anonymously, which Docker Hub rate-limits "
            "per IP (CodeBuild shares IPs: `toomanyrequests`). Store a Docker Hub access token in Secrets Manager "
            'as {"username": ..., "accessToken": ...} under a name starting ecr-pullthroughcache/, set the '
            "template parameter DockerHubCredentialsSecretArn to its ARN (samconfig.toml parameter_overrides) and "
            'deploy again; or build locally with Docker and buildx (--builder docker); docs/deploy.md, "Image build"'
        )


def refuse_model_switch(stack: Stack | None, model: str) -> None:
    """A live endpoint cannot change models in place: the instance type of a variant under auto
    scaling cannot change, so SageMaker refuses the update and the stack rolls back (after a long
    wait). Say what works instead, before anything changes."""
    if stack is None or stack.outputs.get("EndpointDeployed") != "true":
        return
    deployed = stack.outputs.get("SpeechModel", "kokoro")
    if deployed != model:
        raise DeployError(
            f"stack {stack.name} serves {deployed} on a live endpoint; switching it to {model} would change the "
            "instance type of its auto-scaled variant, which SageMaker refuses (the stack update would fail and "
            f"roll back). Either `voicestream destroy --stack-name {stack.name}` and deploy again with "
            f"--speech-model {model}, or deploy a second stack beside it: --stack-name <another> with another "
            "EndpointName (samconfig.toml parameter_overrides)"
        )


def ensure_endpoint(cfn: Any, stack: Stack, image_tag: str, prefix: str, progress: Progress) -> Stack:
    """The endpoint on this image and model data: a parameter update of the stack."""
    progress(f"      endpoint {stack.output('EndpointName')}: image {image_tag}, model data {prefix}")
    updated = set_parameters(cfn, stack, {"ImageTag": image_tag, "ModelDataPrefix": prefix}, progress)
    if updated.outputs.get("EndpointDeployed") != "true":
        raise DeployError(f"stack {stack.name} updated but reports no endpoint (EndpointDeployed is not true)")
    return updated


def run_report(
    target: AwsTarget, stack: Stack, output: str, label: str, payload: Mapping[str, Any], progress: Progress
) -> dict[str, Any]:
    """Run one of the stack's state machines and print its report."""
    sfn = target.client("stepfunctions")
    report = run_state_machine(sfn, stack.output(output), payload, progress, label=label)
    for line in format_report(report):
        progress(line)
    return report


def require_stack(target: AwsTarget, name: str) -> Stack:
    stack = describe(target.client("cloudformation"), name)
    if stack is None:
        raise DeployError(f"no stack {name} in {target.describe}: run `voicestream deploy` first")
    if not stack.usable:
        raise DeployError(f"stack {name} is {stack.status}: fix or delete it, then deploy again")
    return stack


# -- the commands ------------------------------------------------------------------------------


def speech_model_of(target: AwsTarget, settings: Settings) -> str:
    """The model this deploy is for: as asked, else the deployed stack's, else kokoro."""
    if settings.speech_model is not None:
        if settings.speech_model not in SPEECH_MODELS:
            raise DeployError(f"speech model must be one of {', '.join(SPEECH_MODELS)}, got {settings.speech_model!r}")
        return settings.speech_model
    stack = describe(target.client("cloudformation"), settings.stack_name)
    return (stack.outputs.get("SpeechModel") if stack else None) or "kokoro"


def deploy(settings: Settings, progress: Progress = print, connect: Callable[..., AwsTarget] = connect) -> int:
    target = connect(settings.profile, settings.region)  # first: without credentials, nothing else runs
    settings.template()
    model = speech_model_of(target, settings)
    kokoro = model == "kokoro"  # qwen3-tts runs AWS's vLLM-Omni image: no model upload, no image build
    context = build_context(settings.root)
    progress(f"deploying stack {settings.stack_name} ({model}) to {target.describe}")
    steps = Steps((4 if kokoro else 2) + settings.validate + settings.update_stack, progress)
    if settings.update_stack:
        # Checked before SAM changes anything: each would fail the stack update late, or roll it back.
        deployed = describe(target.client("cloudformation"), settings.stack_name)
        refuse_model_switch(deployed, model)
        check_agent_model(target.region, settings.root, deployed.parameters if deployed else None)
        overrides = [] if settings.speech_model is None else ["--parameter-overrides", f"SpeechModel={model}"]
        with steps.step("stack: sam build + sam deploy" + ("" if kokoro else " (creates the Qwen3-TTS endpoint)")):
            run_sam(settings.root, target, ["build"], progress)
            run_sam(
                settings.root, target,
                ["deploy", "--stack-name", settings.stack_name, "--resolve-s3", "--no-confirm-changeset",
                 "--no-fail-on-empty-changeset", "--capabilities", *CAPABILITIES, *overrides],
                progress,
            )  # fmt: skip
    with steps.step("stack outputs"):
        stack = require_stack(target, settings.stack_name)
        for key in ("ModelBucketName", "RepositoryUri", "SpeakFunctionUrl"):
            steps.note(f"{key}: {stack.output(key)}")
        deployed_model = stack.outputs.get("SpeechModel", "kokoro")
        if deployed_model != model:
            raise DeployError(
                f"stack {stack.name} runs {deployed_model}, not {model}: deploy with --speech-model {model} "
                "(without --skip-stack) to switch"
            )
    if kokoro:
        with steps.step(f"model weights: {MODEL_REPO}@{settings.revision[:12]}"):
            prefix = ensure_model(target.client("s3"), stack.output("ModelBucketName"), settings, progress)
        with steps.step(f"server image ({len(context.files)} files in its build context)"):
            tag = ensure_image(target, stack, context, settings.builder, progress)
        with steps.step("endpoint (CloudFormation creates or updates it; 10-15 minutes the first time)"):
            stack = ensure_endpoint(target.client("cloudformation"), stack, tag, prefix, progress)
    else:
        with steps.step("endpoint: Qwen3-TTS on AWS's vLLM-Omni image (the stack made it; nothing to build or upload)"):
            if stack.outputs.get("EndpointDeployed") != "true":
                raise DeployError(f"stack {stack.name} (qwen3-tts) reports no endpoint (EndpointDeployed is not true)")
            steps.note(f"endpoint {stack.output('EndpointName')}")
    if settings.validate:
        with steps.step("deploy-validate state machine"):
            run_report(target, stack, "DeployValidateStateMachineArn", "deploy-validate", {}, progress)
    progress(f"speak: POST {stack.output('SpeakFunctionUrl').rstrip('/')}/speak")
    if stack.outputs.get("DashboardUrl"):
        progress(f"dashboard: {stack.outputs['DashboardUrl']}")
    return 0


def validate(settings: Settings, progress: Progress = print, connect: Callable[..., AwsTarget] = connect) -> int:
    target = connect(settings.profile, settings.region)
    stack = require_stack(target, settings.stack_name)
    if stack.outputs.get("EndpointDeployed") != "true":
        raise DeployError(f"stack {stack.name} has no endpoint yet: run `voicestream deploy`")
    run_report(target, stack, "DeployValidateStateMachineArn", "deploy-validate", {}, progress)
    return 0


def benchmark(
    settings: Settings,
    payload: Mapping[str, Any],
    progress: Progress = print,
    connect: Callable[..., AwsTarget] = connect,
) -> int:
    target = connect(settings.profile, settings.region)
    stack = require_stack(target, settings.stack_name)
    if stack.outputs.get("EndpointDeployed") != "true":
        raise DeployError(f"stack {stack.name} has no endpoint yet: run `voicestream deploy`")
    report = run_state_machine(
        target.client("stepfunctions"), stack.output("BenchmarkStateMachineArn"), payload, progress, label="benchmark"
    )
    for line in format_report({key: report[key] for key in ("trials", "ratios", "statistics") if key in report}):
        progress(line)
    progress(f"full report (with every trial) in s3://{stack.output('ResultsBucketName')}/benchmarks/")
    return 0


def destroy(
    settings: Settings,
    progress: Progress = print,
    connect: Callable[..., AwsTarget] = connect,
    confirm: Callable[[str], bool] | None = None,
    assume_yes: bool = False,
) -> int:
    target = connect(settings.profile, settings.region)
    cfn = target.client("cloudformation")
    stack = describe(cfn, settings.stack_name)
    if stack is None:
        progress(f"no stack {settings.stack_name} in {target.describe}: nothing to destroy")
        return 0
    if not assume_yes and not (confirm or _ask)(f"destroy stack {stack.name} in {target.describe}?"):
        raise DeployError("not confirmed: nothing was removed (pass --yes to skip the question)")
    steps = Steps(3, progress)
    with steps.step("teardown state machine: endpoint, model data, results, images"):
        if stack.outputs.get("TeardownStateMachineArn"):
            run_report(target, stack, "TeardownStateMachineArn", "teardown", {}, progress)
        else:
            steps.note("the stack has no teardown state machine (a failed first deploy?): sam delete alone")
    with steps.step("sam delete"):
        run_sam(settings.root, target, ["delete", "--stack-name", stack.name, "--no-prompts"], progress)
    with steps.step("check"):
        left = describe(cfn, stack.name)
        if left is not None and left.status != "DELETE_COMPLETE":
            raise DeployError(f"stack {stack.name} is still there ({left.status})")
        steps.note(f"stack {stack.name} removed")
    return 0


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        raise DeployError(f"{question} needs a yes: pass --yes when not running in a terminal")
    return input(f"{question} [y/N] ").strip().lower() in {"y", "yes"}
