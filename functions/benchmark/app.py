"""Benchmark task: one trial of an experiment (isolated | agent), or the aggregate report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from voicestream.aws.tasks.benchmark import Benchmarker, run_step
from voicestream.env import aws_region

logger = Logger(service="benchmark")
tracer = Tracer(service="benchmark")
metrics = Metrics(service="benchmark")

benchmarker = Benchmarker()


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    experiment = str(event.get("experiment"))
    metrics.add_metric(name=f"{experiment}_steps", unit=MetricUnit.Count, value=1)
    result = run_step(event, benchmarker, default_region=aws_region())
    for variant in ("whole", "sentences", "bidi", "batch"):
        if variant in result:
            seconds = float(result[variant]["first_audio_s"])
            metrics.add_metric(name=f"{variant}_first_audio_s", unit=MetricUnit.Seconds, value=seconds)
    logger.info("benchmark step done", extra={"experiment": experiment, "result": result})
    return result
