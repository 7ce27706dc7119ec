"""The bridge that lets moto's Step Functions interpreter run our real state machines.

What moto does by itself (docs/platform-facts.md#sam): executes real ASL (`execute_state_machine`), serves the
aws-sdk integrations from its backends. What this file bridges:

- DefinitionSubstitutions: `render()` applies them to the real `statemachines/*.asl.json`, as
  CloudFormation does, and refuses a definition with a placeholder left over.
- Lambda tasks: moto's simple (docker-less) Lambda backend only echoes payloads. `LambdaRouter`
  replaces its `invoke` with a call into our real handler (`functions/<name>/app.py`), answering
  as the Lambda service does: the handler's JSON result, or on an exception the
  `{"errorType", "errorMessage", ...}` payload with the `X-Amz-Function-Error` header. It can
  also throttle an invoke (429 TooManyRequestsException), as the Lambda service does.
- Executions run on moto's worker thread; `Executions.run()` waits for the end (a safety bound,
  not a timing assertion) and returns the description plus the event history.
- IAM, which moto does not evaluate: `iam_audit` checks every AWS call of a test against the
  role the SAM-transformed template gives its caller (tests/support/iam). A handler's calls run
  as its function's role and are refused with AccessDenied when the role lacks them, as AWS
  would; each state machine's task calls (from its execution history) as the machine's role.
  The test then fails with every missing grant listed.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import threading
import time
import traceback
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.exceptions import JsonRESTError
from moto.sagemaker.models import sagemaker_backends

from tests.support.iam.audit import IamAudit
from tests.support.iam.calls import ApiCall, acting_as, gate
from tests.support.iam.stack import Stack
from tests.support.sam_template import audited_template, transform

REPO = Path(__file__).resolve().parents[2]
STATEMACHINES = REPO / "statemachines"
FUNCTIONS = REPO / "functions"
REGION = "us-east-1"
ACCOUNT = "123456789012"
ROLE_NAME = "voicestream-test-role"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME}"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
# An execution that runs longer than this is stuck; it fails the test with its history.
EXECUTION_BOUND_S = 600.0
# The stack the IAM audit renders: endpoint deployed, on the default (GPU) instance type.
AUDITED_PARAMETERS = {"ImageTag": "ctx-0123abcd", "ModelDataPrefix": "kokoro-82m/f3ff3571/"}


def render(name: str, substitutions: Mapping[str, str]) -> str:
    """`statemachines/<name>.asl.json` with `${Key}` replaced, as DefinitionSubstitutions do."""
    text = (STATEMACHINES / f"{name}.asl.json").read_text()
    missing = sorted({key for key in PLACEHOLDER.findall(text) if key not in substitutions})
    if missing:
        raise KeyError(f"{name}.asl.json needs substitutions for {missing}")
    return PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], text)


def placeholders(name: str) -> set[str]:
    return set(PLACEHOLDER.findall((STATEMACHINES / f"{name}.asl.json").read_text()))


def load_handler_module(function: str) -> ModuleType:
    """Import `functions/<function>/app.py` as its own module (three files are named app.py)."""
    path = FUNCTIONS / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"functions_{function}_app", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"


def principal_of(handler: Callable[[Any, Any], Any]) -> str:
    """`function:<dir>` for the handler of functions/<dir>/app.py (see load_handler_module)."""
    module = str(getattr(handler, "__module__", ""))
    if not (module.startswith("functions_") and module.endswith("_app")):
        raise ValueError(f"{handler!r} is not a handler loaded from functions/<name>/app.py")
    return "function:" + module.removeprefix("functions_").removesuffix("_app")


@dataclass
class LambdaContext:
    """What the Lambda runtime passes as `context` (Powertools reads these fields)."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    memory_limit_in_mb: int = 1024
    function_version: str = "$LATEST"
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"
    deadline_ms: int = field(default_factory=lambda: int(time.time() * 1000) + 900_000)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass
class Invocation:
    function: str
    event: Any
    error: str | None = None


