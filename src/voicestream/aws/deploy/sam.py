"""SAM CLI as a program: `sam build`, `sam deploy`, `sam delete` in the checkout's root."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from voicestream import env
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.progress import Progress
from voicestream.aws.deploy.target import AwsTarget


def sam_executable() -> str:
    """The first sam on PATH (the Makefile puts .venv-sam/bin first)."""
    found = shutil.which("sam")
    if found is None:
        raise DeployError("SAM CLI not found on PATH: run `make venv-sam` (and `make deploy`), or install aws-sam-cli")
    return found


def run_sam(root: Path, target: AwsTarget, arguments: list[str], progress: Progress) -> None:
    """One SAM command (its output goes straight to the terminal); DeployError when it fails."""
    command = [sam_executable(), *arguments, "--region", target.region]
    if target.profile:
        command += ["--profile", target.profile]
    progress(f"      $ sam {' '.join(arguments)}")
    result = subprocess.run(
        command,
        cwd=root,
        env=env.child_environment({env.SAM_CLI_TELEMETRY.name: env.SAM_CLI_TELEMETRY.default}),
        check=False,
    )
    if result.returncode != 0:
        raise DeployError(f"`sam {arguments[0]}` failed (exit {result.returncode}); see its output above")
