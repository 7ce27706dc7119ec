"""What the Step Functions tasks and the deploy commands share about talking to AWS.

Clients that back off (boto3's "standard" retry mode retries throttling with exponential
backoff and jitter), reading a ClientError's code and message, and one throttling error: when
the SDK gives up, a task raises `ThrottledError` so the state machine's Retry (whose error name
is this class's name) backs off once more at a coarser scale instead of failing the run.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from voicestream.wire.errors import CodedError

# Error codes AWS services use for "slow down", across S3, ECR, SageMaker and Lambda.
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
    }
)

RETRY_CONFIG = Config(retries={"mode": "standard", "max_attempts": 8})


class ThrottledError(CodedError):
    """AWS kept throttling after the SDK's own retries; the state machine retries the step."""


def client(service: str, region: str | None = None, session: boto3.Session | None = None) -> Any:
    """A client with standard-mode retries (`session` defaults to boto3's, the region to its)."""
    return (session or boto3).client(service, region_name=region, config=RETRY_CONFIG)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Message", ""))


def is_throttling(exc: ClientError) -> bool:
    return error_code(exc) in THROTTLING_CODES


def raise_if_throttled(exc: ClientError, what: str) -> None:
    """Turn a throttling ClientError into `ThrottledError` (the name the ASL Retry matches)."""
    if is_throttling(exc):
        raise ThrottledError(f"{what}: throttled by AWS ({error_code(exc)}): {error_message(exc)}") from exc
