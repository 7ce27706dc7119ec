"""What template.yaml deploys: least-privilege IAM, the function URL, state machine substitutions.

Two views: the transformed template (exactly what CloudFormation receives after the SAM
transform), and the stack that moto's CloudFormation creates from it, read back through the
IAM, Lambda, S3, ECR and SageMaker APIs with every reference resolved.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from moto import mock_aws

from tests.sam.cfn_rules import failed_assertions
from tests.sam.conftest import REGION, REPO, TEMPLATE, Transform, load_template
from tests.sam.moto_stack import CONTEXT_TOKEN, create_stack
from tests.support.iam.actions import access_level, resource_level
from tests.support.iam.stack import Stack
from voicestream.aws.deploy.bedrock import AGENT_MODELS
from voicestream.env import VARIABLES, Env
from voicestream.kokoro_server.session_metrics import METRIC, NAMESPACE
from voicestream.speak.config import SpeakConfig

ENDPOINT = {"ImageTag": "0123abcd", "ModelDataPrefix": "kokoro-82m/f3ff3571/"}
# moto's enum check rejects ml.g5 instance types (docs/platform-facts.md#sam); the template allows g4dn too.
MOTO_ENDPOINT = {**ENDPOINT, "InstanceType": "ml.g4dn.xlarge"}
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
LWA_LAYER = "arn:${AWS::Partition}:lambda:${AWS::Region}:753240598075:layer:LambdaAdapterLayerX86:28"
# What every state machine role holds for its execution logs and X-Ray traces.
MACHINE_OBSERVABILITY = {
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets",
}  # fmt: skip


def conditions(template: dict[str, Any], parameters: dict[str, str]) -> dict[str, bool]:
    """The template's Conditions evaluated for these parameter values (the rest at their defaults)."""
    values = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()} | parameters
    results: dict[str, bool] = {}

    def value(node: Any) -> Any:
        if isinstance(node, dict) and set(node) == {"Ref"}:
            return values[node["Ref"]]
        return node

    def truth(node: Any) -> bool:
        (function, argument), *_ = node.items()
        if function == "Condition":
            return evaluate(argument)
        if function == "Fn::Equals":
            return bool(value(argument[0]) == value(argument[1]))
        if function == "Fn::Not":
            return not truth(argument[0])
        if function == "Fn::And":
            return all(truth(item) for item in argument)
        if function == "Fn::Or":
            return any(truth(item) for item in argument)
        raise AssertionError(f"condition function {function} not handled")

    def evaluate(name: str) -> bool:
        if name not in results:
            results[name] = truth(template["Conditions"][name])
        return results[name]

    for name in template["Conditions"]:
        evaluate(name)
    return results


def resolve(template: dict[str, Any], node: Any, parameters: dict[str, str]) -> Any:
    """A property value with Ref (to parameters) and Fn::If resolved for these parameters."""
    if isinstance(node, dict) and set(node) == {"Ref"} and node["Ref"] in parameters:
        return parameters[node["Ref"]]
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        name, then, otherwise = node["Fn::If"]
        return resolve(template, then if conditions(template, parameters)[name] else otherwise, parameters)
    if isinstance(node, dict) and set(node) == {"Fn::FindInMap"}:
        region = {"AWS::Region": REGION}
        mapping, first, second = (resolve(template, part, {**parameters, **region}) for part in node["Fn::FindInMap"])
        return template["Mappings"][mapping][first][second]
    return node


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement a role may hold: a conditional one (Fn::If) counts with its condition."""
    properties = template["Resources"][role]["Properties"]
    assert "ManagedPolicyArns" not in properties, f"{role} attaches managed policies"
    return [
        statement
        for policy in properties["Policies"]
        for item in policy["PolicyDocument"]["Statement"]
        for statement in (item["Fn::If"][1:] if "Fn::If" in item else [item])
        if statement != {"Ref": "AWS::NoValue"}
    ]


def plain_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The role's statements that every parameter set has (conditional ones left out)."""
    policies = template["Resources"][role]["Properties"]["Policies"]
    return [item for policy in policies for item in policy["PolicyDocument"]["Statement"] if "Fn::If" not in item]


def actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for statement in statements if "Action" in statement for action in as_list(statement["Action"])}


