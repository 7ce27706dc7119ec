"""Static checks of template.yaml: `sam validate --lint`, and cfn-lint on the transformed template.

cfn-lint >= 1.54 no longer applies the SAM transform itself (docs/platform-facts.md#sam), so the template is
transformed first (samtranslator, as CloudFormation would) and the result is linted. The last
test proves that this pipeline catches what the plain lint let through.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.sam.conftest import REPO, SAM, TEMPLATE, VENV_SAM, Transform, load_template

CFN_LINT = VENV_SAM / "bin" / "cfn-lint"
# Parameter sets that switch every condition: first deploy (no endpoint), endpoint on, public URL,
# the Qwen3-TTS endpoint (AWS's image, or one of your own).
PARAMETER_SETS = {
    "base": {},
    "endpoint": {"ImageTag": "0123abcd", "ModelDataPrefix": "kokoro-82m/f3ff3571/"},
    "public-url": {"FunctionUrlAuthType": "NONE", "ImageTag": "0123abcd", "ModelDataPrefix": "m/"},
    "qwen3-tts": {"SpeechModel": "qwen3-tts"},
    "qwen3-tts-own-image": {
        "SpeechModel": "qwen3-tts",
        "VllmOmniImageUri": "111122223333.dkr.ecr.eu-west-1.amazonaws.com/team/vllm-omni:2026-10",
        "Qwen3InstanceType": "ml.g6e.xlarge",
    },
}


def cfn_lint(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CFN_LINT), str(path)], capture_output=True, text=True, env=env, timeout=300, check=False)


def test_sam_validate_lint_passes(sam_env: dict[str, str]) -> None:
    result = subprocess.run(
        [str(SAM), "validate", "--lint", "--template-file", str(TEMPLATE)],
        cwd=REPO, capture_output=True, text=True, env=sam_env, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is a valid SAM Template" in result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(PARAMETER_SETS))
def test_transformed_template_passes_cfn_lint(
    name: str, transform: Transform, sam_env: dict[str, str], tmp_path: Path
) -> None:
    output = tmp_path / f"{name}.json"
    output.write_text(json.dumps(transform(**PARAMETER_SETS[name])))
    result = cfn_lint(output, sam_env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_transform_then_lint_catches_what_the_plain_lint_misses(
    transform: Transform, sam_env: dict[str, str], tmp_path: Path
) -> None:
    broken = tmp_path / "template.yaml"
    broken.write_text(TEMPLATE.read_text().replace("Runtime: python3.12", "Runtime: python3.99", 1))
    for directory in ("functions", "statemachines", "layers"):
        (tmp_path / directory).symlink_to(REPO / directory)
    output = tmp_path / "transformed.json"
    output.write_text(json.dumps(transform(broken)))
    result = cfn_lint(output, sam_env)
    assert result.returncode != 0
    assert "python3.99" in result.stdout


def test_every_accepted_checkov_finding_says_why() -> None:
    """checkov runs in `make lint`; what it may not report is skipped at the resource, with a reason."""
    skips = [
        (name, skip)
        for name, resource in load_template()["Resources"].items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]
    assert len(skips) >= 20, skips
    for name, skip in skips:
        assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), (name, skip)
        assert len(skip.get("comment", "").split()) >= 6, f"{name}: {skip['id']} needs a one-line reason"
