"""Validation task of deploy-validate: run the endpoint checks, return the report.

The report comes back even when checks fail (the state machine fails the execution with the
report's `cause`); an exception means the task itself could not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from voicestream.aws.tasks.checks import ValidationSettings
from voicestream.aws.tasks.validate import EndpointValidator
from voicestream.env import aws_region

logger = Logger(service="validate")
tracer = Tracer(service="validate")
metrics = Metrics(service="validate")

validator = EndpointValidator()


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = ValidationSettings.from_event(event, default_region=aws_region())
    report = validator.run(settings)
    for check in report.checks:
        metrics.add_metric(name=f"{check.name}_seconds", unit=MetricUnit.Seconds, value=check.seconds)
    metrics.add_metric(name="ValidationFailed", unit=MetricUnit.Count, value=0 if report.passed else 1)
    logger.info(report.summary, extra={"report": report.to_dict()})
    return report.to_dict()
