"""teardown.asl.json in moto's interpreter, with our teardown handler as its Lambda task."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from tests.statemachines.conftest import REGION, ROLE_ARN, Executions, LambdaRouter, load_handler_module
from tests.support.iam.audit import IamAudit

KEYS = 1500
# The stack the IAM audit renders is named "voicestream" (tests/support/iam/stack.py).
STACK_TAGS = [{"Key": "voicestream:stack", "Value": "voicestream"}]
SCALING = {
    "ServiceNamespace": "sagemaker",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}


@dataclass
class Deployment:
    substitutions: dict[str, str]
    model_bucket: str = "voicestream-models-test"
    results_bucket: str = "voicestream-results-test"
    repository: str = "voicestream-kokoro"
    endpoint: str = "voicestream-kokoro"
    endpoint_config: str = "voicestream-kokoro-config"
    model: str = "voicestream-kokoro-model"


def _versioned_bucket(s3: Any, bucket: str, keys: int) -> int:
    """`keys` objects, each with 2-3 versions, a third of them behind a delete marker."""
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    names = [f"voices/{i:05d}.bin" for i in range(keys)]
    for i, key in enumerate(names):
        for version in range(3 if i % 2 else 2):
            s3.put_object(Bucket=bucket, Key=key, Body=f"{key} v{version}".encode())
    hidden = names[::3]
    for start in range(0, len(hidden), 1000):
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in hidden[start : start + 1000]]})
    return len(names)


def _count_versions(s3: Any, bucket: str) -> int:
    total = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        total += len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))
    return total


def _image(ecr: Any, repository: str, index: int, tag: str | None) -> None:
    layer = hashlib.sha256(f"layer {index}".encode()).hexdigest()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 7,
            "digest": f"sha256:{layer}",
        },
        "layers": [
            {"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 9, "digest": f"sha256:{layer}"}
        ],
    }
    kwargs: dict[str, Any] = {"repositoryName": repository, "imageManifest": json.dumps(manifest)}
    if tag:
        kwargs["imageTag"] = tag
    ecr.put_image(**kwargs)


def _deploy(lambdas: LambdaRouter, keys: int) -> Deployment:
    """What `sam deploy` leaves behind, plus a teardown state machine's substitutions."""
    d = Deployment(substitutions={})
    s3 = boto3.client("s3", region_name=REGION)
    _versioned_bucket(s3, d.model_bucket, keys)
    _versioned_bucket(s3, d.results_bucket, 40)

    ecr = boto3.client("ecr", region_name=REGION)
    ecr.create_repository(repositoryName=d.repository)
    for i in range(130):  # more than one BatchDeleteImage call (100 ids), tagged and untagged
        _image(ecr, d.repository, i, tag=f"v{i}" if i % 4 else None)

    sagemaker = boto3.client("sagemaker", region_name=REGION)
    # Tagged as the template tags them: the teardown role may delete only its own stack's parts.
    sagemaker.create_model(
        ModelName=d.model,
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": f"123456789012.dkr.ecr.{REGION}.amazonaws.com/{d.repository}:v1"},
        Tags=STACK_TAGS,
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=d.endpoint_config,
        # moto's enum check rejects ml.g5 instance types (docs/platform-facts.md#sam); the type does not matter here.
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": d.model,
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
        Tags=STACK_TAGS,
    )
    sagemaker.create_endpoint(EndpointName=d.endpoint, EndpointConfigName=d.endpoint_config, Tags=STACK_TAGS)

    module = load_handler_module("teardown")
    d.substitutions = {
        "EndpointName": d.endpoint,
        "EndpointConfigName": d.endpoint_config,
        "ModelName": d.model,
        "ModelBucket": d.model_bucket,
        "ResultsBucket": d.results_bucket,
        "EcrRepositoryName": d.repository,
        "TeardownFunctionArn": lambdas.add("voicestream-teardown", module.handler),
    }
    return d


@pytest.fixture
def deployment(lambdas: LambdaRouter) -> Deployment:
    return _deploy(lambdas, keys=60)


@pytest.fixture
def large_deployment(lambdas: LambdaRouter) -> Deployment:
    return _deploy(lambdas, keys=KEYS)


FAST = {"poll_seconds": 0, "max_polls": 5, "max_batches": 2}