class TooManyRequests(JsonRESTError):
    def __init__(self) -> None:
        super().__init__("TooManyRequestsException", "Rate Exceeded.")
        self.code = 429


class LambdaRouter:
    """Routes moto's Lambda invokes to our handlers, and records every invocation."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[[Any, Any], Any]] = {}
        self.principals: dict[str, str] = {}
        self.invocations: list[Invocation] = []
        self._throttles: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, handler: Callable[[Any, Any], Any]) -> str:
        """Create the function in moto (so its ARN is real) and route its invokes to `handler`."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("app.py", "# routed to the real handler by the test bridge\n")
        boto3.client("lambda", region_name=REGION).create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=ROLE_ARN,
            Handler="app.handler",
            Code={"ZipFile": buffer.getvalue()},
        )
        self.handlers[name] = handler
        self.principals[name] = principal_of(handler)
        return function_arn(name)

    def throttle(self, name: str, times: int) -> None:
        """The next `times` invokes of `name` get the Lambda service's 429, as under load."""
        self._throttles[name] = times

    def calls(self, name: str) -> list[Invocation]:
        return [i for i in self.invocations if i.function == name]

    def invoke(self, function_name: str, body: Any) -> tuple[bytes, str | None]:
        name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
        with self._lock:
            if self._throttles.get(name, 0) > 0:
                self._throttles[name] -= 1
                raise TooManyRequests()
        event = json.loads(body) if body else {}
        invocation = Invocation(name, event)
        self.invocations.append(invocation)
        context = LambdaContext(function_name=name, invoked_function_arn=function_arn(name))
        try:
            principal = self.principals.get(name) or principal_of(self.handlers[name])
            with acting_as(principal):  # its calls are audited as its role's
                result = self.handlers[name](event, context)
        except Exception as exc:  # the Lambda runtime reports every exception the same way
            invocation.error = type(exc).__name__
            payload = {
                "errorMessage": str(exc),
                "errorType": type(exc).__name__,
                "requestId": context.aws_request_id,
                "stackTrace": traceback.format_tb(exc.__traceback__),
            }
            return json.dumps(payload).encode(), "Unhandled"
        return json.dumps(result).encode(), None


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto with real ASL execution and docker-less Lambda; credentials and Powertools settings."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "voicestream-test",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        boto3.client("iam", region_name=REGION).create_role(
            RoleName=ROLE_NAME,
            AssumeRolePolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
        )
        yield


@pytest.fixture
def iam_audit(aws: None) -> Iterator[IamAudit]:
    """Every AWS call of the test checked against the template's roles (see the module doc)."""
    stack = Stack(audited_template(), transform(audited_template(), **AUDITED_PARAMETERS), AUDITED_PARAMETERS)
    # VOICESTREAM_IAM_ENFORCE=0: record only (every missing grant of a run listed at once, none refused).
    audit = IamAudit(stack, enforce=os.environ.get("VOICESTREAM_IAM_ENFORCE", "1") != "0")
    with gate(audit):
        yield audit
    for machine_arn, name in audit.machines.items():
        for call in state_machine_calls(machine_arn, f"statemachine:{name}"):
            audit.record(call)
    used = os.environ.get("VOICESTREAM_IAM_USED")  # a file to append role -> actions used (grant reviews)
    if used:
        with open(used, "a", encoding="utf-8") as out:
            out.write(json.dumps({role: sorted(actions) for role, actions in audit.actions_used().items()}) + "\n")
    violations = audit.violations()
    assert not violations, "calls the template's roles do not allow:\n" + "\n".join(map(str, violations))


