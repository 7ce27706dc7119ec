"""template.yaml with SpeechModel=qwen3-tts: Qwen3-TTS on AWS's vLLM-Omni DLC, nothing of ours to
build or upload. The transformed template (what CloudFormation gets), the conditions evaluated,
and the stack moto's CloudFormation creates from it, read back through the service APIs."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.sam.conftest import REGION, Transform
from tests.sam.moto_stack import create_stack
from tests.sam.test_template import conditions, resolve, role_statements, statement_for
from voicestream.env import Env
from voicestream.speak.config import SpeakConfig
from voicestream.speech import VllmOmniSession

QWEN3 = {"SpeechModel": "qwen3-tts"}
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.5"
OWN_IMAGE = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/team/vllm-omni:2026-10"
# The Qwen3-TTS commit the template pins (docs/vllm-omni.md).
QWEN3_REVISION = "0c0e3051f131929182e2c023b9537f8b1c68adfe"
ROOT = Path(__file__).resolve().parents[2]
# moto's enum check rejects ml.g5 and ml.g6 instance types: tests/sam/moto_stack.py gives moto ml.g4dn.xlarge.
MOTO_QWEN3 = QWEN3


def test_the_endpoint_exists_at_once_and_only_the_qwen3_parts_are_on(transform: Transform) -> None:
    template = transform(**QWEN3)
    on = conditions(template, QWEN3)
    assert on["EndpointEnabled"] and on["Qwen3Tts"] and not on["KokoroEndpointEnabled"]
    # With Kokoro's image and model data set too, the Kokoro parts stay off.
    assert not conditions(template, {**QWEN3, "ImageTag": "t", "ModelDataPrefix": "p/"})["KokoroEndpointEnabled"]
    resources = template["Resources"]
    assert {name: resources[name]["Condition"] for name in ("Qwen3TtsModel", "Qwen3TtsEndpointConfig")} == {
        "Qwen3TtsModel": "Qwen3Tts",
        "Qwen3TtsEndpointConfig": "Qwen3Tts",
    }
    endpoint = resources["KokoroEndpoint"]["Properties"]["EndpointConfigName"]
    assert resolve(template, endpoint, QWEN3) == {"Fn::GetAtt": ["Qwen3TtsEndpointConfig", "EndpointConfigName"]}


def test_the_dlc_model_and_its_gpu_variant(transform: Transform) -> None:
    resources = transform(**QWEN3)["Resources"]
    container = resources["Qwen3TtsModel"]["Properties"]["PrimaryContainer"]
    assert container["Environment"] == {
        "SM_VLLM_MODEL": {"Ref": "VllmOmniModelId"},
        # Pinned: the DLC's entrypoint turns SM_VLLM_X into `vllm serve --x` (--revision, --tokenizer-revision).
        "SM_VLLM_REVISION": {"Ref": "VllmOmniModelRevision"},
        "SM_VLLM_TOKENIZER_REVISION": {"Ref": "VllmOmniModelRevision"},
    }
    assert "ModelDataSource" not in container  # the DLC downloads the model from the Hub itself
    assert container["Image"] == {
        "Fn::If": [
            "DefaultVllmOmniImage",
            {"Fn::FindInMap": ["VllmOmniImage", {"Ref": "AWS::Region"}, "Uri"]},
            {"Ref": "VllmOmniImageUri"},
        ]
    }
    (variant,) = resources["Qwen3TtsEndpointConfig"]["Properties"]["ProductionVariants"]
    assert variant["InstanceType"] == {"Ref": "Qwen3InstanceType"}
    # The DLC serves Qwen3-TTS in bfloat16, which the T4 of ml.g4dn does not have.
    offered = transform(**QWEN3)["Parameters"]["Qwen3InstanceType"]["AllowedValues"]
    assert offered and not [kind for kind in offered if kind.startswith("ml.g4dn")]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 1800


def test_parameters_default_to_the_seed_samples_choices(transform: Transform) -> None:
    parameters = transform()["Parameters"]
    assert parameters["SpeechModel"]["Default"] == "kokoro"
    assert parameters["SpeechModel"]["AllowedValues"] == ["kokoro", "qwen3-tts"]
    assert parameters["VllmOmniModelId"]["Default"] == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
    revision = parameters["VllmOmniModelRevision"]
    assert revision["Default"] == QWEN3_REVISION
    revision_pattern = re.compile(revision["AllowedPattern"])
    assert revision_pattern.match(QWEN3_REVISION)
    for moving in ("main", "", "v1.0", QWEN3_REVISION[:12]):  # branches, tags, short ids move or are ambiguous
        assert not revision_pattern.match(moving)
    # The docs name the same commit.
    for doc in ("docs/vllm-omni.md", "docs/deploy.md"):
        assert QWEN3_REVISION in (ROOT / doc).read_text(), doc
    assert parameters["Qwen3InstanceType"]["Default"] == "ml.g6.xlarge"
    pattern = re.compile(parameters["VllmOmniImageUri"]["AllowedPattern"])
    assert pattern.match("") and pattern.match(OWN_IMAGE) and pattern.match(DLC)
    assert not pattern.match("vllm/vllm-omni:latest")  # a Docker Hub image: SageMaker pulls from ECR only


def test_every_mapped_region_names_the_dlc_of_that_region(transform: Transform) -> None:
    mapping = transform()["Mappings"]["VllmOmniImage"]
    assert len(mapping) >= 10 and "us-east-1" in mapping
    for region, entry in mapping.items():
        assert entry == {"Uri": f"763104351884.dkr.ecr.{region}.amazonaws.com/vllm:omni-sagemaker-cuda-v1.5"}


def test_the_speak_function_speaks_vllm_omni_to_the_endpoint(transform: Transform) -> None:
    template = transform(**QWEN3)
    variables = template["Resources"]["SpeakFunction"]["Properties"]["Environment"]["Variables"]
    values = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | QWEN3
    resolved = {name: resolve(template, value, values) for name, value in variables.items()}
    config = SpeakConfig.from_env(Env({**resolved, "AWS_REGION": REGION}))
    assert config.upstream == "vllm-omni" and config.sagemaker_endpoint == values["EndpointName"]
    session = config.session_factory()()
    assert isinstance(session, VllmOmniSession)


def test_the_qwen3_endpoint_has_a_role_of_its_own(transform: Transform) -> None:
    template = transform(**QWEN3)
    resources = template["Resources"]
    assert resources["Qwen3EndpointRole"]["Condition"] == "Qwen3Tts"
    assert resources["EndpointExecutionRole"]["Condition"] == "KokoroEndpointEnabled"  # Kokoro's reads its bucket
    assert resources["Qwen3TtsModel"]["Properties"]["ExecutionRoleArn"] == {"Fn::GetAtt": ["Qwen3EndpointRole", "Arn"]}
    statements = role_statements(template, "Qwen3EndpointRole")
    assert {s["Sid"] for s in statements} == {"EcrLogin", "PullVllmOmniImage", "Logs", "Metrics"}
    assert not [s for s in statements if any(a.startswith("s3:") for a in s["Action"])]  # no model data to read


# ------------------------------------------------------------ deployed to moto
@pytest.fixture(scope="module", params=["dlc", "own-image"])
def qwen3_stack(request: pytest.FixtureRequest, transform: Transform) -> Iterator[tuple[str, dict[str, str]]]:
    parameters = dict(MOTO_QWEN3)
    if request.param == "own-image":
        parameters["VllmOmniImageUri"] = OWN_IMAGE
    template = transform(**parameters)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        cfn = boto3.client("cloudformation", region_name=REGION)
        stack = create_stack(cfn, boto3.client("s3", region_name=REGION), "voicestream", template, parameters)
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        yield request.param, {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}


def _role_policy(prefix: str) -> list[dict[str, Any]]:
    iam = boto3.client("iam", region_name=REGION)
    (role,) = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(f"voicestream-{prefix}-")]
    statements: list[dict[str, Any]] = []
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        found = (ast.literal_eval(document) if isinstance(document, str) else document)["Statement"]
        statements += [statement for statement in found if statement is not None]
    return statements


def test_the_deployed_stack_runs_the_dlc_with_nothing_of_ours(qwen3_stack: tuple[str, dict[str, str]]) -> None:
    kind, outputs = qwen3_stack
    assert outputs["EndpointDeployed"] == "true" and outputs["SpeechModel"] == "qwen3-tts"
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    (model,) = sagemaker.list_models()["Models"]
    container = sagemaker.describe_model(ModelName=model["ModelName"])["PrimaryContainer"]
    image = DLC if kind == "dlc" else OWN_IMAGE
    assert container["Image"] == image
    assert container["Environment"] == {
        "SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
        "SM_VLLM_REVISION": QWEN3_REVISION,
        "SM_VLLM_TOKENIZER_REVISION": QWEN3_REVISION,
    }
    (config,) = sagemaker.list_endpoint_configs()["EndpointConfigs"]
    (variant,) = sagemaker.describe_endpoint_config(EndpointConfigName=config["EndpointConfigName"])[
        "ProductionVariants"
    ]
    assert variant["ModelName"] == model["ModelName"] and variant["InstanceType"] == "ml.g4dn.xlarge"  # moto's stand-in
    assert len(sagemaker.list_endpoints()["Endpoints"]) == 1
    # The pull grant names exactly the image's repository.
    (pull,) = statement_for(_role_policy("Qwen3EndpointRole"), "ecr:BatchGetImage")
    expected = {
        "dlc": f"arn:aws:ecr:{REGION}:763104351884:repository/vllm",
        "own-image": "arn:aws:ecr:eu-west-1:111122223333:repository/team/vllm-omni",
    }
    assert pull["Resource"] == expected[kind]


def test_the_deployed_functions_and_machines_speak_vllm_omni(qwen3_stack: tuple[str, dict[str, str]]) -> None:
    _kind, outputs = qwen3_stack
    speak = boto3.client("lambda", region_name=REGION).get_function_configuration(
        FunctionName=outputs["SpeakFunctionName"]
    )
    assert speak["Environment"]["Variables"]["SPEECH_UPSTREAM"] == "vllm-omni"
    sfn = boto3.client("stepfunctions", region_name=REGION)
    for output in ("DeployValidateStateMachineArn", "BenchmarkStateMachineArn"):
        definition = sfn.describe_state_machine(stateMachineArn=outputs[output])["definition"]
        assert '"speech_model": "qwen3-tts"' in definition, output
