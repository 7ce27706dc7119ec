"""template.yaml through the real SAM transform (samtranslator in .venv-sam), as CloudFormation gets it.

Shared by the SAM tier (tests/sam) and the IAM audit of the state machine tier. The transform
runs as a program in .venv-sam (`make venv-sam`): SAM CLI's pins fight the main environment's.
`VOICESTREAM_IAM_TEMPLATE` points the IAM audit at another template (e.g. an older one, to show
what it lacks); its directory needs the statemachines/ the template references.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"
SAM_PYTHON = REPO / ".venv-sam" / "bin" / "python"
TRANSFORM_SCRIPT = REPO / "tests" / "sam" / "sam_transform.py"
TEMPLATE_ENV = "VOICESTREAM_IAM_TEMPLATE"


def sam_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(AWS_DEFAULT_REGION="us-east-1", SAM_CLI_TELEMETRY="0")
    return env


def audited_template() -> Path:
    """The template the IAM audit checks: $VOICESTREAM_IAM_TEMPLATE, else the repository's."""
    configured = os.environ.get(TEMPLATE_ENV)
    return Path(configured).resolve() if configured else TEMPLATE


@functools.cache
def _transform(template: str, parameters: tuple[tuple[str, str], ...]) -> str:
    if not SAM_PYTHON.exists():
        pytest.fail(f"SAM CLI environment missing at {SAM_PYTHON.parent.parent}: run `make venv-sam`")
    args = [str(SAM_PYTHON), str(TRANSFORM_SCRIPT), template, *(f"{k}={v}" for k, v in parameters)]
    result = subprocess.run(args, capture_output=True, text=True, env=sam_environment(), timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def transform(template: Path = TEMPLATE, **parameters: str) -> dict[str, Any]:
    """The transformed template as CloudFormation JSON (a fresh copy; the transform is cached)."""
    loaded: dict[str, Any] = json.loads(_transform(str(template), tuple(sorted(parameters.items()))))
    return loaded
