"""Running the stack's state machines from the command line and printing what they report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from voicestream.aws.clients import error_message
from voicestream.aws.deploy.errors import DeployError
from voicestream.aws.deploy.progress import Progress


def run_state_machine(
    sfn: Any,
    arn: str,
    payload: Mapping[str, Any],
    progress: Progress,
    *,
    label: str,
    poll_s: float = 5.0,
    timeout_s: float = 7200.0,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:
    """Start an execution, wait for it, return its output; DeployError with its cause on failure."""
    name = f"cli-{now():%Y%m%dT%H%M%S%f}"
    try:
        execution = sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps(dict(payload)))
    except ClientError as error:
        raise DeployError(f"cannot start {label} ({arn}): {error_message(error)}") from None
    execution_arn = str(execution["executionArn"])
    progress(f"      {label} execution {name} started")
    deadline = time.monotonic() + timeout_s
    while True:
        described = sfn.describe_execution(executionArn=execution_arn)
        status = described["status"]
        if status == "SUCCEEDED":
            output: dict[str, Any] = json.loads(described.get("output") or "{}")
            return output
        if status != "RUNNING":
            name, cause = described.get("error", ""), described.get("cause", "")
            raise DeployError(f"{label} {status}: {name}: {cause}".rstrip(": "))
        if time.monotonic() > deadline:
            raise DeployError(f"{label} still running after {timeout_s:.0f} s: {execution_arn}")
        sleep(poll_s)


def format_report(report: Mapping[str, Any]) -> list[str]:
    """Lines for a report: its `checks` (at the top or one level down, as deploy-validate nests
    them under `validation`) as a table, the rest as indented JSON."""
    nested = [key for key, value in report.items() if isinstance(value, Mapping) and "checks" in value]
    if "checks" not in report and nested:
        (key, *_) = nested
        rest = {k: v for k, v in report.items() if k != key}
        return format_report(report[key]) + (format_report(rest) if rest else [])
    lines: list[str] = []
    checks = report.get("checks")
    if isinstance(checks, list) and checks:
        width = max(len(str(c.get("name", ""))) for c in checks)
        for check in checks:
            mark = "PASS" if check.get("passed") else "FAIL"
            seconds = check.get("seconds")
            timing = f"{float(seconds):6.2f} s" if isinstance(seconds, int | float) else ""
            lines.append(f"  {mark}  {str(check.get('name', '')).ljust(width)}  {timing}  {check.get('detail', '')}")
        rest = {k: v for k, v in report.items() if k != "checks"}
        if rest:
            lines += ["  " + line for line in json.dumps(rest, indent=2, default=str).splitlines()]
        return lines
    return ["  " + line for line in json.dumps(dict(report), indent=2, default=str).splitlines()]