def test_teardown_removes_everything_and_a_second_run_reports_it_gone(
    large_deployment: Deployment, executions: Executions, lambdas: LambdaRouter
) -> None:
    deployment = large_deployment
    s3 = boto3.client("s3", region_name=REGION)
    model_versions = _count_versions(s3, deployment.model_bucket)
    results_versions = _count_versions(s3, deployment.results_bucket)
    assert model_versions > 3 * 1000  # several listing pages: pagination is exercised
    machine = executions.create("teardown", deployment.substitutions)

    first = executions.run(machine, FAST)

    assert first.status == "SUCCEEDED", first.describe()
    report = first.output
    assert report["scaling"] == {"scalable_targets": 0, "scaling_policies": 0}
    assert report["endpoint"] == {"status": "deleted"}
    assert report["endpoint_config"] == {"status": "deleted"}
    assert report["model"] == {"status": "deleted"}
    model_report, results_report = report["buckets"]
    assert model_report["bucket"] == deployment.model_bucket
    assert model_report["deleted_versions"] + model_report["deleted_markers"] == model_versions
    assert model_report["deleted_markers"] == len(range(0, KEYS, 3))
    # max_batches=2 per call, 1000 per batch: the state machine looped over the Lambda.
    assert model_report["calls"] >= model_versions // 2000
    assert results_report["deleted_versions"] + results_report["deleted_markers"] == results_versions
    assert report["images"] == {"repository": deployment.repository, "already_gone": False, "deleted_images": 130}

    assert _count_versions(s3, deployment.model_bucket) == 0
    assert _count_versions(s3, deployment.results_bucket) == 0
    assert boto3.client("ecr", region_name=REGION).list_images(repositoryName=deployment.repository)["imageIds"] == []
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_endpoints()["Endpoints"] == []
    assert sagemaker.list_endpoint_configs()["EndpointConfigs"] == []
    assert sagemaker.list_models()["Models"] == []

    second = executions.run(machine, FAST)

    assert second.status == "SUCCEEDED", second.describe()
    again = second.output
    assert again["endpoint"] == {"status": "already_gone"}
    assert again["endpoint_config"] == {"status": "already_gone"}
    assert again["model"] == {"status": "already_gone"}
    assert [b["deleted_versions"] + b["deleted_markers"] for b in again["buckets"]] == [0, 0]
    assert again["images"]["deleted_images"] == 0


def test_teardown_of_a_half_deleted_deployment(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter
) -> None:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker.delete_endpoint(EndpointName=deployment.endpoint)
    sagemaker.delete_endpoint_config(EndpointConfigName=deployment.endpoint_config)
    boto3.client("ecr", region_name=REGION).delete_repository(repositoryName=deployment.repository, force=True)
    s3 = boto3.client("s3", region_name=REGION)
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=deployment.results_bucket):
        for item in page.get("Versions", []) + page.get("DeleteMarkers", []):
            s3.delete_object(Bucket=deployment.results_bucket, Key=item["Key"], VersionId=item["VersionId"])
    s3.delete_bucket(Bucket=deployment.results_bucket)
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, {**FAST, "max_batches": 0})

    assert result.status == "SUCCEEDED", result.describe()
    report = result.output
    assert report["endpoint"] == {"status": "already_gone"}
    assert report["endpoint_config"] == {"status": "already_gone"}
    assert report["model"] == {"status": "deleted"}
    assert report["buckets"][1]["already_gone"] is True
    assert report["images"] == {"repository": deployment.repository, "already_gone": True, "deleted_images": 0}
    assert _count_versions(s3, deployment.model_bucket) == 0


def test_throttled_lambda_is_retried_with_backoff(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter
) -> None:
    lambdas.throttle("voicestream-teardown", times=1)
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", result.describe()
    failures = [e for e in result.history if e["type"] == "TaskFailed"]
    assert len(failures) == 1
    assert failures[0]["taskFailedEventDetails"]["error"] == "Lambda.TooManyRequestsException"
    assert result.output["endpoint"] == {"status": "deleted"}


def test_a_failing_step_fails_the_execution_with_a_readable_cause(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter
) -> None:
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, {**FAST, "repository": ""})

    assert result.status == "FAILED"
    assert result.error == "TeardownError"
    assert result.cause is not None
    assert "teardown stopped (TeardownError)" in result.cause
    assert "needs a non-empty string 'repository'" in result.cause


def _calls(audit: IamAudit, operation: str) -> list[int]:
    """Positions of the teardown function's calls of `operation`, in the order they were made."""
    return [
        i for i, call in enumerate(audit.calls) if call.principal == "function:teardown" and call.operation == operation
    ]


