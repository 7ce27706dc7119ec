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
import pytest
from moto import mock_aws

from tests.sam.conftest import REGION, REPO, Transform, load_template
from tests.sam.moto_stack import CONTEXT_TOKEN, create_stack
from voicestream.env import VARIABLES, Env
from voicestream.speak.config import SpeakConfig

ENDPOINT = {"ImageTag": "0123abcd", "ModelDataPrefix": "kokoro-82m/f3ff3571/"}
# moto's enum check rejects ml.g5 instance types (docs/platform-facts.md#sam); the template allows g4dn too.
MOTO_ENDPOINT = {**ENDPOINT, "InstanceType": "ml.g4dn.xlarge"}
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
# Actions that have no resource-level permissions in IAM: "*" is the only possible resource.
NO_RESOURCE_LEVEL = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "ecr:GetAuthorizationToken"}
LWA_LAYER = "arn:${AWS::Partition}:lambda:${AWS::Region}:753240598075:layer:LambdaAdapterLayerX86:26"


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    properties = template["Resources"][role]["Properties"]
    assert "ManagedPolicyArns" not in properties, f"{role} attaches managed policies"
    return [statement for policy in properties["Policies"] for statement in policy["PolicyDocument"]["Statement"]]


def actions(statements: list[dict[str, Any]]) -> set[str]:
    return {action for statement in statements for action in as_list(statement["Action"])}


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
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                assert "*" not in action, f"{role}: wildcard action {action}"
            for resource in as_list(statement["Resource"]):
                if resource == "*":
                    allowed = set(as_list(statement["Action"])) <= NO_RESOURCE_LEVEL or (
                        statement["Action"] == "cloudwatch:PutMetricData" and "Condition" in statement
                    )
                    assert allowed, f"{role}: {statement['Action']} on *"
                elif isinstance(resource, dict) and "Fn::Sub" in resource and sub_text(resource).endswith("/*"):
                    # A name pattern is fine inside an owned bucket, or with a condition that narrows it.
                    text = sub_text(resource)
                    owned = text.startswith(("${ModelBucket.Arn}/", "${ResultsBucket.Arn}/"))
                    assert owned or "Condition" in statement, f"{role}: {text} without a condition"


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
        "sagemaker:InvokeEndpointWithBidirectionalStream", "sagemaker:InvokeEndpointWithResponseStream",
        "bedrock:InvokeModelWithResponseStream",
    }  # fmt: skip
    (session,) = statement_for(statements, "sagemaker:InvokeEndpointWithBidirectionalStream")
    assert sub_text(session["Resource"]) == (
        "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:endpoint/${EndpointName}"
    )
    model_statements = statement_for(statements, "bedrock:InvokeModelWithResponseStream")
    direct = [s for s in model_statements if "Condition" not in s]
    assert [sub_text(r) for s in direct for r in s["Resource"]] == [
        "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${BedrockModelId}",
        "arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/${BedrockModelId}",
    ]
    (via_profile,) = [s for s in model_statements if "Condition" in s]
    condition = via_profile["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"]
    assert sub_text(condition).endswith(":inference-profile/${BedrockModelId}")