def statement_for(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [statement for statement in statements if action in as_list(statement["Action"])]


def sub_text(value: Any) -> str:
    """The template string of a Fn::Sub (either form)."""
    sub = value["Fn::Sub"]
    return sub if isinstance(sub, str) else sub[0]


# ------------------------------------------------------------------ IAM
def test_every_role_is_least_privilege(transform: Transform) -> None:
    template = transform(**ENDPOINT)
    roles = [name for name, resource in template["Resources"].items() if resource["Type"] == "AWS::IAM::Role"]
    assert len(roles) >= 7, roles  # four functions, a state machine, the endpoint, the image build
    for role in roles:
        for statement in role_statements(template, role):
            if "Fn::If" in statement:  # a statement only some parameters add: check what it adds
                statement = statement["Fn::If"][1]
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                assert "*" not in action, f"{role}: wildcard action {action}"
            for resource in as_list(statement["Resource"]):
                if resource == "*":
                    # Only what IAM cannot scope to a resource (the action database says), or
                    # what a condition narrows.
                    scoped = [a for a in as_list(statement["Action"]) if resource_level(a)]
                    assert not scoped or "Condition" in statement, f"{role}: {scoped} on * without a condition"
                elif isinstance(resource, dict) and "Fn::Sub" in resource and sub_text(resource).endswith("/*"):
                    # A name pattern is fine inside what the stack owns (its buckets, its cache's
                    # repositories), for reading, or with a condition that narrows it.
                    text = sub_text(resource)
                    owned = text.startswith(("${ModelBucket.Arn}/", "${ResultsBucket.Arn}/")) or text.endswith(
                        ":repository/${PullThroughCachePrefix}/*"
                    )
                    reading = all(access_level(a) in ("Read", "List") for a in as_list(statement["Action"]))
                    assert owned or reading or "Condition" in statement, f"{role}: {text} without a condition"


def test_each_function_has_its_own_role_and_log_group(transform: Transform) -> None:
    template = transform()
    functions = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}
    assert set(functions) == {"SpeakFunction", "ValidateFunction", "BenchmarkFunction", "TeardownFunction"}
    roles = set()
    for name, function in functions.items():
        role = function["Properties"]["Role"]["Fn::GetAtt"][0]
        roles.add(role)
        log_group = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        logs = statement_for(role_statements(template, role), "logs:PutLogEvents")
        assert [s["Resource"] for s in logs] == [{"Fn::GetAtt": [log_group, "Arn"]}], name
    assert len(roles) == len(functions)


def test_speak_may_open_sessions_on_this_endpoint_only(transform: Transform) -> None:
    statements = role_statements(transform(), "SpeakRole")
    assert actions(statements) == {
        "logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords",
        "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithBidirectionalStream",
        "bedrock:InvokeModelWithResponseStream",
    }  # fmt: skip
    (session,) = statement_for(statements, "sagemaker:InvokeEndpoint")
    assert session == statement_for(statements, "sagemaker:InvokeEndpointWithBidirectionalStream")[0]
    assert sub_text(session["Resource"]) == (
        "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:endpoint/${EndpointName}"
    )
    model_statements = statement_for(statements, "bedrock:InvokeModelWithResponseStream")
    direct = [s for s in model_statements if "Condition" not in s]
    assert [sub_text(r) for s in direct for r in s["Resource"]] == [
        "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${AgentModel}",
        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/${AgentModel}",
    ]
    (via_profile,) = [s for s in model_statements if "Condition" in s]
    condition = via_profile["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"]
    assert sub_text(condition).endswith(":inference-profile/${AgentModel}")
    # The model the grants name is the one the function calls: BedrockModelId, or the region's default.
    model = speak_model_expression(transform())
    for sub in [r for s in direct for r in s["Resource"]] + [condition]:
        assert sub["Fn::Sub"][1] == {"AgentModel": model}


def speak_model_expression(template: dict[str, Any]) -> Any:
    return template["Resources"]["SpeakFunction"]["Properties"]["Environment"]["Variables"]["BEDROCK_MODEL_ID"]


def test_the_default_agent_model_follows_the_region(transform: Transform) -> None:
    template = transform()
    assert template["Parameters"]["BedrockModelId"]["Default"] == ""
    assert speak_model_expression(template) == {
        "Fn::If": ["DefaultBedrockModel", {"Fn::FindInMap": ["BedrockAgentModel", {"Ref": "AWS::Region"}, "Id"]},
                   {"Ref": "BedrockModelId"}]
    }  # fmt: skip
    mapping = {region: row["Id"] for region, row in template["Mappings"]["BedrockAgentModel"].items()}
    assert mapping == AGENT_MODELS  # what `voicestream deploy` checks before SAM runs
    for region, model in mapping.items():
        prefix = {"us": "us.", "eu": "eu.", "ap": "apac."}[region.split("-")[0]]
        assert model == prefix + "amazon.nova-lite-v1:0"


