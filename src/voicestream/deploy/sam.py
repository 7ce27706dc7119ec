"""SAM CLI as a program: `sam build`, `sam deploy`, `sam delete` in the checkout's root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from voicestream.deploy.aws import AwsTarget
from voicestream.deploy.errors import DeployError
from voicestream.deploy.progress import Progress

SAM_ENV = "VOICESTREAM_SAM"  # the Makefile points this at .venv-sam/bin/sam


def sam_executable() -> str:
    configured = os.environ.get(SAM_ENV)
    if configured and Path(configured).is_file():
        return configured
    found = shutil.which("sam")
    if found is None:
        raise DeployError(f"SAM CLI not found: run `make venv-sam` (and set {SAM_ENV}), or install aws-sam-cli")
    return found


def run_sam(root: Path, target: AwsTarget, arguments: list[str], progress: Progress) -> None:
    """One SAM command (its output goes straight to the terminal); DeployError when it fails."""
    command = [sam_executable(), *arguments, "--region", target.region]
    if target.profile:
        command += ["--profile", target.profile]
    progress(f"      $ sam {' '.join(arguments)}")
    env = {**os.environ, "SAM_CLI_TELEMETRY": os.environ.get("SAM_CLI_TELEMETRY", "0")}
    result = subprocess.run(command, cwd=root, env=env, check=False)
    if result.returncode != 0:
        raise DeployError(f"`sam {arguments[0]}` failed (exit {result.returncode}); see its output above")
