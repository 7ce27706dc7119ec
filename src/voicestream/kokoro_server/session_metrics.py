"""Open sessions as a CloudWatch metric: one embedded-metric-format (EMF) line per interval.

SageMaker does not document whether its ConcurrentRequestsPerModel metric counts open
bidirectional sessions, so the server reports them itself. A SageMaker container's stdout goes
to the endpoint's log group, where CloudWatch Logs turns EMF lines into metrics (no API call and
no permission needed). Every instance writes a line every `interval_s`, idle or not, so the
metric's average over a period is open sessions per instance (what the template's sessions
scaling policy tracks) and its absence means the reporting stopped (an alarm says so).

Enabled by VOICESTREAM_METRICS_ENDPOINT (the template sets it to the endpoint's name, the
metric's one dimension); unset, nothing is written.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

from voicestream import env as env_module

NAMESPACE = "voicestream"
METRIC = "OpenSessions"
DIMENSION = "EndpointName"
INTERVAL_S = 10.0


def emf_line(endpoint: str, open_sessions: int, max_sessions: int, timestamp_ms: int) -> str:
    """One EMF log line: metric OpenSessions (Count) in namespace voicestream, by EndpointName."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [
                    {
                        "Namespace": NAMESPACE,
                        "Dimensions": [[DIMENSION]],
                        "Metrics": [{"Name": METRIC, "Unit": "Count"}],
                    }
                ],
            },
            DIMENSION: endpoint,
            METRIC: open_sessions,
            "MaxSessions": max_sessions,  # a property, not a metric: context for whoever reads the log
            "event": "open_sessions",
        },
        separators=(",", ":"),
    )


def _write_stdout(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class SessionMetricReporter:
    """Writes the open-session count every `interval_s` from a daemon thread until stopped."""

    def __init__(
        self,
        endpoint: str,
        open_sessions: Callable[[], int],
        max_sessions: int,
        *,
        write: Callable[[str], None] = _write_stdout,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.endpoint = endpoint
        self._open_sessions = open_sessions
        self._max_sessions = max_sessions
        self._write = write
        self._clock_ms = clock_ms
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def report(self) -> str:
        """Write one line now (also the first thing the thread does); the line written."""
        line = emf_line(self.endpoint, self._open_sessions(), self._max_sessions, self._clock_ms())
        self._write(line)
        return line

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="voicestream-session-metrics", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self.report()
            self._stopped.wait(self._interval_s)


def reporter_from_env(
    open_sessions: Callable[[], int], max_sessions: int, environment: env_module.Env | None = None
) -> SessionMetricReporter | None:
    """The reporter VOICESTREAM_METRICS_ENDPOINT asks for, or None when it is unset or empty."""
    endpoint = (environment or env_module.Env()).get(env_module.METRICS_ENDPOINT)
    return SessionMetricReporter(endpoint, open_sessions, max_sessions) if endpoint else None
