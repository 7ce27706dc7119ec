"""The IAM audit's own parts: evaluation as IAM does it, and calls mapped to the checks AWS makes.

If these were wrong the audit of the state machine tier could pass a policy AWS would refuse.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.iam.actions import Authorization, UnknownAction, Where, authorizations
from tests.support.iam.calls import ApiCall
from tests.support.iam.policy import UnsupportedPolicy, decide

WHERE = Where("aws", "us-east-1", "123456789012")
ENDPOINT = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/voicestream-kokoro"


def allow(
    action: str | list[str], resource: str | list[str], condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return statement


def test_action_and_resource_patterns() -> None:
    statements = [allow("sagemaker:InvokeEndpoint", ENDPOINT), allow("s3:Get*", "arn:aws:s3:::b/models/*")]
    assert decide(statements, Authorization("sagemaker:invokeendpoint", ENDPOINT)) is None  # actions: any case
    assert decide(statements, Authorization("sagemaker:InvokeEndpoint", ENDPOINT + "-2")) is not None
    assert decide(statements, Authorization("s3:GetObject", "arn:aws:s3:::b/models/x.bin")) is None
    assert decide(statements, Authorization("s3:GetObject", "arn:aws:s3:::b/other/x.bin")) is not None
    assert decide(statements, Authorization("s3:PutObject", "arn:aws:s3:::b/models/x.bin")) is not None


def test_conditions_need_their_key_and_deny_wins() -> None:
    tagged = allow("sagemaker:DeleteModel", "*", {"StringEquals": {"aws:ResourceTag/stack": "voicestream"}})
    mine = Authorization("sagemaker:DeleteModel", "m", {"aws:ResourceTag/stack": "voicestream"})
    theirs = Authorization("sagemaker:DeleteModel", "m", {"aws:ResourceTag/stack": "other"})
    untagged = Authorization("sagemaker:DeleteModel", "m")
    assert decide([tagged], mine) is None
    assert decide([tagged], theirs) is not None
    assert decide([tagged], untagged) is not None  # no tag: the condition cannot hold
    if_exists = allow("sagemaker:DeleteModel", "*", {"StringEqualsIfExists": {"aws:ResourceTag/stack": "x"}})
    assert decide([if_exists], untagged) is None
    via_url = allow("lambda:InvokeFunction", "f", {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}})
    assert (
        decide([via_url], Authorization("lambda:InvokeFunction", "f", {"lambda:InvokedViaFunctionUrl": "true"})) is None
    )
    assert decide([via_url], Authorization("lambda:InvokeFunction", "f")) is not None
    deny = {"Effect": "Deny", "Action": "sagemaker:*", "Resource": "*", "Sid": "No"}
    assert "explicitly denied" in (decide([tagged, deny], mine) or "")
    with pytest.raises(UnsupportedPolicy):
        decide(
            [allow("s3:GetObject", "*", {"NumericLessThan": {"s3:max-keys": "10"}})], Authorization("s3:GetObject", "x")
        )


def test_calls_become_the_checks_aws_makes() -> None:
    def checks(service: str, operation: str, **params: object) -> list[tuple[str, str]]:
        call = ApiCall("function:x", service, operation, params)
        return [(c.action, c.resource) for c in authorizations(call, WHERE, {"http://u": "arn:f"})]

    # Streaming invocations are authorized as InvokeEndpoint (the one table), on the endpoint's lower-case ARN.
    assert ("sagemaker:InvokeEndpoint", ENDPOINT) in checks(
        "sagemaker", "InvokeEndpointWithBidirectionalStream", EndpointName="Voicestream-Kokoro"
    )
    deletes = checks(
        "s3", "DeleteObjects", Bucket="b", Delete={"Objects": [{"Key": "k", "VersionId": "1"}, {"Key": "j"}]}
    )
    assert deletes == [
        ("s3:DeleteObject", "arn:aws:s3:::b/k"), ("s3:DeleteObjectVersion", "arn:aws:s3:::b/k"),
        ("s3:DeleteObject", "arn:aws:s3:::b/j"),
    ]  # fmt: skip
    assert checks("lambda", "InvokeFunctionUrl", FunctionUrl="http://u") == [
        ("lambda:InvokeFunctionUrl", "arn:f"), ("lambda:InvokeFunction", "arn:f")
    ]  # fmt: skip
    assert checks("ecr", "ListImages", repositoryName="r") == [
        ("ecr:ListImages", "arn:aws:ecr:us-east-1:123456789012:repository/r")
    ]
    assert checks("sts", "GetCallerIdentity") == []
    with pytest.raises(UnknownAction):
        checks("sagemaker", "InvokeEndpointTwice", EndpointName="e")
