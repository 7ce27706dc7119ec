"""The agent's Bedrock model: the template's default per region, and the check that a deploy has one.

`BedrockModelId` empty (the default) means Amazon Nova Lite through the cross-region inference
profile of the stack's region's geography (template.yaml, Mappings BedrockAgentModel; a test
keeps the two equal). In a region outside that list CloudFormation would stop with "Unable to
get mapping", so `voicestream deploy` stops first and says what to set.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from voicestream.aws.deploy.errors import DeployError

PARAMETER = "BedrockModelId"
NOVA_LITE = "amazon.nova-lite-v1:0"
# Source regions of Nova Lite's us./eu./apac. inference profiles (Bedrock user guide, "Supported
# Regions and models for inference profiles"): the conservative intersection.
AGENT_MODELS: dict[str, str] = {
    **{region: f"us.{NOVA_LITE}" for region in ("us-east-1", "us-east-2", "us-west-2")},
    **{region: f"eu.{NOVA_LITE}" for region in ("eu-central-1", "eu-west-1", "eu-west-3")},
    **{
        region: f"apac.{NOVA_LITE}"
        for region in ("ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2")
    },
}


def default_agent_model(region: str) -> str | None:
    """The model id the template picks for `region` when BedrockModelId is empty (None: none)."""
    return AGENT_MODELS.get(region)


def configured_model(root: Path) -> str:
    """BedrockModelId as samconfig.toml's deploy parameter_overrides set it ("" when it does not)."""
    path = root / "samconfig.toml"
    if not path.is_file():
        return ""
    try:
        config = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise DeployError(f"{path} is not valid TOML: {error}") from None
    overrides = config.get("default", {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides", "")
    items = overrides.split() if isinstance(overrides, str) else [str(item) for item in overrides]
    for item in items:
        key, _, value = item.partition("=")
        if key == PARAMETER:
            return value.strip("\"'")
    return ""


def check_agent_model(region: str, root: Path, deployed: Mapping[str, str] | None) -> str:
    """The model id this deploy's speak function will use; a DeployError when there is none."""
    chosen = configured_model(root) or (deployed or {}).get(PARAMETER, "")
    if chosen:
        return chosen
    default = default_agent_model(region)
    if default is None:
        raise DeployError(
            f"the agent's default model (Amazon Nova Lite through a us./eu./apac. inference profile) has no "
            f"profile for region {region}: set {PARAMETER} to a Bedrock model or inference profile id available "
            f'there (samconfig.toml: parameter_overrides = "... {PARAMETER}=<id>"), or deploy to one of '
            f"{', '.join(sorted(AGENT_MODELS))}"
        )
    return default
