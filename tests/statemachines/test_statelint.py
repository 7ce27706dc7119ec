"""Every state machine passes statelint, as written and as CloudFormation renders it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.statemachines.conftest import STATEMACHINES, placeholders, render

FILES = sorted(STATEMACHINES.glob("*.asl.json"))
# Sample values of the shapes CloudFormation substitutes (ARNs, names, URLs).
SAMPLE = {
    "FunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:voicestream-{}",
    "Url": "https://abcdefghij.lambda-url.us-east-1.on.aws/",
}


def _sample(key: str) -> str:
    if key.endswith("FunctionArn"):
        return SAMPLE["FunctionArn"].format(key.removesuffix("FunctionArn").lower())
    if key.endswith("Url"):
        return SAMPLE["Url"]
    return f"voicestream-{key.lower()}"


def _statelint(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statelint", *arguments], capture_output=True, text=True, check=False, timeout=120
    )


def test_the_three_state_machines_exist() -> None:
    assert [f.name for f in FILES] == ["benchmark.asl.json", "deploy_validate.asl.json", "teardown.asl.json"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_statelint_passes_on_the_file(path: Path) -> None:
    result = _statelint(str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_statelint_passes_on_the_rendered_definition(path: Path) -> None:
    name = path.name.removesuffix(".asl.json")
    rendered = render(name, {key: _sample(key) for key in placeholders(name)})
    result = _statelint(rendered)
    assert result.returncode == 0, result.stdout + result.stderr


def test_statelint_catches_a_broken_definition() -> None:
    # The check can fail: a Next that points nowhere is reported.
    broken = '{"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Nowhere"}}}'
    result = _statelint(broken)
    assert result.returncode == 1
    assert "Nowhere" in result.stdout
