"""CloudFormation YAML (template.yaml as written, before the SAM transform) as plain data.

The short tags (!Ref, !Sub, !GetAtt ...) become their long forms ({"Ref": ...}, {"Fn::Sub": ...}).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags read as their long forms."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if name == "Fn::GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


CfnLoader.add_multi_constructor("!", _construct_tag)


def load_cfn_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=CfnLoader)  # a SafeLoader subclass
    return loaded