def state_machine_calls(machine_arn: str, principal: str) -> Iterator[ApiCall]:
    """The service calls a machine's executions made (its Task states), from their histories."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    for execution in sfn.list_executions(stateMachineArn=machine_arn)["executions"]:
        history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
        for event in history:
            if event["type"] != "TaskScheduled":
                continue
            details = event["taskScheduledEventDetails"]
            service = details["resourceType"].removeprefix("aws-sdk:")
            operation = details["resource"][0].upper() + details["resource"][1:]
            yield ApiCall(principal, service, operation, json.loads(details["parameters"]))


@pytest.fixture
def lambdas(iam_audit: IamAudit, monkeypatch: pytest.MonkeyPatch) -> LambdaRouter:
    router = LambdaRouter()

    def invoke(
        backend: LambdaSimpleBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: dict[str, str],
    ) -> bytes:
        payload, function_error = router.invoke(function_name, body)
        if function_error:
            response_headers["x-amz-function-error"] = function_error
        return payload

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", invoke)
    return router


@dataclass
class Execution:
    arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    history: list[dict[str, Any]]

    def entered(self) -> list[str]:
        """The names of the states entered, in order."""
        return [
            e["stateEnteredEventDetails"]["name"]
            for e in self.history
            if e["type"].endswith("StateEntered") and "stateEnteredEventDetails" in e
        ]

    def describe(self) -> str:
        return f"{self.status} error={self.error!r} cause={self.cause!r} states={self.entered()}"


class Executions:
    """Creates state machines from the real ASL files and runs executions to the end. Each
    machine's substitutions tell the IAM audit which names the test gave the stack's resources."""

    def __init__(self, audit: IamAudit) -> None:
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.audit = audit

    def create(self, name: str, substitutions: Mapping[str, str]) -> str:
        answer = self.sfn.create_state_machine(
            name=f"{name}-{uuid.uuid4().hex[:8]}", definition=render(name, substitutions), roleArn=ROLE_ARN
        )
        self.audit.stack.bind_substitutions(name, substitutions)
        self.audit.machines[str(answer["stateMachineArn"])] = name
        return str(answer["stateMachineArn"])

    def start(self, machine_arn: str, payload: Mapping[str, Any] | None = None) -> str:
        answer = self.sfn.start_execution(
            stateMachineArn=machine_arn, name=f"run-{uuid.uuid4().hex[:12]}", input=json.dumps(payload or {})
        )
        return str(answer["executionArn"])

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            if not page.get("nextToken"):
                return events
            kwargs["nextToken"] = page["nextToken"]

    def wait_until(self, execution_arn: str, predicate: Callable[[list[dict[str, Any]]], bool]) -> None:
        """Block until the running execution's history satisfies `predicate` (used to drive state)."""
        bound = time.monotonic() + EXECUTION_BOUND_S
        while not predicate(self.history(execution_arn)):
            status = self.sfn.describe_execution(executionArn=execution_arn)["status"]
            assert status == "RUNNING", f"execution ended ({status}) before the awaited event"
            assert time.monotonic() < bound, "execution stuck before the awaited event"
            time.sleep(0.05)

    def finish(self, execution_arn: str) -> Execution:
        bound = time.monotonic() + EXECUTION_BOUND_S
        while True:
            described = self.sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                break
            if time.monotonic() > bound:
                pytest.fail(f"execution still running after {EXECUTION_BOUND_S} s: {self.history(execution_arn)}")
            time.sleep(0.05)
        output = described.get("output")
        return Execution(
            arn=execution_arn,
            status=described["status"],
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
            history=self.history(execution_arn),
        )

    def run(self, machine_arn: str, payload: Mapping[str, Any] | None = None) -> Execution:
        return self.finish(self.start(machine_arn, payload))


@pytest.fixture
def executions(iam_audit: IamAudit) -> Executions:
    return Executions(iam_audit)


ENDPOINT = "voicestream-kokoro"


@pytest.fixture
def endpoint(aws: None) -> Any:
    """A moto endpoint (born InService); tests move its status through moto's backend."""
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker.create_model(
        ModelName="kokoro-model", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={"Image": "kokoro:latest"}
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName="kokoro-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "kokoro-model",
                "InstanceType": "ml.m5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="kokoro-config")
    return sagemaker_backends[ACCOUNT][REGION].endpoints[ENDPOINT]