def test_teardown_of_an_auto_scaled_endpoint_deregisters_its_scaling_first(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter, iam_audit: IamAudit
) -> None:
    autoscaling = boto3.client("application-autoscaling", region_name=REGION)
    variant = f"endpoint/{deployment.endpoint}/variant/AllTraffic"
    autoscaling.register_scalable_target(ResourceId=variant, MinCapacity=1, MaxCapacity=2, **SCALING)
    autoscaling.put_scaling_policy(
        PolicyName="voicestream-kokoro-concurrent-requests",
        ResourceId=variant,
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 4.0,
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
        **SCALING,
    )
    # Another endpoint's scaling is not ours to touch.
    other = "endpoint/someone-elses/variant/AllTraffic"
    autoscaling.register_scalable_target(ResourceId=other, MinCapacity=1, MaxCapacity=3, **SCALING)
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", result.describe()
    assert result.output["scaling"] == {"scalable_targets": 1, "scaling_policies": 1}
    assert result.output["endpoint"] == {"status": "deleted"}
    left = autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [target["ResourceId"] for target in left] == [other]
    assert (
        autoscaling.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=variant)["ScalingPolicies"] == []
    )
    # As SageMaker requires: the scaling is gone before the endpoint delete is asked for.
    (policy,), (deregistered,), (deleted,) = (
        _calls(iam_audit, op) for op in ("DeleteScalingPolicy", "DeregisterScalableTarget", "DeleteEndpoint")
    )
    assert policy < deregistered < deleted

    again = executions.run(machine, FAST)

    assert again.status == "SUCCEEDED", again.describe()
    assert again.output["scaling"] == {"scalable_targets": 0, "scaling_policies": 0}


def test_parts_the_stack_never_deployed_are_skipped(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter, iam_audit: IamAudit
) -> None:
    # The template passes this placeholder when ImageTag/ModelDataPrefix were never set.
    substitutions = {**deployment.substitutions, "EndpointConfigName": "not-deployed", "ModelName": "not-deployed"}
    machine = executions.create("teardown", substitutions)

    result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", result.describe()
    assert result.output["endpoint_config"] == {"status": "not_deployed"}
    assert result.output["model"] == {"status": "not_deployed"}
    assert "DeleteEndpointConfig" not in result.entered() and "DeleteModel" not in result.entered()
    assert _calls(iam_audit, "DeleteEndpointConfig") == _calls(iam_audit, "DeleteModel") == []


def test_access_denied_for_a_part_that_is_gone_is_confirmed_by_describe(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter, iam_audit: IamAudit
) -> None:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker.delete_endpoint(EndpointName=deployment.endpoint)
    sagemaker.delete_endpoint_config(EndpointConfigName=deployment.endpoint_config)
    sagemaker.delete_model(ModelName=deployment.model)
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, FAST)

    assert result.status == "SUCCEEDED", result.describe()
    assert result.output["endpoint_config"] == {"status": "already_gone"}
    assert result.output["model"] == {"status": "already_gone"}
    # IAM answered AccessDenied (a missing part has no stack tag), as AWS does; Describe then
    # found nothing. Those refusals are AWS's behaviour, not a missing grant.
    refused = {violation.call.operation for violation in iam_audit.refused_absent}
    assert refused == {"DeleteEndpointConfig", "DeleteModel"}
    for delete, describe in (("DeleteEndpointConfig", "DescribeEndpointConfig"), ("DeleteModel", "DescribeModel")):
        assert _calls(iam_audit, delete)[0] < _calls(iam_audit, describe)[0]


def test_access_denied_for_a_part_that_exists_fails_with_the_reason(
    deployment: Deployment, executions: Executions, lambdas: LambdaRouter, iam_audit: IamAudit
) -> None:
    # A config of the same name that is not this stack's (no tag): the teardown must not delete it.
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    arn = sagemaker.describe_endpoint_config(EndpointConfigName=deployment.endpoint_config)["EndpointConfigArn"]
    sagemaker.delete_tags(ResourceArn=arn, TagKeys=["voicestream:stack"])
    machine = executions.create("teardown", deployment.substitutions)

    result = executions.run(machine, FAST)

    assert result.status == "FAILED", result.describe()
    assert result.cause is not None
    assert f"deleting endpoint config '{deployment.endpoint_config}' was denied although it exists" in result.cause
    assert "tagged voicestream:stack" in result.cause
    assert sagemaker.describe_endpoint_config(EndpointConfigName=deployment.endpoint_config)
    # The audit saw the refusal; it is the expected outcome here, so it does not fail the test.
    (violation,) = iam_audit.refused
    assert violation.call.operation == "DeleteEndpointConfig"
    iam_audit.refused.clear()
