"""Apply the SAM transform to template.yaml offline and print the CloudFormation JSON.

Runs in .venv-sam (samtranslator lives there, beside SAM CLI). cfn-lint >= 1.54 lints SAM
templates without transforming them (docs/platform-facts.md#sam), so CI lints this output instead.

Local paths become what `sam package` would make of them: code URIs become S3 URIs, and each
state machine's DefinitionUri becomes the ASL file's content inlined as Definition, so the
linter checks the real state machine definitions with their substitutions.

Usage: python sam_transform.py TEMPLATE [Name=Value ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from samtranslator.internal.managed_policies import get_bundled_managed_policy_map
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

CODE_URI_KEYS = {"AWS::Serverless::Function": "CodeUri", "AWS::Serverless::LayerVersion": "ContentUri"}


class BundledPolicies:
    """The managed policy map shipped with samtranslator (no IAM call, so no credentials)."""

    def load(self) -> dict[str, str]:
        return get_bundled_managed_policy_map("aws") or {}


def localize(template: dict[str, Any], root: Path) -> dict[str, Any]:
    for name, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        key = CODE_URI_KEYS.get(resource.get("Type", ""))
        if key and isinstance(properties.get(key), str):
            properties[key] = f"s3://packaged-artifacts/{name}.zip"
        if resource.get("Type") == "AWS::Serverless::StateMachine" and "DefinitionUri" in properties:
            path = root / properties.pop("DefinitionUri")
            properties["Definition"] = json.loads(path.read_text(encoding="utf-8"))
    return template


def main(argv: list[str]) -> int:
    # The transform resolves AWS::Region while it builds ARNs; any region does offline.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    path = Path(argv[1])
    parameters = dict(item.split("=", 1) for item in argv[2:])
    template = localize(yaml_parse(path.read_text(encoding="utf-8")), path.parent)
    print(json.dumps(transform(template, parameters, BundledPolicies()), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
