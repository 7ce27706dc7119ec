"""Teardown task: one idempotent deletion step per invoke (see voicestream.aws.tasks.teardown)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from voicestream.aws.tasks.teardown import Clients, run_step

logger = Logger(service="teardown")
tracer = Tracer(service="teardown")
metrics = Metrics(service="teardown")

clients = Clients()


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Mapping[str, Any], context: LambdaContext) -> Mapping[str, Any]:
    metrics.add_metric(name="TeardownSteps", unit=MetricUnit.Count, value=1)
    result = run_step(event, clients, time_left_s=lambda: context.get_remaining_time_in_millis() / 1000)
    logger.info("teardown step done", extra={"step": event.get("step"), "result": result})
    return result
