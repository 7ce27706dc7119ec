"""Server settings from the environment, and the JSON log format."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

from voicestream.server.config import ServerConfig
from voicestream.server.logs import JsonFormatter, capture_json_logs, log_event, request_id_var, session_id_var


def test_config_from_env() -> None:
    config = ServerConfig.from_env(
        {
            "VOICESTREAM_BACKEND": "torch",
            "VOICESTREAM_MODEL_DIR": "/opt/ml/model",
            "VOICESTREAM_THREADS": "3",
            "VOICESTREAM_SYNTH_WORKERS": "4",
            "VOICESTREAM_LOG_LEVEL": "debug",
        }
    )
    assert config == ServerConfig("torch", Path("/opt/ml/model"), 3, 4, "DEBUG")
    assert ServerConfig.from_env({}) == ServerConfig()


@pytest.mark.parametrize(
    "env", [{"VOICESTREAM_THREADS": "two"}, {"VOICESTREAM_SYNTH_WORKERS": "0"}, {"VOICESTREAM_THREADS": "-1"}]
)
def test_bad_config_is_refused_clearly(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"threads|workers|THREADS|WORKERS"):
        ServerConfig.from_env(env)


def test_log_lines_are_json_with_both_ids() -> None:
    out = io.StringIO()
    handler = capture_json_logs(out)
    try:
        session_token = session_id_var.set("s1")
        log_event("session_open")
        request_token = request_id_var.set("r1")
        log_event("request_done", audio_ms=12.5, session_id="reserved keys are not overwritten")
        log_event("queued", request_id="r2", level=logging.WARNING)
        request_id_var.reset(request_token)
        session_id_var.reset(session_token)
    finally:
        logging.getLogger("voicestream").removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["session_id"], line["request_id"]) for line in lines] == [
        ("session_open", "s1", None),
        ("request_done", "s1", "r1"),
        ("queued", "s1", "r2"),
    ]
    assert lines[1]["audio_ms"] == 12.5 and lines[2]["level"] == "WARNING"


def test_formatter_handles_foreign_records_and_exceptions() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.getLogger("uvicorn.error").makeRecord(
            "uvicorn.error", logging.ERROR, __file__, 1, "failed %s", ("x",), exc_info=sys.exc_info()
        )
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "failed x" and line["logger"] == "uvicorn.error"
    assert "ValueError: boom" in line["exception"] and line["request_id"] is None
