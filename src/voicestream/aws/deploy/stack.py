"""The CloudFormation stack: its outputs, and parameter updates that create or change the endpoint."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from voicestream.aws.clients import error_message
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.progress import Progress

CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"]
FAILED_SUFFIXES = ("_FAILED", "ROLLBACK_COMPLETE")
NO_ECHO = "****"


@dataclass(frozen=True)
class Stack:
    name: str
    status: str
    outputs: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)

    def output(self, key: str) -> str:
        value = self.outputs.get(key)
        if not value:
            raise DeployError(f"stack {self.name} has no output {key!r}: deploy the stack first (`voicestream deploy`)")
        return value

    @property
    def settled(self) -> bool:
        return not self.status.endswith("_IN_PROGRESS")

    @property
    def usable(self) -> bool:
        return self.status in {"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE"}


def describe(cfn: Any, name: str) -> Stack | None:
    """The stack, or None when there is none of that name."""
    try:
        (found,) = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError as error:
        if "does not exist" in error_message(error):
            return None
        raise DeployError(f"cannot read stack {name}: {error_message(error)}") from None
    return Stack(
        name=name,
        status=str(found["StackStatus"]),
        outputs={o["OutputKey"]: str(o.get("OutputValue", "")) for o in found.get("Outputs", [])},
        parameters={p["ParameterKey"]: str(p.get("ParameterValue", "")) for p in found.get("Parameters", [])},
    )


def set_parameters(
    cfn: Any,
    stack: Stack,
    values: Mapping[str, str],
    progress: Progress,
    *,
    poll_s: float = 15.0,
    timeout_s: float = 3600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Stack:
    """Update only `values` of the stack's parameters (same template, the rest unchanged) and
    wait for CloudFormation to finish. A stack that already has them is left alone."""
    if all(stack.parameters.get(key) == value for key, value in values.items()):
        progress("      parameters already set: " + ", ".join(f"{k}={v}" for k, v in values.items()))
        return stack
    # The others keep their current values, passed as read (UsePreviousValue only for a masked
    # NoEcho value: moto, which the tests deploy to, resolves it for explicit parameters only).
    parameters: list[dict[str, Any]] = [
        {"ParameterKey": key, "UsePreviousValue": True}
        if key not in values and current == NO_ECHO
        else {"ParameterKey": key, "ParameterValue": values.get(key, current)}
        for key, current in stack.parameters.items()
    ]
    started = time.time()
    try:
        cfn.update_stack(
            StackName=stack.name, UsePreviousTemplate=True, Parameters=parameters, Capabilities=CAPABILITIES
        )
    except ClientError as error:
        if "No updates are to be performed" in error_message(error):
            return stack
        raise DeployError(f"cannot update stack {stack.name}: {error_message(error)}") from None
    return wait(cfn, stack.name, progress, since=started, poll_s=poll_s, timeout_s=timeout_s, sleep=sleep)


def wait(
    cfn: Any,
    name: str,
    progress: Progress,
    *,
    since: float,
    poll_s: float = 15.0,
    timeout_s: float = 3600.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Stack:
    """Poll until the stack settles, printing its resource events as they happen."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        failures = _report_events(cfn, name, since, seen, progress)
        stack = describe(cfn, name)
        if stack is None:
            raise DeployError(f"stack {name} disappeared while it was being updated")
        if stack.settled:
            if stack.status.endswith(FAILED_SUFFIXES) or "ROLLBACK" in stack.status:
                detail = "; ".join(failures) or "see the stack's events in the CloudFormation console"
                raise DeployError(f"stack {name} ended {stack.status}: {detail}")
            return stack
        if time.monotonic() > deadline:
            raise DeployError(f"stack {name} still {stack.status} after {timeout_s:.0f} s; run the command again later")
        sleep(poll_s)


def _report_events(cfn: Any, name: str, since: float, seen: set[str], progress: Progress) -> list[str]:
    failures: list[str] = []
    events = cfn.describe_stack_events(StackName=name).get("StackEvents", [])
    for event in reversed(events):  # oldest first
        stamp = event.get("Timestamp")
        if event["EventId"] in seen or (stamp is not None and stamp.timestamp() < since - 1):
            continue
        seen.add(event["EventId"])
        status, reason = str(event.get("ResourceStatus", "")), str(event.get("ResourceStatusReason", "") or "")
        progress(f"      {event.get('LogicalResourceId', '?')}: {status}" + (f" ({reason})" if reason else ""))
        if status.endswith("_FAILED") and reason:
            failures.append(f"{event.get('LogicalResourceId')}: {reason}")
    return failures
