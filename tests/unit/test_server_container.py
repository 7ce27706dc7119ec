"""The container without Docker: its Dockerfile linted and checked (its `serve` entrypoint is run
with the real model in tests/integration/test_server_entrypoint.py)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from voicestream.aws.deploy.local_image import CPU_BUILD_ARGS

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "container" / "Dockerfile"
SERVE = ROOT / "container" / "serve"


def tool(name: str) -> str:
    """A linter installed with the dev extra (next to this interpreter), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install the project's dev extra"
    return found


# The production Dockerfile, the CPU image's local base, the Lambda emulation image of tests/container.
DOCKERFILES = [DOCKERFILE, ROOT / "container/local/cpu-base.Dockerfile", ROOT / "tests/container/lambda/Dockerfile"]
SCRIPTS = [SERVE, ROOT / "container/local/debian-image", ROOT / "tests/container/lambda/bootstrap"]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_hadolint_passes(path: Path) -> None:
    result = subprocess.run([tool("hadolint"), str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_shellcheck_passes_the_scripts(path: Path) -> None:
    result = subprocess.run([tool("shellcheck"), str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DOCKERFILE))


def instructions(dockerfile: DockerfileParser, name: str) -> list[str]:
    return [item["value"] for item in dockerfile.structure if item["instruction"] == name]


def test_base_image_is_cuda_pytorch_2_10_or_later(dockerfile: DockerfileParser) -> None:
    # BASE_REGISTRY defaults to Docker Hub (CodeBuild may point it at the stack's pull-through cache).
    assert "ARG BASE_REGISTRY=docker.io" in dockerfile.content
    match = re.fullmatch(
        r"\$\{BASE_REGISTRY\}/pytorch/pytorch:(\d+)\.(\d+)\.\d+-cuda[\d.]+-cudnn\d+-runtime", dockerfile.baseimage
    )
    assert match, dockerfile.baseimage
    assert (int(match[1]), int(match[2])) >= (2, 10)


def test_sagemaker_contract(dockerfile: DockerfileParser) -> None:
    assert dockerfile.labels["com.amazonaws.sagemaker.capabilities.bidirectional-streaming"] == "true"
    assert instructions(dockerfile, "EXPOSE") == ["8080"]
    assert dockerfile.envs["VOICESTREAM_PORT"] == "8080"
    assert dockerfile.envs["VOICESTREAM_MODEL_DIR"] == "/opt/ml/model"
    assert dockerfile.envs["VOICESTREAM_BACKEND"] == "torch"
    assert json.loads(instructions(dockerfile, "CMD")[0]) == ["serve"]
    # The legacy builder has no COPY --chmod: the mode is set in a RUN (any builder works).
    assert "container/serve /usr/local/bin/serve" in instructions(dockerfile, "COPY")
    assert any("chmod 0755 /usr/local/bin/serve" in run for run in instructions(dockerfile, "RUN"))


def test_the_server_runs_as_an_unprivileged_user_with_a_cache_of_its_own(dockerfile: DockerfileParser) -> None:
    user, _, group = instructions(dockerfile, "USER")[-1].partition(":")
    assert user.isdigit() and int(user) > 0 and group.isdigit() and int(group) > 0  # numeric: checkable, not root
    cache = dockerfile.envs["XDG_CACHE_HOME"]
    assert any(f"install -d -o {user} -g {group} -m 0700 {cache}" in run for run in instructions(dockerfile, "RUN"))


def test_installs_the_package_with_its_torch_extra_and_the_spacy_shim(dockerfile: DockerfileParser) -> None:
    # Defaults are production's: the GPU engine (torch) and the CPU one; a CPU build overrides them.
    assert dockerfile.args["EXTRAS"] == "torch,engine" and dockerfile.args["BACKEND"] == "torch"
    assert dockerfile.args["LOCK"] == "requirements/image-torch.txt"  # those extras' lock (docs/testing.md)
    assert CPU_BUILD_ARGS["LOCK"] == "requirements/image-engine.txt" and CPU_BUILD_ARGS["EXTRAS"] == "engine"
    dependencies, package = [run for run in instructions(dockerfile, "RUN") if "pip install" in run]
    # pip and setuptools, then the lock, every hash checked and nothing resolved; then the shim (a directory).
    assert "--require-hashes --no-deps -r requirements/build.txt" in dependencies
    assert '--require-hashes --no-deps --no-build-isolation -r "requirements/$(basename "${LOCK}")"' in dependencies
    assert "--no-deps --no-build-isolation ./packaging/en_core_web_sm" in dependencies
    assert "pip install --no-cache-dir --no-deps --no-build-isolation ." in package  # the package apart from them


def test_every_copied_path_exists_and_is_in_the_build_context(dockerfile: DockerfileParser) -> None:
    ignore = (ROOT / "container" / "Dockerfile.dockerignore").read_text().split()
    allowed = {line.removeprefix("!").rstrip("/") for line in ignore if line.startswith("!")}
    for copy in instructions(dockerfile, "COPY"):
        sources = [part for part in copy.split()[:-1] if not part.startswith("--")]
        # ${LOCK}: its default, and the CPU image's value.
        if "${LOCK}" in sources:
            sources += [dockerfile.args["LOCK"], CPU_BUILD_ARGS["LOCK"]]
            sources.remove("${LOCK}")
        for source in sources:
            assert (ROOT / source).exists(), source
            assert any(fnmatch.fnmatch(source.rstrip("/"), pattern) for pattern in allowed), (
                f"{source} is excluded by Dockerfile.dockerignore"
            )