def test_task_roles_hold_only_what_their_steps_call(transform: Transform) -> None:
    template = transform(**ENDPOINT)
    base = {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    assert actions(role_statements(template, "ValidateRole")) - base == {
        "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithBidirectionalStream",
        "sagemaker:InvokeEndpointWithResponseStream",
    }  # fmt: skip
    teardown = role_statements(template, "TeardownRole")
    assert actions(teardown) - base == {
        "sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig",
        "sagemaker:DeleteModel", "sagemaker:DescribeEndpointConfig", "sagemaker:DescribeModel",
        "application-autoscaling:DescribeScalableTargets", "application-autoscaling:DescribeScalingPolicies",
        "application-autoscaling:DeleteScalingPolicy", "application-autoscaling:DeregisterScalableTarget",
        "s3:ListBucketVersions", "s3:DeleteObject", "s3:DeleteObjectVersion", "ecr:ListImages", "ecr:BatchDeleteImage",
    }  # fmt: skip
    (own,) = statement_for(teardown, "sagemaker:DeleteModel")
    assert own["Condition"] == {"StringEquals": {"aws:ResourceTag/voicestream:stack": {"Ref": "AWS::StackName"}}}
    (deregister,) = statement_for(teardown, "application-autoscaling:DeregisterScalableTarget")
    assert deregister["Condition"]["StringEquals"] == {
        "application-autoscaling:service-namespace": "sagemaker",
        "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount",
    }
    (images,) = statement_for(teardown, "ecr:BatchDeleteImage")
    assert images["Resource"] == {"Fn::GetAtt": ["Repository", "Arn"]}
    machine = role_statements(template, "TeardownStateMachineRole")
    assert actions(machine) - MACHINE_OBSERVABILITY == {"lambda:InvokeFunction"}
    assert statement_for(machine, "lambda:InvokeFunction") == [
        {"Sid": "Steps", "Effect": "Allow", "Action": "lambda:InvokeFunction",
         "Resource": {"Fn::GetAtt": ["TeardownFunction", "Arn"]}},
    ]  # fmt: skip
    validate = role_statements(template, "DeployValidateStateMachineRole")
    assert actions(validate) - MACHINE_OBSERVABILITY == {"sagemaker:DescribeEndpoint", "lambda:InvokeFunction"}
    assert statement_for(validate, "lambda:InvokeFunction")[0]["Resource"] == {
        "Fn::GetAtt": ["ValidateFunction", "Arn"]
    }
    benchmark = role_statements(template, "BenchmarkStateMachineRole")
    assert actions(benchmark) - MACHINE_OBSERVABILITY == {
        "lambda:InvokeFunction", "s3:PutObject", "cloudwatch:GetMetricData",
    }  # fmt: skip
    assert sub_text(statement_for(benchmark, "s3:PutObject")[0]["Resource"]) == "${ResultsBucket.Arn}/benchmarks/*"
    build = plain_statements(template, "ImageBuildRole")
    push = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
            "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage"}  # fmt: skip
    assert actions(build) == push | {
        "logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketAcl",
        "s3:GetBucketLocation", "ecr:GetAuthorizationToken",
    }  # fmt: skip
    assert statement_for(build, "ecr:PutImage")[0]["Resource"] == {"Fn::GetAtt": ["Repository", "Arn"]}
    assert sub_text(statement_for(build, "s3:GetObject")[0]["Resource"]) == "${ModelBucket.Arn}/build/*"
    benchmark_task = role_statements(template, "BenchmarkRole")
    assert actions(benchmark_task) - base == {
        "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithBidirectionalStream",
        "lambda:InvokeFunctionUrl", "lambda:InvokeFunction",
    }  # fmt: skip
    # The speak URL's callers need both actions since October 2025; InvokeFunction only via the URL.
    (via_url,) = statement_for(benchmark_task, "lambda:InvokeFunction")
    assert via_url["Resource"] == {"Fn::GetAtt": ["SpeakFunction", "Arn"]}
    assert via_url["Condition"] == {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}
    (url,) = statement_for(benchmark_task, "lambda:InvokeFunctionUrl")
    assert url["Resource"] == {"Fn::GetAtt": ["SpeakFunction", "Arn"]}


# ----------------------------------------------------------- speak function
def test_speak_function_streams_through_the_web_adapter(transform: Transform) -> None:
    template = transform()
    speak = template["Resources"]["SpeakFunction"]["Properties"]
    assert speak["Runtime"] == "python3.12"
    assert speak["Handler"] == "run.sh"
    variables = speak["Environment"]["Variables"]
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert variables["PORT"] == "8000"
    assert variables["AWS_LWA_READINESS_CHECK_PATH"].startswith("/")
    layers = speak["Layers"]
    assert {"Ref": next(n for n in template["Resources"] if n.startswith("VoicestreamLayer"))} in layers
    assert [sub_text(layer) for layer in layers if isinstance(layer, dict) and "Fn::Sub" in layer] == [LWA_LAYER]


