"""Powertools for the speak function: structured logs with correlation ids, X-Ray tracing, EMF.

- Logs: one JSON object per line (Powertools Logger). Every line logged while serving a reply,
  ours and the core's (`voicestream.speak.*`), carries that reply's `correlation_id`, `mode`
  and `transport`: the keys live in a context variable, so concurrent replies do not mix.
- Tracing: a `## speak` subsegment per reply with mode/status annotations. Powertools turns
  the tracer off outside Lambda. Under the Lambda Web Adapter the app is a separate process
  that only gets the trace id as the `x-amzn-trace-id` header; the X-Ray SDK reads it from
  `_X_AMZN_TRACE_ID`, so it is copied there (a Lambda environment serves one request at a time).
- Metrics: CloudWatch embedded metric format, flushed per reply with dimension `mode`:
  TimeToFirstAudio, TimeToFirstText, TimeToFirstSentence, ReplyDuration (ms) and Replies /
  ReplyErrors / ReplyCancelled (counts).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, TextIO

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from voicestream import env
from voicestream.env import Env
from voicestream.wire.speak import Done, SpeakEvent

_CORE_LOGGER = "voicestream.speak"
_MAX_CORRELATION_ID = 128


def correlation_id(headers: Mapping[str, str]) -> str:
    """The caller's id (X-Correlation-Id, else X-Request-Id) if it is sane, else a new one."""
    for name in ("x-correlation-id", "x-request-id"):
        value = headers.get(name, "").strip()
        if value and len(value) <= _MAX_CORRELATION_ID and value.isprintable():
            return value
    return str(uuid.uuid4())


class Telemetry:
    """`stream` is where log lines go (stdout by default, which Lambda ships to CloudWatch);
    `metrics=False` keeps EMF records off stdout (the demo prints its table there)."""

    def __init__(self, service: str, namespace: str, stream: TextIO | None = None, metrics: bool = True) -> None:
        self.service = service
        self.namespace = namespace
        self.metrics = metrics
        self.logger = Logger(service=service, stream=stream)
        self.in_lambda = Env().get(env.LAMBDA_TASK_ROOT) is not None
        self.tracer = Tracer(service=service)
        # The core logs through stdlib loggers: route them through this logger's JSON handler
        # (and so its keys). One handler only: the newest app's.
        core = logging.getLogger(_CORE_LOGGER)
        for old in [h for h in core.handlers if getattr(h, "_voicestream_speak", False)]:
            core.removeHandler(old)
        handler = self.logger.registered_handler
        handler._voicestream_speak = True  # type: ignore[attr-defined]
        core.addHandler(handler)
        core.setLevel(self.logger.log_level)
        core.propagate = False

    def bind(self, headers: Mapping[str, str]) -> str:
        """Start a request's context: its correlation id on every log line (context-local, so
        concurrent requests do not mix) and its X-Ray trace id. Returns the correlation id."""
        cid = correlation_id(headers)
        self.logger.thread_safe_append_keys(correlation_id=cid)
        trace_header = headers.get("x-amzn-trace-id")
        if trace_header and self.in_lambda:
            env.export("_X_AMZN_TRACE_ID", trace_header)
        return cid

    def tag(self, **keys: Any) -> None:
        """More keys for every later log line of the current request."""
        self.logger.thread_safe_append_keys(**keys)

    def reply(self, mode: str, transport: str) -> ReplyObserver:
        return ReplyObserver(self, mode, transport)


class ReplyObserver:
    """Watches one reply's events go out; logs and measures it when it ends."""

    def __init__(self, telemetry: Telemetry, mode: str, transport: str) -> None:
        self.telemetry = telemetry
        self.mode = mode
        self.transport = transport
        self.done: Done | None = None
        self.events = 0

    def see(self, event: SpeakEvent) -> None:
        self.events += 1
        if isinstance(event, Done):
            self.done = event

    @contextlib.asynccontextmanager
    async def traced(self) -> AsyncIterator[None]:
        async with self.telemetry.tracer.provider.in_subsegment_async("## speak") as subsegment:
            subsegment.put_annotation("mode", self.mode)
            subsegment.put_annotation("transport", self.transport)
            try:
                yield
            finally:
                subsegment.put_annotation("status", self.status)

    @property
    def status(self) -> str:
        return self.done.status if self.done is not None else "cancelled"

    def finish(self) -> None:
        """Log the outcome and flush this reply's metrics (EMF on stdout)."""
        done = self.done
        timings = done.timings if done is not None else None
        self.telemetry.logger.info(
            "speak finished",
            extra={
                "status": self.status,
                "events": self.events,
                "first_text_ms": timings.first_text_ms if timings else None,
                "first_sentence_ms": timings.first_sentence_ms if timings else None,
                "first_audio_ms": timings.first_audio_ms if timings else None,
                "total_ms": timings.total_ms if timings else None,
                "sentences": done.sentences if done else None,
                "audio_ms": done.audio_ms if done else None,
            },
        )
        if not self.telemetry.metrics:
            return
        metrics = EphemeralMetrics(namespace=self.telemetry.namespace, service=self.telemetry.service)
        metrics.add_dimension(name="mode", value=self.mode)
        metrics.add_metric(name="Replies", unit=MetricUnit.Count, value=1)
        metrics.add_metric(name="ReplyErrors", unit=MetricUnit.Count, value=int(self.status == "error"))
        metrics.add_metric(name="ReplyCancelled", unit=MetricUnit.Count, value=int(self.status == "cancelled"))
        if timings is not None:
            for name, value in (
                ("TimeToFirstAudio", timings.first_audio_ms),
                ("TimeToFirstText", timings.first_text_ms),
                ("TimeToFirstSentence", timings.first_sentence_ms),
                ("ReplyDuration", timings.total_ms),
            ):
                if value is not None:
                    metrics.add_metric(name=name, unit=MetricUnit.Milliseconds, value=value)
        metrics.flush_metrics()
