"""Every AWS API call the code under test makes, and who makes it.

Who: a contextvar names the principal (`function:<dir>` for functions/<dir>/app.py, `speak`,
`statemachine:<asl name>`); the test bridges set it where they run a handler or an app. Calls
made with no principal (the tests' own setup) are not recorded.

What: a botocore handler (added to botocore's BUILTIN_HANDLERS, as moto adds its own, so every
client any session builds has it) sees each call's service, operation and API parameters before
it is sent. Transports botocore does not carry (the HTTP/2 bidi stream, a function URL) report
their calls through `record_transport_call`. The active `Gate` may refuse a call (it then fails
with AccessDenied, as AWS would) and keeps the record.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError
from botocore.handlers import BUILTIN_HANDLERS

PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar("voicestream_iam_principal", default=None)
_SUPPRESSED: contextvars.ContextVar[bool] = contextvars.ContextVar("voicestream_iam_suppressed", default=False)


@dataclass(frozen=True)
class ApiCall:
    principal: str
    service: str  # IAM service prefix: "s3", "sagemaker", "application-autoscaling", ...
    operation: str  # API operation: "DeleteObjects"
    params: Mapping[str, Any]
    resource_tags: Mapping[str, str] | None = None  # tags of the target, for aws:ResourceTag conditions
    resource_missing: bool = False  # the target does not exist (a tag condition cannot hold then)

    def describe(self) -> str:
        from .actions import describe_params

        return f"{self.principal}: {self.service}.{self.operation}({describe_params(self.params)})"


class Gate(Protocol):
    def admit(self, call: ApiCall) -> str | None:
        """Record the call; None when IAM would allow it, else why not."""


_gate: Gate | None = None


@contextlib.contextmanager
def gate(active: Gate) -> Iterator[Gate]:
    global _gate
    _gate = active
    try:
        yield active
    finally:
        _gate = None


@contextlib.contextmanager
def acting_as(principal: str) -> Iterator[None]:
    token = PRINCIPAL.set(principal)
    try:
        yield
    finally:
        PRINCIPAL.reset(token)


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    token = _SUPPRESSED.set(True)
    try:
        yield
    finally:
        _SUPPRESSED.reset(token)


def access_denied(operation: str, reason: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": reason}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        operation,
    )


def record_transport_call(service: str, operation: str, params: Mapping[str, Any]) -> str | None:
    """For a fake service at the transport layer: record the call of the current principal;
    None when allowed (or not audited), else the reason to refuse it."""
    principal = PRINCIPAL.get()
    if _gate is None or principal is None:
        return None
    return _gate.admit(ApiCall(principal, service, operation, dict(params)))


# SageMaker parts whose policy conditions on the resource's tags: their tags are read at call time.
TAGGED_SAGEMAKER = {"EndpointConfigName": "endpoint-config", "ModelName": "model", "EndpointName": "endpoint"}
MOTO_ACCOUNT = "123456789012"


def _resource_tags(region: str, params: Mapping[str, Any]) -> tuple[Mapping[str, str] | None, bool]:
    """(tags, missing) of the SageMaker resource the call names."""
    import boto3

    for key, kind in TAGGED_SAGEMAKER.items():
        if key in params:
            arn = f"arn:aws:sagemaker:{region}:{MOTO_ACCOUNT}:{kind}/{str(params[key]).lower()}"
            with unrecorded():
                try:
                    found = boto3.client("sagemaker", region_name=region).list_tags(ResourceArn=arn).get("Tags", [])
                except Exception:
                    return {}, True
            return {tag["Key"]: tag["Value"] for tag in found}, False
    return None, False


def _before_parameter_build(params: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
    principal = PRINCIPAL.get()
    if _gate is None or principal is None or _SUPPRESSED.get():
        return
    service_model = model.service_model
    service = str(service_model.signing_name or service_model.endpoint_prefix)
    tags, missing = None, False
    if service_model.service_name == "sagemaker":
        tags, missing = _resource_tags(str(context.get("client_region") or "us-east-1"), params)
    refused = _gate.admit(ApiCall(principal, service, model.name, dict(params), tags, missing))
    if refused is not None:
        raise access_denied(model.name, refused)


BUILTIN_HANDLERS.append(("before-parameter-build", _before_parameter_build))