@pytest.mark.parametrize("auth", ["AWS_IAM", "NONE"])
def test_function_url_streams_with_iam_auth_by_default(transform: Transform, auth: str) -> None:
    template = transform(FunctionUrlAuthType=auth)
    (url,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Url"]
    assert url["Properties"]["InvokeMode"] == "RESPONSE_STREAM"
    assert url["Properties"]["AuthType"] == {"Ref": "FunctionUrlAuthType"}
    assert url["Properties"]["TargetFunctionArn"] == {"Ref": "SpeakFunction"}
    assert template["Parameters"]["FunctionUrlAuthType"]["Default"] == "AWS_IAM"
    # Public access exists only under the condition that the parameter says NONE.
    public = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Permission"}
    assert {n: r.get("Condition") for n, r in public.items()} == {
        "SpeakUrlPublicInvokeUrl": "PublicSpeakUrl",
        "SpeakUrlPublicInvoke": "PublicSpeakUrl",
    }
    assert template["Conditions"]["PublicSpeakUrl"] == {"Fn::Equals": [{"Ref": "FunctionUrlAuthType"}, "NONE"]}


def test_function_url_cors_is_off_unless_origins_are_given(transform: Transform) -> None:
    """No CORS by default: a web page on another origin cannot read (or preflight) the URL."""
    default = transform()
    (url,) = [r for r in default["Resources"].values() if r["Type"] == "AWS::Lambda::Url"]
    cors = url["Properties"]["Cors"]
    assert cors["Fn::If"][0] == "SpeakCorsEnabled" and cors["Fn::If"][2] == {"Ref": "AWS::NoValue"}
    allowed = cors["Fn::If"][1]
    assert allowed["AllowOrigins"] == {"Ref": "SpeakCorsOrigins"} and allowed["AllowMethods"] == ["POST"]
    assert "content-type" in allowed["AllowHeaders"]
    assert default["Parameters"]["SpeakCorsOrigins"]["Default"] == ""
    enabled = default["Conditions"]["SpeakCorsEnabled"]
    assert enabled == {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": "SpeakCorsOrigins"}]}, ""]}]}


def test_speak_environment_configures_the_app(transform: Transform) -> None:
    template = transform()
    variables = template["Resources"]["SpeakFunction"]["Properties"]["Environment"]["Variables"]
    defaults = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
    resolved = {k: resolve(template, v, defaults) for k, v in variables.items()}
    config = SpeakConfig.from_env(Env({**resolved, "AWS_REGION": REGION}))  # Lambda sets AWS_REGION
    assert config.upstream == "kokoro"
    assert config.sagemaker_endpoint == defaults["EndpointName"] and config.kokoro_ws_url is None
    assert config.bedrock is not None and config.bedrock.model_id == AGENT_MODELS[REGION]
    assert (config.service, config.metrics_namespace) == ("speak", "voicestream")  # the alarms' dimensions


def test_endpoint_environment_is_what_the_server_reads(transform: Transform) -> None:
    container = transform(**ENDPOINT)["Resources"]["KokoroModel"]["Properties"]["PrimaryContainer"]
    # Every variable the template sets is one the server reads (voicestream.env declares them all).
    assert set(container["Environment"]) <= set(VARIABLES)
    assert {"VOICESTREAM_BACKEND", "VOICESTREAM_DEVICE", "VOICESTREAM_MODEL_DIR"} <= set(container["Environment"])


# ----------------------------------------------------------- state machines
def state_machines() -> dict[str, dict[str, Any]]:
    resources = load_template()["Resources"]
    return {n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::Serverless::StateMachine"}


def test_every_asl_file_is_deployed() -> None:
    files = {path.name for path in (REPO / "statemachines").glob("*.asl.json")}
    assert files, "no state machines in statemachines/"
    assert {Path(p["DefinitionUri"]).name for p in state_machines().values()} == files


@pytest.mark.parametrize("name", sorted(state_machines()))
def test_every_placeholder_has_a_substitution(name: str, transform: Transform) -> None:
    source = state_machines()[name]
    text = (REPO / source["DefinitionUri"]).read_text()
    placeholders = set(PLACEHOLDER.findall(text))
    substitutions = transform(**ENDPOINT)["Resources"][name]["Properties"]["DefinitionSubstitutions"]
    assert placeholders, f"{name}: nothing to substitute?"
    missing, unused = sorted(placeholders - set(substitutions)), sorted(set(substitutions) - placeholders)
    assert not missing and not unused, f"{name}: missing {missing}, unused {unused}"


# ------------------------------------------------------ storage and endpoint
def test_buckets_are_private_versioned_encrypted_and_tls_only(transform: Transform) -> None:
    resources = transform()["Resources"]
    for bucket in ("ModelBucket", "ResultsBucket"):
        properties = resources[bucket]["Properties"]
        assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
        assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        assert set(properties["PublicAccessBlockConfiguration"].values()) == {True}
        assert len(properties["PublicAccessBlockConfiguration"]) == 4
        policies = [r for r in resources.values() if r["Type"] == "AWS::S3::BucketPolicy"]
        (policy,) = [r for r in policies if r["Properties"]["Bucket"] == {"Ref": bucket}]
        (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert statement["Effect"] == "Deny" and statement["Action"] == "s3:*"
        assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_repository_scans_on_push_and_expires_untagged_images_only(transform: Transform) -> None:
    repository = transform()["Resources"]["Repository"]["Properties"]
    assert repository["ImageScanningConfiguration"] == {"ScanOnPush": True}
    rules = json.loads(repository["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    # A tagged image may be the one the endpoint runs (and pulls again on every scale-out).
    assert [rule["selection"]["tagStatus"] for rule in rules] == ["untagged"]


def test_endpoint_exists_only_with_image_and_model_data(transform: Transform) -> None:
    template = transform()
    endpoint_parts = [
        "KokoroEndpoint", "EndpointScalableTarget", "EndpointScalingPolicy", "EndpointLatencyAlarm",
        "EndpointErrorsAlarm",
    ]  # fmt: skip
    for name in endpoint_parts:
        assert template["Resources"][name]["Condition"] == "EndpointEnabled", name
    for name in ("EndpointExecutionRole", "KokoroModel", "KokoroEndpointConfig"):
        assert template["Resources"][name]["Condition"] == "KokoroEndpointEnabled", name
    kokoro = {"SpeechModel": "kokoro", "ImageTag": "", "ModelDataPrefix": ""}
    assert not conditions(template, kokoro)["EndpointEnabled"]
    assert conditions(template, {**kokoro, **ENDPOINT})["KokoroEndpointEnabled"]
    model = template["Resources"]["KokoroModel"]["Properties"]["PrimaryContainer"]
    assert model["ModelDataSource"]["S3DataSource"] == {
        "S3Uri": {"Fn::Sub": "s3://${ModelBucket}/${ModelDataPrefix}"},
        "S3DataType": "S3Prefix",
        "CompressionType": "None",
    }
    assert model["Image"] == {"Fn::Sub": "${Repository.RepositoryUri}:${ImageTag}"}
    assert model["Environment"]["VOICESTREAM_MODEL_DIR"] == "/opt/ml/model"
    config = template["Resources"]["KokoroEndpointConfig"]["Properties"]["ProductionVariants"][0]
    assert config["InstanceType"] == {"Ref": "InstanceType"}
    assert template["Parameters"]["InstanceType"]["Default"] == "ml.g5.xlarge"
    policy = template["Resources"]["EndpointScalingPolicy"]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert policy["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    )


def test_dashboard_body_is_json_once_substituted(transform: Transform) -> None:
    body = transform()["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][0]
    widgets = json.loads(re.sub(r"\$\{[^}]+\}", "1", body))["widgets"]
    titles = " ".join(widget["properties"]["title"] for widget in widgets)
    for needed in ("Time to first audio", "Speak function", "Endpoint latency", "Endpoint invocations"):
        assert needed in titles


# --------------------------------------------------------- deployed to moto
@pytest.fixture(scope="module")
def moto_stack(transform: Transform) -> Iterator[dict[str, Any]]:
    template = transform(**ENDPOINT)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        cfn = boto3.client("cloudformation", region_name=REGION)
        stack = create_stack(cfn, boto3.client("s3", region_name=REGION), "voicestream", template, MOTO_ENDPOINT)
        assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
        yield {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}


def deployed_policy(role_prefix: str) -> list[dict[str, Any]]:
    iam = boto3.client("iam", region_name=REGION)
    names = [role["RoleName"] for role in iam.list_roles()["Roles"]]
    (role,) = [name for name in names if name.startswith(f"voicestream-{role_prefix}-")]
    statements: list[dict[str, Any]] = []
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        # moto's CloudFormation stores an inline policy as the repr of the dict it was given
        # (a conditional statement that is off, AWS::NoValue, as None).
        found = (ast.literal_eval(document) if isinstance(document, str) else document)["Statement"]
        statements += [statement for statement in found if statement is not None]
    return statements


def test_deployed_policies_name_the_deployed_resources(moto_stack: dict[str, Any]) -> None:
    account = boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
    endpoint_arn = f"arn:aws:sagemaker:{REGION}:{account}:endpoint/{moto_stack['EndpointName']}"
    (session,) = statement_for(deployed_policy("SpeakRole"), "sagemaker:InvokeEndpointWithBidirectionalStream")
    assert session["Resource"] == endpoint_arn
    # moto creates the endpoint (its CloudFormation ignores EndpointName and makes one up).
    assert len(boto3.client("sagemaker", region_name=REGION).list_endpoints()["Endpoints"]) == 1

    bucket_arns = {f"arn:aws:s3:::{moto_stack[key]}" for key in ("ModelBucketName", "ResultsBucketName")}
    (listing,) = statement_for(deployed_policy("TeardownRole"), "s3:ListBucketVersions")
    assert set(listing["Resource"]) == bucket_arns
    (images,) = statement_for(deployed_policy("TeardownRole"), "ecr:BatchDeleteImage")
    ecr = boto3.client("ecr", region_name=REGION)
    repository = ecr.describe_repositories(repositoryNames=[moto_stack["RepositoryName"]])["repositories"][0]
    assert images["Resource"] == repository["repositoryArn"]

    (model_data,) = statement_for(deployed_policy("EndpointExecutionRole"), "s3:GetObject")
    assert model_data["Resource"] == f"arn:aws:s3:::{moto_stack['ModelBucketName']}/{ENDPOINT['ModelDataPrefix']}*"


def test_deployed_functions_are_wired_to_the_deployed_resources(moto_stack: dict[str, Any]) -> None:
    lambda_client = boto3.client("lambda", region_name=REGION)
    speak = lambda_client.get_function_configuration(FunctionName=moto_stack["SpeakFunctionName"])
    assert speak["Environment"]["Variables"]["SAGEMAKER_ENDPOINT_NAME"] == moto_stack["EndpointName"]
    assert speak["Runtime"] == "python3.12"
    s3 = boto3.client("s3", region_name=REGION)
    buckets = {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}
    assert {moto_stack["ModelBucketName"], moto_stack["ResultsBucketName"]} <= buckets
    sfn = boto3.client("stepfunctions", region_name=REGION)
    for key in ("DeployValidateStateMachineArn", "BenchmarkStateMachineArn", "TeardownStateMachineArn"):
        assert sfn.describe_state_machine(stateMachineArn=moto_stack[key])["status"] == "ACTIVE"


def test_deployed_state_machines_call_the_deployed_functions(moto_stack: dict[str, Any]) -> None:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    functions = {
        f["FunctionName"]: f["FunctionArn"]
        for f in boto3.client("lambda", region_name=REGION).list_functions()["Functions"]
    }
    expected = {
        "DeployValidateStateMachineArn": "ValidateFunction",
        "BenchmarkStateMachineArn": "BenchmarkFunction",
        "TeardownStateMachineArn": "TeardownFunction",
    }
    for output, function in expected.items():
        definition = sfn.describe_state_machine(stateMachineArn=moto_stack[output])["definition"]
        assert "${" not in definition and CONTEXT_TOKEN not in definition, output
        targets = set(re.findall(r'"FunctionName": "([^"]+)"', definition))
        (arn,) = [arn for name, arn in functions.items() if f"-{function}-" in name]
        assert targets == {arn}, (output, targets)
    benchmark = json.loads(
        sfn.describe_state_machine(stateMachineArn=moto_stack["BenchmarkStateMachineArn"])["definition"]
    )
    defaults = benchmark["States"][benchmark["StartAt"]]["Parameters"]["defaults"]
    assert defaults["results_bucket"] == moto_stack["ResultsBucketName"]
    assert defaults["endpoint_name"] == moto_stack["EndpointName"]


# ------------------------------------------------ deploy fidelity (issue 13)
GPU_TYPES = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g6.xlarge", "ml.g6.2xlarge", "ml.g4dn.xlarge"]


@pytest.mark.parametrize("instance_type", [*GPU_TYPES, "ml.c7i.xlarge", "ml.c7i.2xlarge"])
def test_gpu_variants_get_a_cuda12_driver_and_ask_for_cuda(transform: Transform, instance_type: str) -> None:
    gpu = instance_type in GPU_TYPES
    template = transform(**ENDPOINT, InstanceType=instance_type, EngineBackend="torch" if gpu else "onnx")
    stack = Stack(TEMPLATE, template, {**ENDPOINT, "InstanceType": instance_type})
    (variant,) = stack.render(template["Resources"]["KokoroEndpointConfig"]["Properties"]["ProductionVariants"])
    environment = stack.render(template["Resources"]["KokoroModel"]["Properties"]["PrimaryContainer"]["Environment"])
    substitutions = stack.render(
        template["Resources"]["DeployValidateStateMachine"]["Properties"]["DefinitionSubstitutions"]
    )
    if gpu:
        # The AMI with the bidirectional-streaming sidecar and driver 580 (CUDA 12.8 and 13 run);
        # the default AMI of ml.g5/g4dn has driver 470 (CUDA 11.4): CUDA 12 torch sees no GPU.
        assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
        assert environment["VOICESTREAM_DEVICE"] == substitutions["ExpectedDevice"] == "cuda"
    else:
        assert "InferenceAmiVersion" not in variant
        assert environment["VOICESTREAM_DEVICE"] == substitutions["ExpectedDevice"] == "cpu"


def test_the_ami_version_is_one_sagemaker_knows() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    shape = model.shape_for("ProductionVariantInferenceAmiVersion")
    assert "al2023-ami-sagemaker-inference-gpu-4-1" in shape.enum


def test_endpoint_updates_keep_the_scaled_instance_count(transform: Transform) -> None:
    endpoint = transform(**ENDPOINT)["Resources"]["KokoroEndpoint"]["Properties"]
    assert endpoint["RetainAllVariantProperties"] is True


def test_speak_replies_are_bounded_in_number_time_and_tokens(transform: Transform) -> None:
    template = transform()
    speak = template["Resources"]["SpeakFunction"]["Properties"]
    # 0, the default, reserves nothing: a reservation fails on accounts under 100 + it unreserved.
    assert speak["ReservedConcurrentExecutions"] == {
        "Fn::If": ["SpeakConcurrencyReserved", {"Ref": "SpeakReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    assert template["Parameters"]["SpeakReservedConcurrency"]["Default"] == 0
    assert not conditions(template, {})["SpeakConcurrencyReserved"]
    assert conditions(template, {"SpeakReservedConcurrency": "32"})["SpeakConcurrencyReserved"]
    variables = speak["Environment"]["Variables"]
    assert variables["SPEAK_MAX_DURATION_S"] == {"Ref": "SpeakMaxReplySeconds"}
    assert variables["BEDROCK_MAX_TOKENS"] == {"Ref": "AgentMaxTokens"}
    parameters = template["Parameters"]
    # A reply always ends before Lambda would cut the stream off.
    assert parameters["SpeakMaxReplySeconds"]["MaxValue"] < speak["Timeout"]
    resolved = {"SPEAK_MAX_DURATION_S": "120", "BEDROCK_MAX_TOKENS": "400", "SAGEMAKER_ENDPOINT_NAME": "e"}
    config = SpeakConfig.from_env(Env({**resolved, "BEDROCK_MODEL_ID": "m", "AWS_REGION": REGION}))
    assert config.max_duration_s == 120 and config.bedrock is not None and config.bedrock.max_tokens == 400


def test_state_machines_log_and_trace_their_executions(transform: Transform) -> None:
    resources = transform()["Resources"]
    machines = {n: r for n, r in resources.items() if r["Type"] == "AWS::StepFunctions::StateMachine"}
    assert len(machines) == 3
    for name, machine in machines.items():
        properties = machine["Properties"]
        assert properties["TracingConfiguration"] == {"Enabled": True}, name
        logging = properties["LoggingConfiguration"]
        assert logging["Level"] == "ALL"
        (destination,) = logging["Destinations"]
        assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"] == {"Fn::GetAtt": ["StateMachineLogs", "Arn"]}


@pytest.mark.parametrize("topic", ["", "arn:aws:sns:us-east-1:123456789012:voicestream-alarms"])
def test_alarms_notify_the_topic_when_one_is_given(transform: Transform, topic: str) -> None:
    template = transform(**ENDPOINT, AlarmTopicArn=topic)
    stack = Stack(TEMPLATE, template, {**ENDPOINT, "AlarmTopicArn": topic})
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) == 7
    for alarm in alarms:
        properties = stack.render(alarm["Properties"])
        expected = [topic] if topic else None
        assert properties.get("AlarmActions") == expected and properties.get("OKActions") == expected


@pytest.mark.parametrize(
    "secret", ["", "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/hub-AbC"]
)
def test_the_image_build_makes_one_amd64_manifest_from_a_cached_base(transform: Transform, secret: str) -> None:
    template = transform(DockerHubCredentialsSecretArn=secret)
    stack = Stack(TEMPLATE, template, {"DockerHubCredentialsSecretArn": secret})
    project = template["Resources"]["ImageBuildProject"]["Properties"]
    buildspec = project["Source"]["BuildSpec"]
    assert "--platform linux/amd64 --provenance=false" in buildspec
    assert "--build-arg BASE_REGISTRY=$BASE_REGISTRY" in buildspec
    variables = {v["Name"]: stack.render(v["Value"]) for v in project["Environment"]["EnvironmentVariables"]}
    cache = template["Resources"].get("DockerHubCache")
    assert cache is not None and cache["Condition"] == "UseDockerHubCache"
    statements = stack.statements("ImageBuildRole")
    if secret:
        assert variables["BASE_REGISTRY"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/voicestream-docker-hub"
        (pull,) = [s for s in statements if s.get("Sid") == "PullBaseImageThroughCache"]
        assert "ecr:BatchImportUpstreamImage" in pull["Action"]
        assert pull["Resource"] == "arn:aws:ecr:us-east-1:123456789012:repository/voicestream-docker-hub/*"
    else:
        assert variables["BASE_REGISTRY"] == "docker.io"
        assert not [s for s in statements if s.get("Sid") == "PullBaseImageThroughCache"]
    dockerfile = (REPO / "container" / "Dockerfile").read_text()
    assert "ARG BASE_REGISTRY=docker.io\nARG BASE_IMAGE=${BASE_REGISTRY}/" in dockerfile
    assert "FROM ${BASE_IMAGE}" in dockerfile


# Parameter sets CloudFormation must refuse before it changes anything, and some it must accept.
RULE_CASES = [
    ({"InstanceType": "ml.g5.xlarge", "EngineBackend": "onnx"}, "GPU instance types run the torch backend"),
    ({"InstanceType": "ml.c7i.xlarge", "EngineBackend": "torch"}, "CPU instance types (ml.c7i) run the onnx"),
    ({"MinInstanceCount": "3", "MaxInstanceCount": "2"}, "MinInstanceCount must not exceed MaxInstanceCount"),
    ({"MinInstanceCount": "10", "MaxInstanceCount": "9"}, "MinInstanceCount must not exceed MaxInstanceCount"),
    ({"MinInstanceCount": "2", "MaxInstanceCount": "1"}, "MinInstanceCount must not exceed MaxInstanceCount"),
    ({}, None),
    ({"InstanceType": "ml.c7i.2xlarge", "EngineBackend": "onnx"}, None),
    ({"MinInstanceCount": "2", "MaxInstanceCount": "2"}, None),
    ({"MinInstanceCount": "10", "MaxInstanceCount": "20"}, None),
    ({"MinInstanceCount": "3", "MaxInstanceCount": "12"}, None),
]


@pytest.mark.parametrize(("parameters", "refusal"), RULE_CASES)
def test_rules_refuse_inconsistent_parameters(
    transform: Transform, parameters: dict[str, str], refusal: str | None
) -> None:
    template = transform(**ENDPOINT)
    failed = failed_assertions(template, {**ENDPOINT, **parameters})
    if refusal is None:
        assert failed == []
    else:
        assert failed and all(refusal in description for description in failed), failed


# ------------------------------------------------ first real deploy (issue 31)
def task_states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Task state of an ASL States map, inside Map and Parallel states too."""
    for name, state in states.items():
        if state["Type"] == "Task":
            yield name, state
        for inner in [state.get("ItemProcessor") or state.get("Iterator"), *state.get("Branches", [])]:
            if inner:
                yield from task_states(inner["States"])


def test_each_function_outlives_the_task_that_waits_for_it(transform: Transform) -> None:
    """A function cut off by its own timeout before its Task's TimeoutSeconds loses its report
    (ValidateFunction had the Globals' 300 s under a 900 s task)."""
    resources = transform()["Resources"]  # the functions' timeouts, Globals applied
    source = load_template()["Resources"]  # the machines' ASL files and substitutions
    checked = []
    for machine in [r for r in source.values() if r["Type"] == "AWS::Serverless::StateMachine"]:
        path = REPO / "statemachines" / Path(machine["Properties"]["DefinitionUri"]).name
        substitutions = machine["Properties"].get("DefinitionSubstitutions", {})
        for name, state in task_states(json.loads(path.read_text())["States"]):
            if state["Resource"] != "arn:aws:states:::lambda:invoke":
                continue
            placeholder = PLACEHOLDER.fullmatch(state["Parameters"]["FunctionName"])
            assert placeholder is not None, name
            logical = substitutions[placeholder.group(1)]["Fn::GetAtt"][0]
            timeout = resources[logical]["Properties"]["Timeout"]
            if "TimeoutSeconds" in state:
                assert timeout >= state["TimeoutSeconds"], f"{path.name} {name}: {logical} times out first"
                checked.append(logical)
    assert {"ValidateFunction", "BenchmarkFunction"} <= set(checked)
    assert resources["ValidateFunction"]["Properties"]["Timeout"] == 900


def test_endpoint_updates_are_blue_green_and_drain_the_old_fleet(transform: Transform) -> None:
    template = transform(**ENDPOINT)
    policy = template["Resources"]["KokoroEndpoint"]["Properties"]["DeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0}
    assert policy["TerminationWaitInSeconds"] == {"Ref": "SessionDrainSeconds"}
    drain = template["Parameters"]["SessionDrainSeconds"]
    assert (drain["MinValue"], drain["MaxValue"]) == (0, 3600)  # the API's range
    # The deployment's own limit must exceed the longest drain plus a new fleet's start.
    startup = max(
        variant["ContainerStartupHealthCheckTimeoutInSeconds"]
        for config in ("KokoroEndpointConfig", "Qwen3TtsEndpointConfig")
        for variant in template["Resources"][config]["Properties"]["ProductionVariants"]
    )
    assert policy["MaximumExecutionTimeoutInSeconds"] > drain["MaxValue"] + startup
    assert policy["MaximumExecutionTimeoutInSeconds"] <= 28800


def test_scaling_and_alarms_use_the_servers_own_session_metric(transform: Transform) -> None:
    template = transform(**ENDPOINT)
    resources = template["Resources"]
    environment = resources["KokoroModel"]["Properties"]["PrimaryContainer"]["Environment"]
    assert environment["VOICESTREAM_METRICS_ENDPOINT"] == {"Ref": "EndpointName"}
    dimension = [{"Name": "EndpointName", "Value": {"Fn::GetAtt": ["KokoroEndpoint", "EndpointName"]}}]
    sessions = resources["EndpointSessionsScalingPolicy"]["Properties"]
    assert sessions["ScalingTargetId"] == {"Ref": "EndpointScalableTarget"}
    tracking = sessions["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["CustomizedMetricSpecification"] == {
        "Namespace": NAMESPACE, "MetricName": METRIC, "Dimensions": dimension, "Statistic": "Average",
    }  # fmt: skip
    # SageMaker's own metric stays: either policy scales out, both must agree to scale in.
    predefined = resources["EndpointScalingPolicy"]["Properties"]["TargetTrackingScalingPolicyConfiguration"]
    assert predefined["TargetValue"] == tracking["TargetValue"] == {"Ref": "TargetConcurrentRequests"}
    full = resources["EndpointSessionsFullAlarm"]["Properties"]
    assert (full["MetricName"], full["Dimensions"], full["Threshold"]) == (
        METRIC, dimension, {"Ref": "MaxSessionsPerInstance"}
    )  # fmt: skip
    missing = resources["EndpointSessionsMetricMissingAlarm"]["Properties"]
    assert (missing["Statistic"], missing["ComparisonOperator"], missing["TreatMissingData"]) == (
        "SampleCount", "LessThanThreshold", "breaching"
    )  # fmt: skip
    for name in ("EndpointSessionsScalingPolicy", "EndpointSessionsFullAlarm", "EndpointSessionsMetricMissingAlarm"):
        assert resources[name]["Condition"] == "KokoroEndpointEnabled"  # vLLM-Omni's DLC does not emit it
    body = json.dumps(resources["Dashboard"]["Properties"]["DashboardBody"])
    assert '[\\"voicestream\\", \\"OpenSessions\\", \\"EndpointName\\", \\"${EndpointName}\\"' in body


def test_the_endpoint_log_group_belongs_to_the_stack(transform: Transform) -> None:
    logs = transform()["Resources"]["EndpointLogs"]
    assert "Condition" not in logs  # made with the first deploy, before SageMaker would create it
    assert logs["Properties"] == {
        "LogGroupName": {"Fn::Sub": "/aws/sagemaker/Endpoints/${EndpointName}"},
        "RetentionInDays": {"Ref": "LogRetentionDays"},
    }


HUB_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/h-A"


@pytest.mark.parametrize(("secret", "pull"), [("", "docker-hub-anonymous"), (HUB_SECRET, "pull-through-cache")])
def test_the_stack_says_how_codebuild_gets_its_base_image(transform: Transform, secret: str, pull: str) -> None:
    template = transform(DockerHubCredentialsSecretArn=secret)
    output = template["Outputs"]["BaseImagePull"]["Value"]
    assert resolve(template, output, {"DockerHubCredentialsSecretArn": secret}) == pull