def test_task_roles_hold_only_what_their_steps_call(transform: Transform) -> None:
    template = transform(**ENDPOINT)
    base = {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    assert actions(role_statements(template, "ValidateRole")) - base == {
        "sagemaker:InvokeEndpointWithBidirectionalStream", "sagemaker:InvokeEndpointWithResponseStream",
    }  # fmt: skip
    teardown = role_statements(template, "TeardownRole")
    assert actions(teardown) - base == {
        "sagemaker:DescribeEndpoint", "sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig",
        "sagemaker:DeleteModel", "s3:ListBucket", "s3:ListBucketVersions", "s3:DeleteObject",
        "s3:DeleteObjectVersion", "ecr:ListImages", "ecr:DescribeImages", "ecr:BatchDeleteImage",
    }  # fmt: skip
    (own,) = statement_for(teardown, "sagemaker:DeleteModel")
    assert own["Condition"] == {"StringEquals": {"aws:ResourceTag/voicestream:stack": {"Ref": "AWS::StackName"}}}
    (images,) = statement_for(teardown, "ecr:BatchDeleteImage")
    assert images["Resource"] == {"Fn::GetAtt": ["Repository", "Arn"]}
    machine = role_statements(template, "TeardownStateMachineRole")
    assert machine == [
        {"Sid": "Steps", "Effect": "Allow", "Action": "lambda:InvokeFunction",
         "Resource": {"Fn::GetAtt": ["TeardownFunction", "Arn"]}},
    ]  # fmt: skip
    validate = role_statements(template, "DeployValidateStateMachineRole")
    assert actions(validate) == {"sagemaker:DescribeEndpoint", "lambda:InvokeFunction"}
    assert statement_for(validate, "lambda:InvokeFunction")[0]["Resource"] == {
        "Fn::GetAtt": ["ValidateFunction", "Arn"]
    }
    benchmark = role_statements(template, "BenchmarkStateMachineRole")
    assert actions(benchmark) == {"lambda:InvokeFunction", "s3:PutObject"}
    assert sub_text(statement_for(benchmark, "s3:PutObject")[0]["Resource"]) == "${ResultsBucket.Arn}/benchmarks/*"
    build = role_statements(template, "ImageBuildRole")
    push = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
            "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload", "ecr:PutImage"}  # fmt: skip
    assert actions(build) == push | {
        "logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject", "s3:GetObjectVersion", "s3:GetBucketAcl",
        "s3:GetBucketLocation", "ecr:GetAuthorizationToken",
    }  # fmt: skip
    assert statement_for(build, "ecr:PutImage")[0]["Resource"] == {"Fn::GetAtt": ["Repository", "Arn"]}
    assert sub_text(statement_for(build, "s3:GetObject")[0]["Resource"]) == "${ModelBucket.Arn}/build/*"
    assert actions(role_statements(template, "BenchmarkRole")) - base == {
        "sagemaker:InvokeEndpointWithBidirectionalStream", "sagemaker:InvokeEndpointWithResponseStream",
        "lambda:InvokeFunctionUrl",
    }  # fmt: skip


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
    resolved = {k: defaults[v["Ref"]] if isinstance(v, dict) else v for k, v in variables.items()}
    config = SpeakConfig.from_env(Env({**resolved, "AWS_REGION": REGION}))  # Lambda sets AWS_REGION
    assert config.sagemaker_endpoint == defaults["EndpointName"] and config.kokoro_ws_url is None
    assert config.bedrock is not None and config.bedrock.model_id == defaults["BedrockModelId"]
    assert (config.service, config.metrics_namespace) == ("speak", "voicestream")  # the alarms' dimensions


def test_endpoint_environment_is_what_the_server_reads(transform: Transform) -> None:
    container = transform(**ENDPOINT)["Resources"]["KokoroModel"]["Properties"]["PrimaryContainer"]
    # Every variable the template sets is one the server reads (voicestream.env declares them all).
    assert set(container["Environment"]) <= set(VARIABLES)
    assert {"VOICESTREAM_BACKEND", "VOICESTREAM_MODEL_DIR"} <= set(container["Environment"])


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


def test_repository_scans_on_push_and_expires_images(transform: Transform) -> None:
    repository = transform()["Resources"]["Repository"]["Properties"]
    assert repository["ImageScanningConfiguration"] == {"ScanOnPush": True}
    rules = json.loads(repository["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert {rule["selection"]["tagStatus"] for rule in rules} == {"untagged", "any"}


def test_endpoint_exists_only_with_image_and_model_data(transform: Transform) -> None:
    template = transform()
    endpoint_parts = [
        "EndpointExecutionRole", "KokoroModel", "KokoroEndpointConfig", "KokoroEndpoint",
        "EndpointScalableTarget", "EndpointScalingPolicy", "EndpointLatencyAlarm", "EndpointErrorsAlarm",
    ]  # fmt: skip
    for name in endpoint_parts:
        assert template["Resources"][name]["Condition"] == "EndpointEnabled", name
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
        # moto's CloudFormation stores an inline policy as the repr of the dict it was given.
        statements += (ast.literal_eval(document) if isinstance(document, str) else document)["Statement"]
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
