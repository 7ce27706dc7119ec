"""The server image: built from container/Dockerfile, pushed to the stack's ECR repository.

The tag is a hash of the build context (exactly the files container/Dockerfile.dockerignore
lets in, and the Dockerfile), so an unchanged context is never rebuilt and a tag never names
other bytes (the repository's tags are immutable). Local Docker with buildx builds when it is
there; otherwise the stack's CodeBuild project builds the same context, uploaded to the model
bucket. Both run the same `docker buildx build` (`buildx_command`): for linux/amd64 whatever
the builder's machine is (an arm64 laptop included), and without provenance attestations,
which would turn the pushed image into a manifest list.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import io
import json
import shutil
import subprocess
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from voicestream.aws.clients import error_code, error_message
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.progress import Progress

DOCKERFILE = "container/Dockerfile"
DOCKERIGNORE = "container/Dockerfile.dockerignore"
CONTEXT_KEY = "build/context.zip"  # where the CodeBuild project reads its source (template.yaml)
TAG_PREFIX = "ctx-"
# SageMaker runs x86_64 and takes one image manifest. BuildKit by default attaches a provenance
# attestation, which turns the pushed tag into an image index: hence both flags, here and in
# the CodeBuild buildspec (template.yaml).
PLATFORM = "linux/amd64"
SINGLE_IMAGE_MANIFESTS = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
MANIFEST_LISTS = (
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
)


@dataclass(frozen=True)
class BuildContext:
    root: Path
    files: list[str]  # paths relative to root, "/"-separated, sorted

    @property
    def tag(self) -> str:
        """Content address of the context: names and bytes of every file."""
        digest = hashlib.sha256()
        for name in self.files:
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256((self.root / name).read_bytes()).digest())
        return TAG_PREFIX + digest.hexdigest()[:20]

    def zip_bytes(self) -> bytes:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in self.files:
                # Fixed timestamps and modes: the same context gives the same archive.
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = ((self.root / name).stat().st_mode & 0o777 | 0o100000) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, (self.root / name).read_bytes())
        return buffer.getvalue()


def build_context(root: Path) -> BuildContext:
    """The files Docker would send: the dockerignore's `!` allow-list minus its exclusions."""
    ignore = root / DOCKERIGNORE
    if not ignore.is_file() or not (root / DOCKERFILE).is_file():
        raise DeployError(f"{root / DOCKERFILE} (and its .dockerignore) not found: run from the voicestream checkout")
    includes: list[str] = []
    excludes: list[str] = []
    for raw in ignore.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "*":
            continue
        (includes if line.startswith("!") else excludes).append(line.lstrip("!").strip("/"))
    files = {DOCKERFILE}
    for include in includes:
        path = root / include
        candidates = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        files.update(p.relative_to(root).as_posix() for p in candidates)
    return BuildContext(root=root, files=sorted(f for f in files if not _excluded(f, excludes)))


def _excluded(name: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if fnmatch.fnmatch(name, pattern) or name.startswith(pattern + "/"):
            return True
        if any(fnmatch.fnmatch(part, bare) for part in name.split("/")):
            return True
    return False


def image_exists(ecr: Any, repository: str, tag: str) -> bool:
    try:
        ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])
    except ClientError as error:
        if error_code(error) == "ImageNotFoundException":
            return False
        raise DeployError(f"cannot read ECR repository {repository}: {error_message(error)}") from None
    return True


def check_image_manifest(ecr: Any, repository: str, tag: str) -> str:
    """The media type of the tag's manifest; DeployError when it is a list/index (SageMaker
    rejects those: a multi-platform build, or BuildKit's provenance attestation)."""
    try:
        (image,) = ecr.batch_get_image(
            repositoryName=repository,
            imageIds=[{"imageTag": tag}],
            acceptedMediaTypes=[*SINGLE_IMAGE_MANIFESTS, *MANIFEST_LISTS],
        )["images"]
    except (ClientError, ValueError) as error:
        detail = error_message(error) if isinstance(error, ClientError) else "no such image"
        raise DeployError(f"cannot read the manifest of {repository}:{tag}: {detail}") from None
    manifest = json.loads(image["imageManifest"])
    media_type = str(image.get("imageManifestMediaType") or manifest.get("mediaType") or "")
    if media_type in MANIFEST_LISTS or "manifests" in manifest:
        raise DeployError(
            f"{repository}:{tag} is an image index ({media_type}), which SageMaker does not run: rebuild "
            f"with `--platform {PLATFORM} --provenance=false` under a new tag (tags are immutable)"
        )
    return media_type


