"""The server's open-sessions metric: a valid CloudWatch EMF line, written every interval."""

from __future__ import annotations

import json
import threading

from voicestream.env import Env
from voicestream.kokoro_server.session_metrics import (
    DIMENSION,
    METRIC,
    NAMESPACE,
    SessionMetricReporter,
    emf_line,
    reporter_from_env,
)


def test_the_line_is_embedded_metric_format_cloudwatch_extracts() -> None:
    record = json.loads(emf_line("voicestream-kokoro", 3, 16, 1_700_000_000_000))
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert record["_aws"]["Timestamp"] == 1_700_000_000_000
    assert directive["Namespace"] == NAMESPACE == "voicestream"
    assert directive["Metrics"] == [{"Name": "OpenSessions", "Unit": "Count"}]
    # Every dimension key and every metric name must be a member at the root (EMF's rules).
    assert directive["Dimensions"] == [[DIMENSION]] and record[DIMENSION] == "voicestream-kokoro"
    assert record[METRIC] == 3 and record["MaxSessions"] == 16
    assert "\n" not in emf_line("e", 0, 1, 0)  # one log event per line


def test_each_report_reads_the_count_at_that_moment() -> None:
    count = [0]
    lines: list[str] = []
    reporter = SessionMetricReporter("e", lambda: count[0], 16, write=lines.append, clock_ms=lambda: 42)
    reporter.report()
    count[0] = 5
    reporter.report()
    assert [json.loads(line)[METRIC] for line in lines] == [0, 5]


def test_the_thread_reports_at_once_then_every_interval_until_stopped() -> None:
    lines: list[str] = []
    third = threading.Event()

    def write(line: str) -> None:
        lines.append(line)
        if len(lines) >= 3:
            third.set()

    reporter = SessionMetricReporter("e", lambda: 1, 16, write=write, interval_s=0.001)
    reporter.start()
    assert third.wait(30), "the reporter thread wrote fewer than three lines"
    reporter.stop()
    written = len(lines)
    assert not any(t.name == "voicestream-session-metrics" for t in threading.enumerate())
    assert len(lines) == written  # nothing after stop


def test_only_an_endpoint_name_turns_it_on() -> None:
    assert reporter_from_env(lambda: 0, 16, Env({})) is None
    assert reporter_from_env(lambda: 0, 16, Env({"VOICESTREAM_METRICS_ENDPOINT": " "})) is None
    reporter = reporter_from_env(lambda: 0, 16, Env({"VOICESTREAM_METRICS_ENDPOINT": "voicestream-kokoro"}))
    assert reporter is not None and reporter.endpoint == "voicestream-kokoro"