def buildx_command(image: str, base_registry: str | None = None) -> list[str]:
    """The production build, run from the repository root; pushes `image` when it is built.
    `base_registry` replaces Docker Hub for the base image (CodeBuild: the ECR pull-through cache)."""
    base = ["--build-arg", f"BASE_REGISTRY={base_registry}"] if base_registry else []
    return [
        "docker", "buildx", "build", "--platform", PLATFORM, "--provenance=false", *base,
        "--file", DOCKERFILE, "--tag", image, "--push", ".",
    ]  # fmt: skip


def docker_available(which: Callable[[str], str | None] = shutil.which) -> bool:
    """A Docker engine answers and the CLI has buildx (Debian's docker.io 20.10, for one, has not)."""
    docker = which("docker")
    if docker is None:
        return False
    for probe in ([docker, "info"], [docker, "buildx", "version"]):
        if subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode != 0:
            return False
    return True


def build_with_docker(ecr: Any, context: BuildContext, repository_uri: str, tag: str, progress: Progress) -> None:
    """docker buildx build --push, logged in to ECR with a token from the API (no AWS CLI needed)."""
    token = ecr.get_authorization_token()["authorizationData"][0]
    user, password = base64.b64decode(token["authorizationToken"]).decode().split(":", 1)
    registry = repository_uri.split("/", 1)[0]
    commands = [
        (["docker", "login", "--username", user, "--password-stdin", registry], password),
        (buildx_command(f"{repository_uri}:{tag}"), None),
    ]
    for command, stdin in commands:
        name = " ".join(command[: 3 if command[1] == "buildx" else 2])
        progress(f"      {name} ...")
        try:
            result = subprocess.run(command, cwd=context.root, input=stdin, text=True, check=False)
        except FileNotFoundError:
            raise DeployError("docker is not installed: install Docker, or deploy with --builder codebuild") from None
        if result.returncode != 0:
            raise DeployError(f"`{name}` failed (exit {result.returncode}); see its output above")


def build_with_codebuild(
    codebuild: Any,
    s3: Any,
    *,
    project: str,
    bucket: str,
    context: BuildContext,
    tag: str,
    progress: Progress,
    poll_s: float = 15.0,
    timeout_s: float = 3600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Upload the context, build exactly that object version in CodeBuild, wait; the build id."""
    try:
        put = s3.put_object(Bucket=bucket, Key=CONTEXT_KEY, Body=context.zip_bytes(), ChecksumAlgorithm="SHA256")
        build = codebuild.start_build(
            projectName=project,
            sourceVersion=put.get("VersionId") or None,
            environmentVariablesOverride=[{"name": "IMAGE_TAG", "value": tag, "type": "PLAINTEXT"}],
        )["build"]
    except ClientError as error:
        raise DeployError(f"cannot start the image build in CodeBuild ({project}): {error_message(error)}") from None
    build_id = str(build["id"])
    progress(f"      CodeBuild {build_id}")
    phase = ""
    deadline = time.monotonic() + timeout_s
    while True:
        (build,) = codebuild.batch_get_builds(ids=[build_id])["builds"]
        if build.get("currentPhase") != phase:
            phase = str(build.get("currentPhase"))
            progress(f"      phase {phase}")
        status = build.get("buildStatus")
        if status == "SUCCEEDED":
            return build_id
        if status not in (None, "IN_PROGRESS"):
            failed = [
                f"{p['phaseType']}: {'; '.join(c.get('message', '') for c in p.get('contexts', []))}"
                for p in build.get("phases", [])
                if p.get("phaseStatus") not in (None, "SUCCEEDED")
            ]
            raise DeployError(f"image build {build_id} {status}: {' | '.join(failed) or 'see its CodeBuild logs'}")
        if time.monotonic() > deadline:
            raise DeployError(f"image build {build_id} still running after {timeout_s:.0f} s")
        sleep(poll_s)
